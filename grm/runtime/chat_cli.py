"""`grm chat` and `grm grafts ...` (grm/cli.py dispatches here).

chat     a conversation with memory: interactive (one turn a line on stdin), or `--script FILE`
         (one user turn per non-blank line); `--json` prints one compact JSON object a turn
grafts   list | show ID | slice ID START:END... : what graft memory holds, and cutting a graft into
         child grafts along token spans
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path

from grm.errors import UserInputError


def _bytes(text: str) -> int:
    """'64M', '512k', '1G' or a plain byte count."""
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    t = text.strip().lower().removesuffix("b")
    try:
        return int(float(t[:-1]) * units[t[-1]]) if t and t[-1] in units else int(t)
    except (ValueError, KeyError):
        raise argparse.ArgumentTypeError(f"not a byte count: {text!r} (e.g. 65536, 512k, 64M)") from None


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
    p.add_argument("--script", metavar="FILE", help="read user turns from FILE, one per non-blank line ('-' = stdin)")
    p.add_argument("--clear-context", action="store_true",
                   help="empty the live context every turn: anything older comes back only through memory")
    p.add_argument("--window", type=int, default=4, metavar="N",
                   help="turns kept live beside mounted memory when the context is not cleared (default 4)")
    p.add_argument("--grafts", type=int, default=3, metavar="K", help="at most K grafts mounted a turn (default 3)")
    p.add_argument("--seat-budget", type=int, default=1536, metavar="N", help="seats of mounted grafts (default 1536)")
    p.add_argument("--device-budget", type=_bytes, default=64 << 20, metavar="BYTES",
                   help="graft K/V kept on the device plane between turns, e.g. 64M (default 64M)")
    p.add_argument("--repair", type=int, default=0, metavar="N",
                   help="recompute the first N tokens of each mounted graft in context (default 0)")
    p.add_argument("--channel", default="combined", choices=["combined", "lexical", "dense"],
                   help="routing channel (default combined)")
    p.add_argument("--fold", action="store_true",
                   help="fold old turns into digests (and digests into eras) as the conversation grows")
    p.add_argument("--max-new-tokens", type=int, default=48)

    g = sub.add_parser("grafts", help="list, show or slice stored grafts",
                       description="Graft memory of the tenant for the current model.")
    gsub = g.add_subparsers(dest="grafts_command", metavar="ACTION")
    gsub.required = True
    gl = gsub.add_parser("list", parents=[common], help="every graft, oldest first")
    gl.add_argument("--kind", choices=["evidence", "document", "fact", "digest"])
    gl.add_argument("--all", action="store_true", help="include retired (folded) grafts")
    gs = gsub.add_parser("show", parents=[common], help="one graft: text, tokens, lineage")
    gs.add_argument("id", metavar="ID", help="graft id or a unique prefix of one")
    gc = gsub.add_parser("slice", parents=[common], help="cut a graft into child grafts along token spans",
                         description="Cut graft ID into children, one per START:END token span (END exclusive). "
                         "Each child gets its own payload slice, routing keys, and lineage to ID.")
    gc.add_argument("id", metavar="ID")
    gc.add_argument("spans", nargs="+", metavar="START:END")


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


def _spans(items: list[str]) -> list[tuple[int, int]]:
    out = []
    for item in items:
        a, sep, b = item.partition(":")
        if not sep or not a.strip().isdigit() or not b.strip().isdigit():
            raise UserInputError(f"bad span {item!r}: want START:END token offsets, e.g. 0:16")
        out.append((int(a), int(b)))
    return out


def _resolve(rt, prefix: str) -> str:
    found = [g.id for g in rt.grafts.grafts(include_retired=True) if g.id.startswith(prefix)]
    if len(found) != 1:
        what = "no graft" if not found else f"{len(found)} grafts"
        raise UserInputError(f"{what} with id {prefix!r} (see `grm grafts list`)")
    return found[0]


def run_chat(args: argparse.Namespace, open_runtime: Callable[..., object]) -> int:
    lines = read_script(args.script) if args.script else None
    with open_runtime(args, graft_k=args.grafts, seat_budget=args.seat_budget, device_budget=args.device_budget,
                      repair=args.repair, channel=args.channel, max_new_tokens=args.max_new_tokens) as rt:
        session = rt.chat(clear_context=args.clear_context, window_turns=args.window, fold=args.fold)
        source = lines if lines is not None else (line.strip() for line in sys.stdin)
        for line in source:
            if not line:
                continue
            try:
                reply = session.send(line)
            except UserInputError as exc:  # one bad line does not end the conversation
                out = {"turn": session.turn, "user": line[:200], "error": str(exc)}
                print(json.dumps(out, ensure_ascii=False) if args.json else f"grm: error: {exc}",
                      file=sys.stdout if args.json else sys.stderr, flush=True)
                continue
            if args.json:
                print(json.dumps(reply.to_json(), ensure_ascii=False, separators=(",", ":")), flush=True)
            else:
                print(reply.answer, flush=True)
                mem = ", ".join(f"{m['id'][:8]}:{m['score']:.2f}" for m in reply.mounted) or "none"
                print(f"[turn {reply.turn}: mounted {mem}; {reply.seats_resident} seats, "
                      f"{reply.device_bytes / 2**20:.1f} MiB resident, {reply.timings.get('total_s', 0):.2f}s]",
                      file=sys.stderr, flush=True)
    return 0


def run_grafts(args: argparse.Namespace, open_runtime: Callable[..., object],
               show: Callable[[dict, bool], None]) -> int:
    with open_runtime(args) as rt:
        if args.grafts_command == "list":
            items = [g.summary() for g in rt.grafts.grafts(kind=args.kind, include_retired=args.all)]
            if args.json:
                print(json.dumps({"grafts": items}, ensure_ascii=False))
            else:
                for it in items:
                    text = it["text"].replace("\n", " ")[:60]
                    print(f"{it['id'][:12]}  {it['kind']:<8} {it['tokens']:>5} tok  {text}")
            return 0
        gid = _resolve(rt, args.id)
        if args.grafts_command == "show":
            show(rt.grafts.get(gid).summary() | {"text": rt.grafts.get(gid).text}, args.json)
            return 0
        children = rt.grafts.slice(gid, _spans(args.spans))
        show({"parent": gid, "children": [c.summary() for c in children]}, args.json)
    return 0
