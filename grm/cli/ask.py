"""`grm ask QUESTION`: answer from memory."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from grm.cli.common import (MAX_NEW_TOKENS_HELP, Choices, add_mount_flags, check_text, mount_options, open_runtime,
                            positive_int)
from grm.cli.terminal import json_text, say
from grm.errors import UserInputError


def add_parser(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("ask", parents=[common], help="answer a question from memory",
                       description="Answer from memory. exact: QUESTION is the whole prompt (read after the "
                       "sinks); stored blocks it starts with are loaded, the rest computed. exact-section: one "
                       "section selected on the CPU, answered from [sinks | its stored K/V | question]. grafts: "
                       "the top K routed grafts (document sections and chat turns) re-seated side by side. none: "
                       "no memory (the last tokens of the stored text that fit the window). rag-text: the "
                       "selected section re-read as text. auto (default): exact when the prompt starts with a "
                       "stored block, else exact-section. The store must exist; every mode but exact needs "
                       "something stored for the tenant. If a `grm serve` holds the store, the question is sent "
                       "to it (no model loaded here; a line on stderr names it) with --mode and --max-new-tokens; "
                       "a flag it cannot honour (another --model, or a mount setting it was not started with) "
                       "is an error naming it.")
    p.add_argument("question", nargs="?", metavar="QUESTION", help="the question (or the whole prompt in exact mode)")
    p.add_argument("--prompt-file", metavar="FILE", help="read the prompt from FILE ('-' = stdin) instead (default: none, "
                   "QUESTION is the prompt)")
    p.add_argument("--mode", default="auto", choices=Choices("grm.runtime.config", "ASK_MODES"), metavar="MODE",
                   help="%(choices)s (default auto; see above)")
    p.add_argument("--max-new-tokens", type=positive_int, default=48, metavar="N", help=MAX_NEW_TOKENS_HELP)
    p.add_argument("--block-tokens", type=int, default=512, help=argparse.SUPPRESS)
    p.add_argument("--grafts", type=positive_int, default=3, metavar="K",
                   help="at most K grafts mounted in grafts mode (default 3)")
    add_mount_flags(p)
    p.set_defaults(handler=run)


def read_prompt(args: argparse.Namespace) -> str:
    if args.prompt_file:
        try:
            data = sys.stdin.buffer.read() if args.prompt_file == "-" else Path(args.prompt_file).read_bytes()
            return data.decode("utf-8")
        except OSError as exc:
            raise UserInputError(f"cannot read prompt file {args.prompt_file}: {exc.strerror or exc}") from None
        except UnicodeDecodeError as exc:
            raise UserInputError(f"prompt file {args.prompt_file} is not UTF-8 text (byte {exc.start})") from None
    if args.question is not None:
        return check_text(args.question, "the question")
    raise UserInputError("give a QUESTION or --prompt-file FILE")


def server_settings(args: argparse.Namespace) -> dict[str, tuple[str, object]]:
    """The RuntimeConfig fields this ask sets, with their flags: a running server must run with
    the same values (grm/cli/remote.py)."""
    return {"block_tokens": ("--block-tokens", args.block_tokens), "graft_k": ("--grafts", args.grafts),
            **{name: (f"--{name}", value) for name, value in mount_options(args).items()}}


def run(args: argparse.Namespace) -> int:
    from grm.cli.remote import Server, served_or_local

    text = read_prompt(args)
    got = served_or_local(args, server_settings(args), lambda: open_runtime(
        args, create=False, block_tokens=args.block_tokens, graft_k=args.grafts, **mount_options(args)))
    if isinstance(got, Server):
        answer = got.ask(text, args.mode, args.max_new_tokens)
        got.announce()
    else:
        with got as rt:
            answer = rt.ask(text, mode=args.mode, max_new_tokens=args.max_new_tokens).to_json()
    if args.json:
        say(json_text(answer))
    else:
        say(answer["answer"])
        say(f"[{answer['mode']}: {answer['tokens_from_memory']}/{answer['prompt_tokens']} tokens from memory, "
            f"ttft {answer['ttft_s']:.3f}s, total {answer['total_s']:.3f}s]", file=sys.stderr)
    return 0
