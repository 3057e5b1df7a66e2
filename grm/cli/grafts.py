"""`grm grafts list | show ID | slice ID START:END...`: what graft memory holds, and cutting a graft
into child grafts along token spans. Common flags go before or after the action."""

from __future__ import annotations

import argparse
from datetime import datetime, timezone

from grm.cli.common import Choices, common_parser, emit, open_runtime
from grm.cli.terminal import json_text, say
from grm.errors import UserInputError


def add_parser(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    nested = common_parser(nested=True)
    g = sub.add_parser("grafts", parents=[common], help="list, show or slice stored grafts",
                       description="Graft memory of the tenant for the current model. Times are ISO 8601 (UTC).")
    gsub = g.add_subparsers(dest="grafts_command", metavar="ACTION")
    gsub.required = True
    gl = gsub.add_parser("list", parents=[nested], help="every graft, oldest first")
    gl.add_argument("--kind", choices=Choices("grm.runtime.config", "GRAFT_KINDS"), metavar="KIND",
                    help="only grafts of KIND: %(choices)s (default: every kind)")
    gl.add_argument("--all", action="store_true", help="include retired (folded) grafts")
    gs = gsub.add_parser("show", parents=[nested], help="one graft: text, tokens, lineage")
    gs.add_argument("id", metavar="ID", help="graft id, or the block id `grm ask --json` lists in mounted "
                    "(or a unique prefix of either)")
    gc = gsub.add_parser("slice", parents=[nested], help="cut a graft into child grafts along token spans",
                         description="Cut graft ID into children, one per START:END token span (END exclusive). "
                         "Each child gets its own payload slice, routing keys, and lineage to ID.")
    gc.add_argument("id", metavar="ID", help="graft id or a unique prefix of one")
    gc.add_argument("spans", nargs="+", metavar="START:END", help="token span of one child (END exclusive)")
    g.set_defaults(handler=run)


def _spans(items: list[str]) -> list[tuple[int, int]]:
    out = []
    for item in items:
        a, sep, b = item.partition(":")
        if not sep or not a.strip().isdigit() or not b.strip().isdigit():
            raise UserInputError(f"bad span {item!r}: want START:END token offsets, e.g. 0:16")
        out.append((int(a), int(b)))
    return out


def _resolve(rt, prefix: str) -> str:
    """The graft named by `prefix`: a graft id (or unique prefix), else the key of the stored block a
    document graft shares (what `grm ask --json` lists in `mounted` for exact and exact-section)."""
    grafts = rt.grafts.grafts(include_retired=True)
    found = [g.id for g in grafts if g.id.startswith(prefix)]
    if not found and prefix:
        found = [g.id for g in grafts if g.block and g.block.startswith(prefix)]
    if len(found) != 1:
        what = "no graft" if not found else f"{len(found)} grafts"
        raise UserInputError(f"{what} with id {prefix!r} (see `grm grafts list`)")
    return found[0]


def iso(t: float | None) -> str | None:
    """A Unix time as ISO 8601 in UTC (seconds), e.g. 2026-12-01T00:02:03Z."""
    if t is None:
        return None
    return datetime.fromtimestamp(t, timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")


def _summary(graft, *, text: bool = False) -> dict:
    s = graft.summary()
    s["created"] = iso(s.get("created"))
    return s | ({"text": graft.text} if text else {})


def run(args: argparse.Namespace) -> int:
    with open_runtime(args, create=False) as rt:
        if args.grafts_command == "list":
            items = [_summary(g) for g in rt.grafts.grafts(kind=args.kind, include_retired=args.all)]
            if args.json:
                say(json_text({"grafts": items}))
            else:
                for it in items:
                    text = it["text"].replace("\n", " ")[:60]
                    say(f"{it['id'][:12]}  {it['kind']:<8} {it['tokens']:>5} tok  {it['created']}  {text}", lines=False)
            return 0
        gid = _resolve(rt, args.id)
        if args.grafts_command == "show":
            emit(_summary(rt.grafts.get(gid), text=True), args.json)
            return 0
        children = rt.grafts.slice(gid, _spans(args.spans))
        emit({"parent": gid, "children": [_summary(c) for c in children]}, args.json)
    return 0
