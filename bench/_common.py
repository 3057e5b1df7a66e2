"""Shared by the benchmarks: real text (the gensim news corpus, fetched through pip), machine
facts, and writing results as JSON + a short markdown table under bench/results/."""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import sys
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the checkout's grm, when run as a script
from grm.demo.news import GENSIM, NEWS_MEMBER, cache_dir, news_corpus  # noqa: E402,F401  (one fetcher)


SEALED = Path(__file__).resolve().parent / "data" / "sealed"


def sealed(kind: str) -> dict[str, list]:
    """Splits kept in bench/data/sealed/KIND-NAME.json ({"written": "...", "items": [...]}), by
    NAME: written by someone who had not seen the code they measure, and not read by its author
    before their first run, so that run is a blind figure. Each item a list, as the benchmark's
    own splits are."""
    out = {}
    for f in sorted(SEALED.glob(f"{kind}-*.json")):
        out[f.stem[len(kind) + 1:]] = [tuple(x) if not isinstance(x, str) else x for x in json.loads(f.read_text())["items"]]
    return out


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


def run_cli(main, flags=None) -> None:
    """`python bench/NAME.py [--model M] [--threads N] [--quick]`: the same flags `grm bench` passes;
    `flags(parser)` adds a benchmark's own."""
    import argparse

    p = argparse.ArgumentParser()
    p.add_argument("--model", default=None)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--quick", action="store_true")
    if flags is not None:
        flags(p)
    sys.exit(main(p.parse_args()))
