"""Stale values: what memory once held for a claim and no longer does, so that no turn holding
one is mounted as if it were true (truth wins ties).

A superseded or forgotten fact's own evidence turns are already skipped by routing
(grm/runtime/policy_glue.py). But other turns can hold the old value too: "What is my locker
code?" answered "1234" before `correct memory: locker code 1234 => 5678`. Lexically that turn
matches the question better than the live fact does (the issue measured 1.48 against 1.44), so
it must be excluded by what it says: a turn is stale when it names the claim's subject (one of
its content words), holds the old value, and holds none of the values live now. A turn holding
both ("I switched my bank from Chase to Ally") is the update itself and stays routable.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from grm.policy.fact import FUNCTION_WORDS, MULTI_VALUED, Fact, norm, words


@dataclass(frozen=True)
class StaleValue:
    subject: frozenset[str]  # the claim's subject's content words, case-folded
    value: str  # the value no longer held, case-folded
    live: tuple[str, ...]  # the values of the claim live now (case-folded)

    def held_by(self, text: str) -> bool:
        """`text` names the subject, holds this old value and none of the live ones."""
        low = text.casefold()
        return (bool(self.subject & set(words(low))) and _has(low, self.value)
                and not any(_has(low, v) for v in self.live))


def _has(low: str, value: str) -> bool:
    return bool(value) and re.search(rf"(?<!\w){re.escape(value)}(?!\w)", low) is not None


def stale_values(nodes: Iterable[Fact], live: Iterable[Fact], now: float) -> list[StaleValue]:
    """The old values of every single-valued claim whose fact is no longer live (superseded,
    forgotten or expired; a fact live in another session or project is not stale), unless a
    live fact of the same claim holds that value again."""
    values: dict[tuple[str, str], set[str]] = {}  # claim -> the values live now
    live_ids = set()
    for f in live:
        live_ids.add(f.id)
        values.setdefault(f.key, set()).add(f.value_key)
    out: dict[tuple, StaleValue] = {}
    for f in nodes:
        if f.id in live_ids or f.key[1] in MULTI_VALUED or (f.state == "active" and not f.expired(now)):
            continue
        value, held = norm(f.value), values.get(f.key, set())
        subject = frozenset(words(f.subject)) - FUNCTION_WORDS
        if not value or value in held or not subject:
            continue
        out[(f.key, value)] = StaleValue(subject, value, tuple(sorted(held)))
    return list(out.values())


def stale_text(text: str, stale: list[StaleValue]) -> StaleValue | None:
    """The first stale value `text` holds (see `StaleValue.held_by`), or None."""
    return next((s for s in stale if s.held_by(text)), None)
