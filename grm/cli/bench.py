"""`grm bench NAME` (a benchmark from the checkout's bench/ folder) and `grm demo`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from grm.cli.common import MAX_NEW_TOKENS_HELP, positive_int, seconds
from grm.demo.run import COLD_BUDGET_S
from grm.errors import UserInputError

BENCH_DIR = Path(__file__).resolve().parents[2] / "bench"  # present in a checkout, not in a wheel
NEED_CHECKOUT = ("benchmarks need a source checkout: run `grm bench` from a clone of the GRM repository "
                 "(its bench/ folder sits next to grm/; an installed package has none)")


def benchmarks(bench_dir: Path | None = None) -> list[str] | None:
    """The checkout's benchmark names (bench/NAME.py), or None when GRM runs from an installed
    package (no bench/ folder of ours next to the grm package)."""
    bench_dir = BENCH_DIR if bench_dir is None else bench_dir
    if not (bench_dir / "_common.py").is_file() or not (bench_dir / "lib").is_dir():
        return None
    return sorted(p.stem for p in bench_dir.glob("*.py") if not p.stem.startswith("_"))


def add_parser(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("demo", parents=[common], help="ingest a small corpus, answer cold and warm, show the savings",
                       description="Ingest a small corpus, answer questions cold (no memory) and warm (a new "
                       "process loading stored K/V), and print what memory saved.")
    p.add_argument("--max-new-tokens", type=positive_int, default=16, metavar="N", help=MAX_NEW_TOKENS_HELP)
    p.add_argument("--cold-budget", type=seconds, default=COLD_BUDGET_S, metavar="S",
                   help="seconds of cold reading: a larger document whose cold read, projected from the last one's "
                        "speed, would pass it is left out and named (0: read all three; default %(default)g)")
    p.set_defaults(handler=run_demo)

    names = benchmarks()
    listed = f"Benchmarks: {', '.join(names)}." if names is not None else f"Here {NEED_CHECKOUT}."
    p = sub.add_parser("bench", parents=[common], help="run a benchmark into bench/results/",
                       description=f"Run bench/NAME.py; it writes bench/results/NAME.json and .md. {listed} "
                       "Flags of the benchmark's own (`python bench/NAME.py --help` lists them, e.g. "
                       "`grm bench fidelity --splits fresh25`) are passed to it, with --model, --threads and "
                       "--quick where given.")
    p.add_argument("name", metavar="NAME", help=f"the benchmark: {', '.join(names)}" if names else "the benchmark (bench/NAME.py)")
    p.add_argument("--quick", action="store_true", help="a smaller run (for smoke tests)")
    p.set_defaults(handler=run_bench)


def run_bench(args: argparse.Namespace) -> int:
    import runpy

    names = benchmarks()
    if names is None:
        raise UserInputError(NEED_CHECKOUT)
    if args.name not in names:
        raise UserInputError(f"no benchmark {args.name!r}; known: {', '.join(names) or 'none'}")
    script = BENCH_DIR / f"{args.name}.py"
    options = getattr(args, "options", None) or []
    if not options:
        module = runpy.run_path(str(script))
        return int(module["main"](args) or 0)
    # flags of its own: run it as `python bench/NAME.py [--model M] [--threads N] [--quick] OPTIONS`
    argv = [str(script), *(["--model", args.model] if args.model else []),
            *(["--threads", str(args.threads)] if args.threads else []), *(["--quick"] if args.quick else []), *options]
    saved = sys.argv
    sys.argv = argv
    try:
        runpy.run_path(str(script), run_name="__main__")
    except SystemExit as e:  # its argparse error or run_cli's exit: its status is grm's
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 2)
    finally:
        sys.argv = saved
    return 0


def run_demo(args: argparse.Namespace) -> int:
    from grm.demo.run import run_demo as demo

    return demo(args)
