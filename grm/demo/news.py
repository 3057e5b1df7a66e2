"""Real text nobody at GRM wrote, for the demo and the benchmarks: the Lee news corpus (300 short
Australian news articles, one per line) that ships inside the gensim wheel.

It is fetched once through pip (`pip download --no-deps gensim==4.4.0`, no install) and the one
member is extracted into `$GRM_CACHE/data/lee_background.cor`; nothing else of gensim is used.
"""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

from grm.errors import UserInputError

GENSIM = "gensim==4.4.0"
NEWS_MEMBER = "gensim/test/test_data/lee_background.cor"


def cache_dir() -> Path:
    return Path(os.environ.get("GRM_CACHE") or Path.home() / ".cache" / "grm").expanduser()


def news_corpus() -> list[str]:
    """The Lee news corpus, one article a string, fetched once via pip and cached."""
    target = cache_dir() / "data" / "lee_background.cor"
    if not target.exists():
        wheels = cache_dir() / "data" / "wheels"
        wheels.mkdir(parents=True, exist_ok=True)
        found = sorted(wheels.glob("gensim-4.4.0-*.whl"))
        if not found:
            cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "--only-binary=:all:",
                   GENSIM, "-d", str(wheels)]
            proc = subprocess.run(cmd, capture_output=True, text=True)
            found = sorted(wheels.glob("gensim-4.4.0-*.whl"))
            if proc.returncode != 0 or not found:
                raise UserInputError(f"cannot fetch the demo's news text through pip ({GENSIM}): "
                                     f"{proc.stderr.strip().splitlines()[-1:] or 'no wheel'}; run: {' '.join(cmd)}")
        with zipfile.ZipFile(found[0]) as zf:
            data = zf.read(NEWS_MEMBER)
        tmp = target.with_suffix(".tmp")
        tmp.write_bytes(data)
        tmp.replace(target)
    text = target.read_text("utf-8", errors="replace")
    return [line.strip() for line in text.splitlines() if line.strip()]


def news_document(first: int, last: int) -> str:
    """Articles first..last-1 joined by blank lines, ending with a newline, as a text file would."""
    return "\n\n".join(news_corpus()[first:last]) + "\n"
