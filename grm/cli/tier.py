"""`grm tier`: keep the store under its byte budget by moving cold K/V down the tiers (exact ->
archive -> text), on demand. grm/store/tiering.py says what the tiers are and how moves are
chosen; grm/archive/policy.py applies them, crash-safe at every step; grm/runtime/tiering.py is
the one place a face builds the policy and runs it after a write.

Also here: the `--store-budget SIZE` flag the writing commands share (ingest, serve, tier, chat).
"""

from __future__ import annotations

import argparse

from grm.cli.common import Choices, emit, open_runtime
from grm.cli.terminal import say

BUDGET_HELP = ("keep the store under SIZE bytes (e.g. 500MB, 20GB; K/M/G are powers of 1024): cold exact K/V "
               "is archived, then evicted to text (re-read when needed); facts and documents stay. Remembered by "
               "the store: later writes keep to it without the flag (default: the budget the store remembers, else none)")


def budget(text: str) -> int:
    """argparse type: a size such as 500MB or 20GB."""
    from grm.errors import UserInputError
    from grm.runtime.admin import parse_size

    try:
        return parse_size(text)
    except UserInputError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_budget_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--store-budget", type=budget, default=None, metavar="SIZE", help=BUDGET_HELP)


def add_parser(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("tier", parents=[common], help="keep the store under its byte budget (archive, evict)",
                       description="Move cold K/V down the tiers until the store is under its budget: exact K/V "
                       "gone cold (least recently written or mounted, fewest mounts) is demoted to the archive "
                       "tier (lossy RVQ codes; codebooks are trained from the stored text the first time), and "
                       "archived or rarely used spans are evicted to text only (re-read when asked). Facts and "
                       "documents never move. Without --apply nothing changes: the moves are listed with why.")
    add_budget_flag(p)
    how = p.add_mutually_exclusive_group()
    how.add_argument("--apply", action="store_true", help="make the moves")
    how.add_argument("--dry-run", action="store_true", help="say what would move and why; change nothing (default)")
    p.add_argument("--keep-salient", default="digits", choices=Choices("grm.runtime.archiving", "SALIENT_RULES"),
                   metavar="RULE",
                   help="tokens of archived spans kept beside the codes: %(choices)s (default digits: numbers "
                   "survive archiving, bench/results/archive_recall.md)")
    p.add_argument("--force", action="store_true",
                   help="move down to the low-water mark even when under the high-water mark")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from grm.errors import UserInputError
    from grm.runtime.tiering import Tiering, summary

    with open_runtime(args, create=False) as rt:
        # a budget given is remembered only when the moves are made (a dry run changes nothing)
        tiering = Tiering(rt, args.store_budget, remember=args.apply, keep_salient=args.keep_salient)
        if not tiering.has_budget:
            raise UserInputError("this store has no budget: give --store-budget SIZE (it is remembered)")
        report = tiering.run(dry_run=not args.apply, force=args.force)
    if args.json:
        emit(report.to_json(), True)
        return 0
    emit(summary(report), False)
    for m in report.moves[:50]:
        say(f"  {m['action']:<6} {m['kind']} {m['key'][:12]} {m['doc'][:40]:<40} {m['tokens']:>5} tok  "
            f"-{m['saves_bytes']} B  ({m['why']})")
    if len(report.moves) > 50:
        say(f"  ... and {len(report.moves) - 50} more (--json lists them all)")
    return 0
