"""Keeping a runtime's store under its byte budget: the one place the faces build the tiering
policy (grm/archive/policy.py carries out the plan of grm/store/tiering.py) and decide, after a
write, whether it runs.

Lifecycle: one `Tiering(rt, store_budget)` per process and store, built after the runtime opens
(`grm ingest`, `grm chat` between turns, `grm serve` between requests, `grm tier`); a budget given
is remembered by the store. After each write the face asks `due()` and, when the store passed its
high-water mark, runs it: `after_write()` at once (the CLI), or `run(pause=...)` as a job a slice
at a time behind waiting requests (the server, grm/serve/engine.py).
"""

from __future__ import annotations

from typing import Any, Callable

from grm.archive.policy import PolicyConfig, TierReport, TieringPolicy
from grm.store.tiering import save_budget


class Tiering:
    """The tiering policy over `rt`'s store, with the mounts its answers count (`rt.uses`).

    `store_budget`: bytes to keep the store under; None: the budget the store remembers (else
    nothing is ever due). `remember`: store the budget given (False for a dry run of `grm tier`).
    `keep_salient`: tokens of archived spans kept beside the codes (grm/archive/salient.py)."""

    def __init__(self, rt: Any, store_budget: int | None = None, *, remember: bool = True,
                 keep_salient: str = "digits") -> None:
        if store_budget is not None and remember:
            save_budget(rt.store, store_budget)
        self.policy = TieringPolicy(rt.store, rt.lm, rt.dialect, store_budget,
                                    PolicyConfig(keep_salient=keep_salient), archive=rt.archive, uses=rt.uses)

    @property
    def has_budget(self) -> bool:
        """Whether a budget was given or the store remembers one."""
        return self.policy.tier_config is not None

    def due(self) -> bool:
        """Whether the store passed its budget's high-water mark (a cheap check: per-kind figures)."""
        return self.policy.due()

    def run(self, *, dry_run: bool = False, force: bool = False,
            pause: Callable[[], None] = lambda: None) -> TierReport:
        """Move cold K/V down the tiers until the store is under its low-water mark (`force`: even
        when under the high-water mark); `pause()` is called between moves."""
        return self.policy.run(dry_run=dry_run, force=force, pause=pause)

    def after_write(self) -> dict | None:
        """After a write: when due, one run now; its `summary` (None: nothing was due)."""
        return summary(self.run()) if self.due() else None


def summary(report: TierReport) -> dict:
    """A tiering report without its per-move list (`failed` as a count)."""
    out = report.to_json()
    out.pop("moves")
    out["failed"] = len(report.failed)
    return out
