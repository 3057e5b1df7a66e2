"""`grm documents list | show NAME | delete NAME`: the tenant's ingested documents, what each one
stored, and deleting one (grm/runtime/documents.py holds the logic; no model is loaded). Common
flags go before or after the action."""

from __future__ import annotations

import argparse

from grm.cli.common import common_parser, human_bytes, open_store
from grm.cli.terminal import json_text, say

DOC_ARG = ("the document's name as ingested (see `grm documents list`), a unique prefix of its id (>= 4 "
           "characters), or the end of its name after a '/' (a.txt for notes/a.txt)")


def add_parser(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    nested = common_parser(nested=True)
    p = sub.add_parser("documents", parents=[common], help="list, show or delete ingested documents",
                       description="The tenant's ingested documents: what each stored (its document row, chain "
                       "blocks, sections, their grafts and archive copies) and deleting one. No model is loaded.")
    dsub = p.add_subparsers(dest="documents_command", metavar="ACTION")
    dsub.required = True
    dsub.add_parser("list", parents=[nested], help="every document: name, tokens, records by kind, bytes",
                    description="Every document of the tenant, oldest first: its id, name, layout, tokens, "
                    "records by kind and the payload bytes they name.")
    s = dsub.add_parser("show", parents=[nested], help="one document and each record it stored")
    s.add_argument("name", metavar="NAME", help=DOC_ARG)
    d = dsub.add_parser("delete", parents=[nested], help="delete a document and everything only it stored",
                        description="Remove the document, its blocks that no other document uses, their grafts "
                        "and archive copies, in one transaction (facts, chat turns and other documents stay). "
                        "`grm gc` then removes the payload files from disk.")
    d.add_argument("name", metavar="NAME", help=DOC_ARG)
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from grm.runtime.documents import Documents

    action = args.documents_command
    with open_store(args, read_only=action != "delete") as store:
        docs = Documents(store, args.tenant)
        if action == "list":
            items = [docs.summary(d) for d in docs.list()]
            if args.json:
                say(json_text({"tenant": args.tenant, "documents": items}))
            else:
                say("\n".join(list_lines(items, args.tenant)))
            return 0
        doc = docs.find(args.name)
        if action == "show":
            records = docs.records_of(doc)
            out = {**docs.summary(doc, records),
                   "rows": [row_json(r) for kind in records for r in records[kind]]}
            say(json_text(out) if args.json else "\n".join(show_lines(out)))
            return 0
        deleted = docs.delete(doc.key).to_json()  # type: ignore[union-attr]  # found just above
    if args.json:
        say(json_text(deleted))
    else:
        say(f"deleted {deleted['name']} ({deleted['id'][:12]}): {deleted['blocks']} block(s), {deleted['grafts']} "
            f"graft(s), {deleted['archived']} archive row(s); {deleted['kept_shared_blocks']} block(s) kept "
            f"(another document uses them); {human_bytes(deleted['freed_bytes'])} of payload files for "
            "`grm gc` to remove", lines=False)
    return 0


def row_json(rec) -> dict:
    m = rec.meta
    return {"kind": rec.kind, "key": rec.key, "layout": m.get("layout"), "index": m.get("index"),
            "tokens": m.get("tokens"), "bytes": rec.payload_size, "state": rec.state}


def list_lines(items: list[dict], tenant: str) -> list[str]:
    if not items:
        return [f"tenant {tenant}: no documents (`grm ingest PATH` stores some)"]
    width = min(48, max(len("name"), *(len(str(it["name"])) for it in items)))
    lines = [f"tenant {tenant}: {len(items)} document(s); records = document/blocks/grafts/archive rows; "
             "bytes = payload bytes they name",
             f"{'id':<12}  {'name':<{width}}  {'layout':<8}  {'tokens':>8}  {'records':>12}  {'bytes':>10}"]
    for it in items:
        r = it["records"]
        counts = f"{r['document']}/{r['block']}/{r['graft']}/{r['archive']}"
        name = str(it["name"])
        name = name if len(name) <= width else "…" + name[-width + 1:]
        lines.append(f"{it['id'][:12]:<12}  {name:<{width}}  {str(it['layout']):<8}  {it['tokens']:>8}  "
                     f"{counts:>12}  {human_bytes(it['stored_bytes']):>10}")
    return lines


def show_lines(out: dict) -> list[str]:
    lines = [f"document  {out['name']}", f"id        {out['id']}", f"layout    {out['layout']}",
             f"text      {out['bytes']} bytes, {out['tokens']} tokens",
             f"stored    {human_bytes(out['stored_bytes'])} of payloads in "
             + ", ".join(f"{n} {k}" for k, n in out["records"].items()),
             f"{'kind':<9} {'key':<12}  {'layout':<8} {'index':>5} {'tokens':>7} {'bytes':>10}  state"]
    for r in out["rows"]:
        idx = "" if r["index"] is None else r["index"]
        lines.append(f"{r['kind']:<9} {r['key'][:12]:<12}  {str(r['layout'] or ''):<8} {idx:>5} "
                     f"{'' if r['tokens'] is None else r['tokens']:>7} {human_bytes(r['bytes']):>10}  {r['state']}")
    return lines
