"""What routing must not mount, kept up to date instead of recomputed per question.

A graft id is excluded (grm/runtime/policy_glue.py says why each is) when it is
- retired: folded into a digest or era (the fact index's `retired` rows);
- the graft of a fact that is not live, unless a live fact has the same graft;
- a routable fact graft no live fact has;
- a routable evidence turn whose evidence id only facts that are not live name (stale evidence);
- a routable evidence turn or digest holding a stale value (grm/policy/stale.py).

Two feeds keep it: the fact index (grm/policy/factindex.py, this object is its `Observer`) says
which graft ids, evidence ids, stale values and retired ids changed standing; the caller feeds the
routable grafts (`put` / `drop` / `reset`: the runtime wires the graft router's dense-key index,
grm/route/index.py, which follows the store by LSN). Each change re-decides only the ids it
touches: a new stale value is checked against the grafts holding one of its subject's words, a new
graft against the stale values naming one of its words. `current` returns the set, rebuilt only
when it changed.
"""

from __future__ import annotations

from grm.policy.fact import Scope, words
from grm.policy.factindex import FactIndex, StaleKey
from grm.policy.stale import StaleValue

TEXT_KINDS = ("evidence", "digest")  # the graft kinds whose text may hold a stale value


class Exclusions:
    def __init__(self, facts: FactIndex) -> None:
        self.facts = facts
        self.lock = facts.lock  # one lock: the fact index tells this object under it
        self._clear()
        facts.attach(self)

    def _clear(self) -> None:
        self.kind: dict[str, str] = {}  # routable graft -> its kind
        self.evidence_of: dict[str, str] = {}  # routable evidence graft -> its evidence id
        self.by_evidence: dict[str, set[str]] = {}  # evidence id -> routable evidence grafts
        self.text: dict[str, str] = {}  # routable evidence/digest graft -> its text
        self.by_word: dict[str, set[str]] = {}  # word -> routable evidence/digest grafts holding it
        self.values: dict[StaleKey, StaleValue] = {}
        self.values_by_word: dict[str, set[StaleKey]] = {}  # subject word -> stale values naming it
        self.matches: dict[StaleKey, set[str]] = {}  # stale value -> the grafts holding it
        self.held: dict[str, int] = {}  # graft -> how many stale values it holds
        self.out: set[str] = set()
        self._frozen: frozenset[str] | None = frozenset()

    # ----- the routable grafts -----------------------------------------------------------------
    def reset(self) -> None:
        """Every routable graft will be fed again (the feed re-read its listing)."""
        with self.lock:
            for gid in list(self.kind):
                self._drop(gid)

    def put(self, gid: str, kind: str, evidence: str | None, text: str) -> None:
        """A routable graft (or a new version of one): its kind, its evidence id (evidence turns)
        and its text."""
        with self.lock:
            self._drop(gid)
            self.kind[gid] = kind
            if evidence is not None:
                self.evidence_of[gid] = evidence
                self.by_evidence.setdefault(evidence, set()).add(gid)
            if kind in TEXT_KINDS:
                self.text[gid] = text
                held = set(words(text.casefold()))
                for w in held:
                    self.by_word.setdefault(w, set()).add(gid)
                for key in {k for w in held for k in self.values_by_word.get(w, ())}:
                    if self.values[key].held_by(text):
                        self._match(key, gid)
            self._decide(gid)

    def drop(self, gid: str) -> None:
        """A graft that is no longer routable."""
        with self.lock:
            self._drop(gid)

    def _drop(self, gid: str) -> None:
        if self.kind.pop(gid, None) is None:
            return
        ev = self.evidence_of.pop(gid, None)
        if ev is not None:
            self._discard(self.by_evidence, ev, gid)
        text = self.text.pop(gid, None)
        if text is not None:
            held = set(words(text.casefold()))
            for w in held:
                self._discard(self.by_word, w, gid)
            if self.held.pop(gid, 0):  # a stale value it held names one of its words
                for key in {k for w in held for k in self.values_by_word.get(w, ())}:
                    self.matches.get(key, set()).discard(gid)
        self._decide(gid)

    @staticmethod
    def _discard(index: dict[str, set], key: str, item: object) -> None:
        got = index.get(key)
        if got is not None:
            got.discard(item)
            if not got:
                del index[key]

    def _match(self, key: StaleKey, gid: str) -> None:
        self.matches.setdefault(key, set()).add(gid)
        self.held[gid] = self.held.get(gid, 0) + 1

    # ----- the fact index's side (its Observer) ------------------------------------------------
    def graft(self, graft_id: str) -> None:
        self._decide(graft_id)

    def retired(self, key: str) -> None:
        self._decide(key)

    def evidence(self, evidence_id: str) -> None:
        for gid in self.by_evidence.get(evidence_id, ()):
            self._decide(gid)

    def stale(self, key: StaleKey, old: StaleValue | None, new: StaleValue | None) -> None:
        if old is not None:
            del self.values[key]
            for w in old.subject:
                self._discard(self.values_by_word, w, key)
            for gid in self.matches.pop(key, ()):
                self.held[gid] -= 1
                if not self.held[gid]:
                    del self.held[gid]
                self._decide(gid)
        if new is not None:
            self.values[key] = new
            for w in new.subject:
                self.values_by_word.setdefault(w, set()).add(key)
            for gid in {g for w in new.subject for g in self.by_word.get(w, ())}:
                if new.held_by(self.text[gid]):
                    self._match(key, gid)
                    self._decide(gid)

    # ----- the set -----------------------------------------------------------------------------
    def _excluded(self, gid: str) -> bool:
        f = self.facts
        if f.is_retired(gid) or self.held.get(gid, 0) > 0:
            return True
        if f.live_grafts.get(gid, 0) <= 0 and (f.dead_grafts.get(gid, 0) > 0 or self.kind.get(gid) == "fact"):
            return True
        ev = self.evidence_of.get(gid)
        return ev is not None and f.stale_evidence(ev)

    def _decide(self, gid: str) -> None:
        if self._excluded(gid) != (gid in self.out):
            if gid in self.out:
                self.out.discard(gid)
            else:
                self.out.add(gid)
            self._frozen = None

    def current(self, now: float, scope: Scope) -> frozenset[str]:
        """The graft ids routing must skip at `now` in `scope` (the routable grafts fed first)."""
        with self.lock:
            self.facts.sync(now, scope)
            if self._frozen is None:
                self._frozen = frozenset(self.out)
            return self._frozen
