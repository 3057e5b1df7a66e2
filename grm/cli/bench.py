"""`grm bench NAME` (a benchmark from the checkout's bench/ folder) and `grm demo`."""

from __future__ import annotations

import argparse
from pathlib import Path

from grm.cli.common import MAX_NEW_TOKENS_HELP, positive_int
from grm.errors import UserInputError

BENCH_DIR = Path(__file__).resolve().parents[2] / "bench"  # present in a checkout, not in a wheel


def add_parser(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("demo", parents=[common], help="ingest a small corpus, answer cold and warm, show the savings",
                       description="Ingest a small corpus, answer questions cold (no memory) and warm (a new "
                       "process loading stored K/V), and print what memory saved.")
    p.add_argument("--max-new-tokens", type=positive_int, default=16, metavar="N", help=MAX_NEW_TOKENS_HELP)
    p.set_defaults(handler=run_demo)

    p = sub.add_parser("bench", parents=[common], help="run a benchmark into bench/results/",
                       description="Run bench/NAME.py; it writes bench/results/NAME.json and .md.")
    p.add_argument("name", metavar="NAME", help="the benchmark (bench/NAME.py)")
    p.add_argument("--quick", action="store_true", help="a smaller run (for smoke tests)")
    p.set_defaults(handler=run_bench)


def run_bench(args: argparse.Namespace) -> int:
    import runpy

    script = BENCH_DIR / f"{args.name}.py"
    if not args.name.isidentifier() or not script.exists():
        names = sorted(p.stem for p in BENCH_DIR.glob("*.py") if not p.stem.startswith("_"))
        raise UserInputError(f"no benchmark {args.name!r}; known: {', '.join(names) or 'none'}")
    module = runpy.run_path(str(script))
    return int(module["main"](args) or 0)


def run_demo(args: argparse.Namespace) -> int:
    from grm.demo.run import run_demo as demo

    return demo(args)
