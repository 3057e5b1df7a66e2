"""`grm ingest PATH...`: store documents byte-exact with their K/V blocks."""

from __future__ import annotations

import argparse
import sys

from grm.cli.common import Choices, byte_count, emit, open_runtime, show_progress, store_root
from grm.cli.terminal import say
from grm.cli.tier import add_budget_flag
from grm.errors import UserInputError


def add_parser(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("ingest", parents=[common], help="store documents and their exact K/V blocks",
                       description="Read files or folders (recursive, UTF-8 text) once and store each document "
                       "byte-exact with its K/V blocks. Idempotent and resumable. Empty, binary, non-UTF-8, "
                       "oversized and special files (FIFOs, devices, sockets), and files whose name is not "
                       "UTF-8, are skipped with a warning. If a `grm serve` holds the store, the documents are "
                       "sent to it as ingest jobs (no model loaded here; a line on stderr names it); a flag it "
                       "cannot honour (another --model, --block-tokens or --section-tokens) is an error naming it.")
    p.add_argument("paths", nargs="+", metavar="PATH", help="files or folders to read")
    p.add_argument("--layout", default="seen", choices=Choices("grm.runtime.config", "LAYOUTS"), metavar="LAYOUT",
                   help="%(choices)s; seen: sections, and a document's chain blocks stored when a prompt first "
                   "reads it (one layout's bytes); both: chain blocks and sections now, sharing the first block; "
                   "chain: blocks read front to back (prefix reuse); sections: each section alone "
                   "(default %(default)s)")
    p.add_argument("--block-tokens", type=int, default=512, metavar="N",
                   help="token budget of one chain block (default 512)")
    p.add_argument("--section-tokens", type=int, default=512, metavar="N",
                   help="token budget of one section (default 512)")
    # The default lives in grm/runtime/files.py (MAX_FILE_BYTES); importing it here would load torch.
    p.add_argument("--max-file-size", type=byte_count, default=None, metavar="BYTES",
                   help="skip files larger than this, e.g. 64M (default 4M)")
    add_budget_flag(p)
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from grm.cli.remote import Server, served_or_local
    from grm.runtime.files import collect

    docs = collect(args.paths, **({} if args.max_file_size is None else {"max_bytes": args.max_file_size}))
    on_disk: int | None = None  # the store folder's bytes, measured closed, before and after; None: Redis

    def open_local():
        nonlocal on_disk
        from grm.runtime.admin import disk_bytes

        on_disk = disk_bytes(store_root(args))
        return open_runtime(args, block_tokens=args.block_tokens, section_tokens=args.section_tokens)

    got = served_or_local(args, {"block_tokens": ("--block-tokens", args.block_tokens),
                                 "section_tokens": ("--section-tokens", args.section_tokens),
                                 "store_budget": ("--store-budget", args.store_budget)}, open_local)
    if isinstance(got, Server):
        return through(got, docs, args)
    from grm.runtime.admin import disk_bytes, payload_bytes
    from grm.runtime.tiering import Tiering

    location = store_root(args)
    with got as rt:
        before = payload_bytes(rt.store, args.tenant) if on_disk is None else 0
        results = rt.ingest(docs, progress=show_progress(args), layout=args.layout)
        if on_disk is None:  # Redis: the payload bytes its rows name
            added = payload_bytes(rt.store, args.tenant) - before
        tiering = Tiering(rt, args.store_budget).after_write()
    if on_disk is not None:  # a local store: what the ingest left in its folder (closed: WAL folded in)
        added = disk_bytes(location) - on_disk
    tokens = sum(r.tokens for r in results)
    out = {"documents": len(results), "blocks": sum(r.blocks for r in results),
           "computed": sum(r.computed for r in results), "tokens": tokens, "stored_bytes": added,
           "bytes_per_token": round(added / tokens) if tokens else 0}
    if tiering is not None:  # the store passed its budget's high-water mark: cold K/V moved down
        out["tiering"] = tiering if args.json else {k: tiering[k] for k in (
            "budget", "before_bytes", "after_bytes", "demote", "evict", "drop")}
    emit(out, args.json)
    return 0


def through(server, docs: list, args: argparse.Namespace) -> int:
    """The documents sent to a running `grm serve` (grm/cli/remote.py), one ingest job each, in
    order; the same report as a local ingest (tiering is the server's, queued after its writes)."""
    if not docs:
        raise UserInputError("nothing could be ingested (every file was empty, binary or unreadable)")
    from tqdm import tqdm

    results = []
    with tqdm(desc="ingest", unit="block", leave=False, disable=not show_progress(args)) as bar:
        def progress(done: int, total: int) -> None:
            bar.total = total
            bar.n = done
            bar.refresh()

        for doc in docs:
            res = server.ingest(doc.name, doc.text, args.layout, progress)
            if res.get("truncated_bytes"):
                say(f"grm: {doc.name}: {res['truncated_bytes']} bytes past the model's window were not stored as "
                    "chain blocks", file=sys.stderr)
            results.append(res)
    tokens = sum(r["tokens"] for r in results)
    added = sum(r["stored_bytes"] for r in results)
    server.announce()
    emit({"documents": len(results), "blocks": sum(r["blocks"] for r in results),
          "computed": sum(r["computed"] for r in results), "tokens": tokens, "stored_bytes": added,
          "bytes_per_token": round(added / tokens) if tokens else 0}, args.json)
    return 0

