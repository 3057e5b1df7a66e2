"""`grm tier`: keep the store under its byte budget by moving cold K/V down the tiers (exact ->
archive -> text), on demand. grm/store/tiering.py says what the tiers are and how moves are
chosen; grm/archive/policy.py applies them, crash-safe at every step.

Also here: the `--store-budget SIZE` flag the writing commands share (ingest, serve, tier; chat by
the lead) and `after_write`, which keeps the store under the budget after a write.
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
    from grm.store.tiering import parse_size

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
    p.add_argument("--keep-salient", default="digits", choices=Choices("grm.archive.salient", "RULES"), metavar="RULE",
                   help="tokens of archived spans kept beside the codes: %(choices)s (default digits: numbers "
                   "survive archiving, bench/results/archive_recall.md)")
    p.add_argument("--force", action="store_true",
                   help="move down to the low-water mark even when under the high-water mark")
    p.set_defaults(handler=run)


def policy_for(rt, store_budget: int | None, keep_salient: str = "digits"):
    from grm.archive.policy import PolicyConfig, TieringPolicy

    return TieringPolicy(rt.store, rt.lm, rt.dialect, store_budget,
                         PolicyConfig(keep_salient=keep_salient), archive=rt.archive, uses=rt.uses)


def summary(report) -> dict:
    """The report without its per-move list (which --json keeps)."""
    out = report.to_json()
    out.pop("moves")
    out["failed"] = len(report.failed)
    return out


def run(args: argparse.Namespace) -> int:
    from grm.errors import UserInputError
    from grm.store.tiering import save_budget

    with open_runtime(args, create=False) as rt:
        policy = policy_for(rt, args.store_budget, args.keep_salient)
        if policy.tier_config is None:
            raise UserInputError("this store has no budget: give --store-budget SIZE (it is remembered)")
        if args.apply and args.store_budget is not None:
            save_budget(rt.store, args.store_budget)
        report = policy.run(dry_run=not args.apply, force=args.force)
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


class BudgetKeeper:
    """After a command writes: a budget given now is remembered by the store; `after_write()`
    brings the store under the budget (given or remembered) when it passed its high-water mark
    and returns the report's summary (None: nothing due). One policy per command, so a chat
    keeps it between turns."""

    def __init__(self, rt, store_budget: int | None) -> None:
        from grm.store.tiering import save_budget

        if store_budget is not None:
            save_budget(rt.store, store_budget)
        self.policy = policy_for(rt, None)

    def after_write(self) -> dict | None:
        return summary(self.policy.run()) if self.policy.due() else None


def after_write(rt, store_budget: int | None) -> dict | None:
    """`BudgetKeeper(rt, store_budget).after_write()`, for a command that writes once."""
    return BudgetKeeper(rt, store_budget).after_write()
