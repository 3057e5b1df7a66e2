"""The `grm` command: every flag is parsed here, and nowhere else. Flags become config dataclasses
(RuntimeConfig, StoreConfig, ...) through the one runtime opener and the one store opener in
`grm.cli.common`.

Convention: one module per subcommand family, listed in `SUBCOMMANDS` below. A module exposes

    add_parser(sub, common) -> None

which adds its subcommand(s) to `sub` (argparse's subparsers) with `parents=[common]` (the common
flags: --store, --tenant, --model, --threads, --json, --durability, --key-file, --compress,
--device, --dtype, -v) and registers its handler with `p.set_defaults(handler=run)`; a handler
takes the parsed `argparse.Namespace` and returns the exit status. The common flags work before
the subcommand (`grm --store D stats`), after it, and before or after the action of a family
(`grm grafts --store D list`, each action with `parents=[common_parser(nested=True)]`): the
top-level parser holds their defaults, and every copy below it defaults to nothing, so a flag
given earlier is never overwritten by a later parser's default (the last one given wins). Adding a subcommand is one line in `SUBCOMMANDS`. Modules import
nothing heavy at module level: building the parser (`grm --help`) must not load torch; choices
come from the planes' constants through `common.Choices`.

Reading the files `grm ingest` is given (grm/runtime/files.py) stays in the runtime: it parses no
flags, and `Runtime.ingest` (the Python API) uses it too; the runtime must not import the CLI.

Output: --json puts only JSON on stdout; progress and logs go to stderr. A user mistake (any
GrmError) ends in one line on stderr and exit status 2, never a traceback; a reader that goes
away (`grm ... | head`) ends the command quietly with status 141.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys

from grm.cli.terminal import TerminalFilter, say
from grm.errors import GrmError, redact, redact_logs

EPILOG = "Store: --store DIR, else $GRM_HOME, else ~/.grm. Models are cached in $GRM_CACHE (~/.cache/grm)."

# Subcommand modules, in the order `grm --help` lists them (a module may add several subcommands).
SUBCOMMANDS = [
    "grm.cli.bench",  # demo, bench
    "grm.cli.ingest",
    "grm.cli.ask",
    "grm.cli.chat",
    "grm.cli.documents",  # documents list|show|delete
    "grm.cli.stats",  # stats, fsck
    "grm.cli.gc",
    "grm.cli.tier",
    "grm.cli.memory",
    "grm.cli.grafts",
    "grm.cli.archive",
    "grm.cli.serve",
]

# Arguments that are file-system paths: any bytes are fine there. Every other string from argv must
# be UTF-8 text (a non-UTF-8 byte reaches Python as a lone surrogate).
PATH_ARGS = {"store", "key_file", "prompt_file", "script", "paths", "model"}
ARG_NAMES = {"question": "the question", "line": "the memory command", "id": "ID", "spans": "START:END",
             "keys": "KEY", "name": "NAME"}
BROKEN_PIPE = 141  # 128 + SIGPIPE, what a shell reports for a writer whose reader went away


def build_parser() -> argparse.ArgumentParser:
    from grm.cli.common import common_parser

    common = common_parser(nested=True)  # below the top level: no defaults (the docstring says why)
    parser = argparse.ArgumentParser(
        prog="grm", description="GRM: a memory runtime that stores a frozen model's K/V and brings it back.",
        epilog=EPILOG, parents=[common_parser()],
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in SUBCOMMANDS:
        importlib.import_module(name).add_parser(sub, common)
    return parser


def check_text_args(args: argparse.Namespace) -> None:
    """UserInputError if a text argument (not a path) holds bytes that are not UTF-8."""
    from grm.cli.common import check_text

    for dest, value in vars(args).items():
        if dest in PATH_ARGS:
            continue
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, str):
                check_text(item, ARG_NAMES.get(dest, f"--{dest.replace('_', '-')}"))


def _quiet_stdout() -> None:
    """After EPIPE: point stdout at /dev/null so the interpreter's final flush cannot complain."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # stdout replaced by something without a real fd
        pass


def main(argv: list[str] | None = None) -> int:
    try:
        try:
            parser = build_parser()
            args, extra = parser.parse_known_args(argv)
            if extra and args.command != "bench":  # only a benchmark takes flags of its own (grm bench NAME ...)
                parser.error(f"unrecognized arguments: {' '.join(extra)}")
            if args.command == "bench":
                args.options = extra
        except SystemExit:  # --help printed, or an argparse usage error (status 2)
            sys.stdout.flush()
            raise
        logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, stream=sys.stderr,
                            format="grm: %(message)s")
        redact_logs()
        for handler in logging.getLogger().handlers:  # after the redaction: log lines are printable too
            handler.addFilter(TerminalFilter())
        check_text_args(args)
        code = args.handler(args)
        sys.stdout.flush()
        return code
    except BrokenPipeError:
        _quiet_stdout()
        return BROKEN_PIPE
    except GrmError as exc:
        say(f"grm: error: {redact(str(exc))}", file=sys.stderr, lines=False)
        return 2
    except KeyboardInterrupt:
        print("grm: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
