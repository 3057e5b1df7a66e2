"""Shared by the benchmarks: real text (the gensim news corpus, fetched through pip), machine
facts, and writing results as JSON + a short markdown table under bench/results/."""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import subprocess
import sys
import zipfile
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"
GENSIM = "gensim==4.4.0"
NEWS_MEMBER = "gensim/test/test_data/lee_background.cor"


def cache_dir() -> Path:
    return Path(os.environ.get("GRM_CACHE") or Path.home() / ".cache" / "grm")


def news_corpus() -> list[str]:
    """The Lee news corpus (one article per line), from the gensim wheel, fetched once via pip."""
    target = cache_dir() / "data" / "lee_background.cor"
    if not target.exists():
        wheels = cache_dir() / "data" / "wheels"
        wheels.mkdir(parents=True, exist_ok=True)
        found = sorted(wheels.glob("gensim-4.4.0-*.whl"))
        if not found:
            subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "--only-binary=:all:",
                            GENSIM, "-d", str(wheels)], check=True)
            found = sorted(wheels.glob("gensim-4.4.0-*.whl"))
        with zipfile.ZipFile(found[0]) as zf:
            data = zf.read(NEWS_MEMBER)
        tmp = target.with_suffix(".tmp")
        tmp.write_bytes(data)
        tmp.replace(target)
    text = target.read_text("utf-8", errors="replace")
    return [line.strip() for line in text.splitlines() if line.strip()]


def machine() -> dict:
    return {"processor": platform.processor() or platform.machine(), "cpus": os.cpu_count(),
            "python": platform.python_version(), "platform": platform.platform()}


def write_results(name: str, data: dict, table: list[str], command: str, quick: bool = False) -> None:
    """Write bench/results/NAME.json and .md (NAME-quick.* for smoke runs, which are not committed)."""
    if quick:
        name, command = f"{name}-quick", f"{command} --quick"
    RESULTS.mkdir(parents=True, exist_ok=True)
    now = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    data = {"benchmark": name, "command": command, "date": now, "machine": machine(), **data}
    (RESULTS / f"{name}.json").write_text(json.dumps(data, indent=2) + "\n")
    m = data["machine"]
    head = [f"# {name}", "", f"- command: `{command}`", f"- date: {now}",
            f"- machine: {m['processor']}, {m['cpus']} CPUs, Python {m['python']}", ""]
    (RESULTS / f"{name}.md").write_text("\n".join(head + table) + "\n")


def run_cli(main) -> None:
    """`python bench/NAME.py [--model M] [--threads N] [--quick]`: the same flags `grm bench` passes."""
    import argparse

    p = argparse.ArgumentParser()
    p.add_argument("--model", default=None)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--quick", action="store_true")
    sys.exit(main(p.parse_args()))
