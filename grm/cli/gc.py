"""`grm gc`: remove orphan payloads and superseded rows' payloads past the retention window,
then compact the log (a checkpoint; older segments retired). grm/store/gc.py says what goes and
why it is crash-safe. Local stores only (a Redis store keeps no history to compact)."""

from __future__ import annotations

import argparse

from grm.cli.common import emit, open_store


def retention(text: str) -> int | None:
    """argparse type: a number of writes >= 0, or 'forever'."""
    if text.strip().lower() == "forever":
        return None
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of writes: {text!r} (or 'forever')") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0 writes, got {value}")
    return value


def add_parser(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    from grm.runtime.admin import DEFAULT_RETAIN_WRITES  # no torch: the store plane only

    p = sub.add_parser("gc", parents=[common], help="remove unreferenced payloads and compact the log",
                       description="Remove payload files no record names (deleted or replaced records, "
                       "aborted writes) and the payload bytes of superseded records older than the "
                       "retention window (the records stay, so lineage stays readable), then write a "
                       "checkpoint so the log restarts from the live records. Crash-safe at any point.")
    p.add_argument("--retain-writes", type=retention, default=DEFAULT_RETAIN_WRITES, metavar="N|forever",
                   help="keep a superseded record's payload until N later writes (default %(default)s; "
                   "'forever' keeps them all)")
    p.add_argument("--dry-run", action="store_true", help="say what would go; change nothing")
    p.add_argument("--no-compact", action="store_true", help="do not write a checkpoint")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from grm.runtime.admin import gc

    with open_store(args, read_only=args.dry_run) as store:
        report = gc(store, retain_writes=args.retain_writes, dry_run=args.dry_run, compact=not args.no_compact)
    fields = report.to_json()
    if not args.json:
        fields = {**fields, "stale": len(report.stale), "orphans": len(report.orphans)}
    emit(fields, args.json)
    return 0
