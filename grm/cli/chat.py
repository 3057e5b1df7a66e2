"""`grm chat`: a conversation with memory, interactive (one turn a line on stdin) or `--script FILE`
(one user turn per non-blank line); `--json` prints one compact JSON object a turn.

A bad line (a user error, or bytes that are not UTF-8) is refused with one line and the chat goes
on; a script that is not UTF-8 is refused whole before anything is sent (exit 2).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

from grm.cli.common import (MAX_NEW_TOKENS_HELP, Choices, add_mount_flags, byte_count, mount_options, open_runtime,
                            positive_int)
from grm.cli.terminal import json_text, say
from grm.cli.tier import add_budget_flag
from grm.errors import UserInputError


def add_parser(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("chat", parents=[common], help="a conversation with memory",
                       description="Each turn routes over memory, mounts the chosen grafts into the arena "
                       "[sinks | grafts | live tail], answers, and stores the turn (your text + the answer) as a "
                       "new graft. Memory persists in the store: a later `grm chat` remembers. Reads one turn a "
                       "line from stdin, or from --script FILE (blank lines skipped). Memory commands work as "
                       "lines: 'remember permanently: ...', 'remember this for the project: ...', 'forget: ...', "
                       "'correct memory: OLD => NEW', 'show memory about: ...', 'why do you remember: ...', "
                       "'pin ID', 'approve review ID', 'cull graft ID into sections', 'set durability: full' "
                       "(see `grm memory --help`).")
    p.add_argument("--script", metavar="FILE", help="read user turns from FILE, one per non-blank line ('-' = stdin) "
                   "(default: none, turns are typed, one a line)")
    p.add_argument("--clear-context", action="store_true",
                   help="empty the live context every turn: anything older comes back only through memory")
    p.add_argument("--window", type=int, default=4, metavar="N",
                   help="turns kept live beside mounted memory when the context is not cleared (default 4)")
    p.add_argument("--grafts", type=positive_int, default=3, metavar="K",
                   help="at most K grafts mounted a turn (default 3)")
    p.add_argument("--seat-budget", type=positive_int, default=1536, metavar="N",
                   help="seats of mounted grafts (default 1536)")
    p.add_argument("--device-budget", type=byte_count, default=64 << 20, metavar="BYTES",
                   help="graft K/V kept on the device plane between turns, e.g. 64M (default 64M)")
    add_mount_flags(p)
    add_budget_flag(p)
    p.add_argument("--channel", default="combined", choices=Choices("grm.runtime.config", "CHANNELS"),
                   metavar="CHANNEL",
                   help="routing channel: %(choices)s (default combined)")
    p.add_argument("--fold", action="store_true",
                   help="fold old turns into digests (and digests into eras) as the conversation grows")
    p.add_argument("--max-new-tokens", type=positive_int, default=48, metavar="N", help=MAX_NEW_TOKENS_HELP)
    p.set_defaults(handler=run)


def read_script(path: str) -> list[str]:
    """The non-blank lines of a script file ('-' = stdin); UserInputError if it is not UTF-8 text."""
    try:
        data = sys.stdin.buffer.read() if path == "-" else Path(path).read_bytes()
    except OSError as exc:
        raise UserInputError(f"cannot read script {path}: {exc.strerror or exc}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserInputError(f"script {path} is not UTF-8 text (byte {exc.start}); nothing was sent") from None
    return [line.strip() for line in text.splitlines() if line.strip()]


def stdin_lines(stream: Iterable[bytes]) -> Iterator[str | UserInputError]:
    """Lines of a byte stream as text, read one at a time (an interactive chat answers each line
    before the next is typed); a line that is not UTF-8 comes out as the error to report."""
    for n, raw in enumerate(stream, 1):
        try:
            yield raw.decode("utf-8").strip()
        except UnicodeDecodeError as exc:
            yield UserInputError(f"line {n} is not UTF-8 text (byte {exc.start}); it was not sent")


def _refuse(args: argparse.Namespace, turn: int, line: str, exc: UserInputError) -> None:
    out = {"turn": turn, "user": line[:200], "error": str(exc)}
    say(json_text(out) if args.json else f"grm: error: {exc}", file=sys.stdout if args.json else sys.stderr,
        flush=True)


def run(args: argparse.Namespace) -> int:
    from grm.runtime.tiering import Tiering

    lines = read_script(args.script) if args.script else None
    with open_runtime(args, graft_k=args.grafts, seat_budget=args.seat_budget, device_budget=args.device_budget,
                      **mount_options(args), channel=args.channel, max_new_tokens=args.max_new_tokens) as rt:
        session = rt.chat(clear_context=args.clear_context, window_turns=args.window, fold=args.fold)
        tiering = Tiering(rt, args.store_budget)  # one policy for the whole chat: its mounts count
        source = lines if lines is not None else stdin_lines(iter(sys.stdin.buffer.readline, b""))
        for line in source:
            if isinstance(line, UserInputError):  # one bad line does not end the conversation
                _refuse(args, session.turn, "", line)
                continue
            if not line:
                continue
            try:
                reply = session.send(line)
            except UserInputError as exc:
                _refuse(args, session.turn, line, exc)
                continue
            if args.json:
                say(json_text(reply.to_json(), separators=(",", ":")), flush=True)
            else:
                say(reply.answer, flush=True)
                mem = ", ".join(f"{m['id'][:8]}:{m['score']:.2f}" for m in reply.mounted) or "none"
                say(f"[turn {reply.turn}: mounted {mem}; {reply.seats_resident} seats, "
                    f"{reply.device_bytes / 2**20:.1f} MiB resident, {reply.timings.get('total_s', 0):.2f}s]",
                    file=sys.stderr, flush=True)
            report = tiering.after_write()  # between turns, after the reply is out
            if report is not None:
                say(f"[tiering: {report}]", file=sys.stderr, flush=True)
    return 0

