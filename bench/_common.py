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
TAG = ""  # run_cli's --tag: appended to every results name this run writes, so a re-run keeps the earlier file
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
    """Write bench/results/NAME.json and .md (NAME-TAG.* with `--tag TAG`; NAME-quick.* for smoke
    runs, which are not committed)."""
    if TAG:
        name, command = f"{name}-{TAG}", f"{command} --tag {TAG}"
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
    tag_flag(p)
    if flags is not None:
        flags(p)
    sys.exit(main(tagged(p.parse_args())))


def tag_flag(p) -> None:
    """`--tag TAG` on a benchmark's parser (run_cli's; a benchmark with a parser of its own adds it
    here and passes its parsed flags through `tagged`)."""
    p.add_argument("--tag", type=_tag, default=None,
                   help="append -TAG to the results' names (bench/results/NAME-TAG.md), so a re-run does not "
                        "overwrite an earlier run's files")


def tagged(args):
    """`args` after taking its --tag for every write_results of this run."""
    global TAG
    TAG = getattr(args, "tag", None) or ""
    return args


def _tag(text: str) -> str:
    """A results-name suffix: letters, digits, dots and dashes only (it becomes part of a file name)."""
    import argparse
    import re

    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9.-]*", text):
        raise argparse.ArgumentTypeError(f"{text!r}: letters, digits, dots and dashes only")
    return text


class RawBandwidth:
    """The machine's raw figures on a set of files, to set a load beside: parallel `preadv` of the
    files into reused buffers, and parallel SHA-256 of the same bytes mapped from the page cache
    (no copy). Open it, measure any number of times, close it (the mappings)."""

    def __init__(self, paths: list[Path]) -> None:
        import mmap

        self.paths = list(paths)
        self.nbytes = sum(p.stat().st_size for p in self.paths)
        self._largest = max(p.stat().st_size for p in self.paths)
        self._buffers: list[bytearray] = []
        self._maps = []
        for p in self.paths:
            with open(p, "rb") as f:
                self._maps.append(mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ,
                                            flags=mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0)))

    def read_s(self, threads: int) -> float:
        """Seconds to read every file on `threads` threads."""
        import time
        from concurrent.futures import ThreadPoolExecutor

        import threading

        mine = threading.local()  # one reused buffer per worker thread

        def read(i: int) -> None:
            if not hasattr(mine, "buf"):
                with lock:
                    mine.buf = self._buffers.pop() if self._buffers else bytearray(self._largest)
                    held.append(mine.buf)
            buf = memoryview(mine.buf)
            fd = os.open(self.paths[i], os.O_RDONLY)
            try:
                size = os.fstat(fd).st_size
                if os.preadv(fd, [buf[:size]], 0) != size:
                    raise OSError(f"short read of {self.paths[i]}")
            finally:
                os.close(fd)

        lock, held = threading.Lock(), []
        t = time.perf_counter()
        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(read, range(len(self.paths))))
        seconds = time.perf_counter() - t
        self._buffers += held  # touched already: the next measurement reuses them
        return seconds

    def sha256_s(self, threads: int) -> float:
        """Seconds to SHA-256 every file's bytes on `threads` threads."""
        import hashlib
        import time
        from concurrent.futures import ThreadPoolExecutor

        t = time.perf_counter()
        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(lambda m: hashlib.sha256(m).digest(), self._maps))
        return time.perf_counter() - t

    def close(self) -> None:
        for m in self._maps:
            m.close()
        self._maps, self._buffers = [], []
