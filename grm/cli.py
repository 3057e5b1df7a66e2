"""The `grm` command. Flags become config dataclasses here; nothing else reads flags.

Every subcommand takes --store, --tenant, --model, --threads, --json after its name. --json puts
only JSON on stdout; progress and logs go to stderr. A user mistake ends in one line on stderr and
exit status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

from grm.errors import GrmError

EPILOG = "Store: --store DIR, else $GRM_HOME, else ~/.grm. Models are cached in $GRM_CACHE (~/.cache/grm)."


def _common() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(add_help=False)
    g = p.add_argument_group("common options")
    g.add_argument("--store", metavar="DIR", help="store directory (default $GRM_HOME, else ~/.grm)")
    g.add_argument("--tenant", default="default", help="owner of the memory (default: default)")
    g.add_argument("--model", default=None, metavar="NAME|PATH", help="model name or HF folder (default smollm2-135m)")
    g.add_argument("--threads", type=int, default=None, metavar="N", help="torch threads (default: all cores)")
    g.add_argument("--json", action="store_true", help="print only JSON on stdout")
    g.add_argument("--durability", default="normal", choices=["volatile", "async", "normal", "full", "strict"],
                   help="store durability mode (default normal)")
    g.add_argument("--key-file", metavar="PATH", help="master key (32 raw bytes or 64 hex chars) for encryption "
                   "at rest; or set GRM_MASTER_KEY")
    g.add_argument("--compress", action="store_true", help="zstandard-compress payload files")
    g.add_argument("-v", "--verbose", action="store_true", help="more log lines on stderr")
    return p


def build_parser() -> argparse.ArgumentParser:
    common = _common()
    parser = argparse.ArgumentParser(
        prog="grm", description="GRM: a memory runtime that stores a frozen model's K/V and brings it back.",
        epilog=EPILOG,
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    p = sub.add_parser("demo", parents=[common], help="ingest a small corpus, answer cold and warm, show the savings",
                       description="Ingest a small corpus the project wrote, answer questions cold (no memory) and "
                       "warm (a new process loading stored K/V), and print what memory saved.")
    p.add_argument("--max-new-tokens", type=int, default=16)

    p = sub.add_parser("ingest", parents=[common], help="store documents and their exact K/V blocks",
                       description="Read files or folders (recursive, UTF-8 text) once and store each document "
                       "byte-exact with its K/V blocks. Idempotent and resumable.")
    p.add_argument("paths", nargs="+", metavar="PATH")
    p.add_argument("--layout", default="chain", choices=["chain", "sections"],
                   help="chain: blocks read front to back (prefix reuse); sections: each section alone")
    p.add_argument("--block-tokens", type=int, default=512, help="token budget of one chain block (default 512)")
    p.add_argument("--section-tokens", type=int, default=512, help="token budget of one section (default 512)")

    p = sub.add_parser("ask", parents=[common], help="answer a question from memory",
                       description="Answer from memory. exact: QUESTION is the whole prompt (read after the "
                       "sinks); stored blocks it starts with are loaded, the rest computed. exact-section: one "
                       "section selected on the CPU, answered from [sinks | its stored K/V | question]. grafts: "
                       "the top K routed grafts (document sections and chat turns) re-seated side by side. none: no memory (the last tokens of the stored "
                       "text that fit the window). rag-text: the selected section re-read as text. auto (default): "
                       "exact when the prompt starts with a stored block, else exact-section.")
    p.add_argument("question", nargs="?", metavar="QUESTION")
    p.add_argument("--prompt-file", metavar="FILE", help="read the prompt from FILE ('-' = stdin) instead")
    p.add_argument("--mode", default="auto", choices=["auto", "exact", "exact-section", "grafts", "none", "rag-text"])
    p.add_argument("--max-new-tokens", type=int, default=48)
    p.add_argument("--block-tokens", type=int, default=512, help=argparse.SUPPRESS)
    p.add_argument("--grafts", type=int, default=3, metavar="K", help="at most K grafts mounted in grafts mode (default 3)")
    p.add_argument("--repair", type=int, default=0, metavar="N",
                   help="grafts mode: recompute the first N tokens of each mounted graft in context (default 0)")

    sub.add_parser("stats", parents=[common], help="what is stored", description="Counts and sizes per tenant and kind.")

    p = sub.add_parser("fsck", parents=[common], help="verify every record",
                       description="Verify every record. Exit 0: no acknowledged record damaged; 1: damage found; "
                       "2: cannot run.")
    p.add_argument("--repair", action="store_true", help="repair what is provably safe to repair")

    p = sub.add_parser("bench", parents=[common], help="run a benchmark into bench/results/",
                       description="Run bench/NAME.py; it writes bench/results/NAME.json and .md.")
    p.add_argument("name", metavar="NAME")
    p.add_argument("--quick", action="store_true", help="a smaller run (for smoke tests)")

    from grm.runtime.chat_cli import add_parser as add_chat_parser

    add_chat_parser(sub, common)

    from grm.archive.cli import add_parser as add_archive_parser

    add_archive_parser(sub, common)

    from grm.policy.cli import add_parser as add_memory_parser

    add_memory_parser(sub, common)
    return parser


def _print(obj: dict, as_json: bool) -> None:
    if as_json:
        print(json.dumps(obj, ensure_ascii=False))
    else:
        for key, value in obj.items():
            print(f"{key}: {value}")


def _master_key(args: argparse.Namespace) -> bytes | None:
    import os

    from grm.store import load_master_key

    return load_master_key(args.key_file, os.environ.get("GRM_MASTER_KEY"))


def _open_runtime(args: argparse.Namespace, **extra: object):
    from grm.runtime import Runtime

    return Runtime.open(store=args.store, model=args.model, tenant=args.tenant, threads=args.threads,
                        durability=args.durability, master_key=_master_key(args), compress=args.compress, **extra)


def _open_store(args: argparse.Namespace):
    from grm.runtime.config import default_store_dir
    from grm.store import Store, StoreConfig

    from grm.errors import UserInputError
    from grm.store.layout import MARKER_NAME

    root = Path(args.store).expanduser() if args.store else default_store_dir()
    if not (root / MARKER_NAME).exists():  # reading commands never create a store
        raise UserInputError(f"no GRM store at {root}")
    return Store.open(StoreConfig(root=root, durability=args.durability, master_key=_master_key(args),
                                  compress=args.compress))


def cmd_ingest(args: argparse.Namespace) -> int:
    with _open_runtime(args, block_tokens=args.block_tokens, section_tokens=args.section_tokens) as rt:
        results = rt.ingest(args.paths, layout=args.layout, progress=not args.json or sys.stderr.isatty())
    out = {
        "documents": len(results), "blocks": sum(r.blocks for r in results),
        "computed": sum(r.computed for r in results), "tokens": sum(r.tokens for r in results),
    }
    _print(out, args.json)
    return 0


def cmd_ask(args: argparse.Namespace) -> int:
    from grm.errors import UserInputError

    if args.prompt_file:
        try:
            text = sys.stdin.read() if args.prompt_file == "-" else Path(args.prompt_file).read_text("utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise UserInputError(f"cannot read prompt file {args.prompt_file}: {exc}") from exc
    elif args.question is not None:
        text = args.question
    else:
        raise UserInputError("give a QUESTION or --prompt-file FILE")
    with _open_runtime(args, block_tokens=args.block_tokens, graft_k=args.grafts, repair=args.repair) as rt:
        answer = rt.ask(text, mode=args.mode, max_new_tokens=args.max_new_tokens)
    if args.json:
        print(json.dumps(answer.to_json(), ensure_ascii=False))
    else:
        print(answer.answer)
        print(f"[{answer.mode}: {answer.tokens_from_memory}/{answer.prompt_tokens} tokens from memory, "
              f"ttft {answer.ttft_s:.3f}s, total {answer.total_s:.3f}s]", file=sys.stderr)
    return 0


def cmd_stats(args: argparse.Namespace) -> int:
    with _open_store(args) as store:
        _print(store.stats(), args.json)
    return 0


def cmd_fsck(args: argparse.Namespace) -> int:
    with _open_store(args) as store:
        report = store.fsck(repair=args.repair)
    out = {"records": report.records, "damaged": report.damaged, "orphans": report.orphans, "repaired": report.repaired}
    _print(out, args.json)
    return 1 if report.damaged and not args.repair else 0


def cmd_bench(args: argparse.Namespace) -> int:
    import runpy

    from grm.errors import UserInputError

    bench_dir = Path(__file__).resolve().parent.parent / "bench"
    script = bench_dir / f"{args.name}.py"
    if not args.name.isidentifier() or not script.exists():
        names = sorted(p.stem for p in bench_dir.glob("*.py") if not p.stem.startswith("_"))
        raise UserInputError(f"no benchmark {args.name!r}; known: {', '.join(names) or 'none'}")
    module = runpy.run_path(str(script))
    return int(module["main"](args) or 0)


def cmd_chat(args: argparse.Namespace) -> int:
    from grm.runtime.chat_cli import run_chat

    return run_chat(args, _open_runtime)


def cmd_grafts(args: argparse.Namespace) -> int:
    from grm.runtime.chat_cli import run_grafts

    return run_grafts(args, _open_runtime, _print)


def cmd_archive(args: argparse.Namespace) -> int:
    from grm.archive.cli import run

    return run(args, _open_runtime, _open_store, _print)


def cmd_memory(args: argparse.Namespace) -> int:
    from grm.policy.cli import run

    return run(args, _open_store, _master_key)


def cmd_demo(args: argparse.Namespace) -> int:
    from grm.demo.run import run_demo

    return run_demo(args)


COMMANDS = {"ingest": cmd_ingest, "ask": cmd_ask, "stats": cmd_stats, "fsck": cmd_fsck, "bench": cmd_bench,
            "demo": cmd_demo, "archive": cmd_archive, "memory": cmd_memory, "chat": cmd_chat,
            "grafts": cmd_grafts}


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, stream=sys.stderr,
                        format="grm: %(message)s")
    try:
        return COMMANDS[args.command](args)
    except GrmError as exc:
        print(f"grm: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("grm: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
