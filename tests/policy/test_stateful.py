"""Property test (hypothesis stateful, on MemoryFS): random sequences of remember / observe /
correct / forget (+ confirm) / pin / mark / approve / reject / fold / time passing / restart.

Invariants after every step:
1. No active contradictions in one scope: active facts with the same (scope, subject,
   predicate) of a single-valued predicate never have overlapping validity windows.
2. Lineage is always resolvable: every superseded fact has a lineage edge leading to an existing
   fact or to a tombstone that names it, following successors ends at an active fact or a
   tombstone, and every id a node says it supersedes exists.
3. Nothing is lost: no fact node, review item or folding record ever disappears, and a restart
   (close, reopen) gives back exactly the rows that were there.
4. Every retired source is reachable by descent from the node that folded it (or its era).
"""

from __future__ import annotations

from itertools import combinations
from pathlib import Path

from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from grm.policy import PolicyConfig, PolicyMemory
from grm.policy.ledger import FACT, LINEAGE, TOMBSTONE
from grm.store import MemoryFS, Store, StoreConfig
from tests.policy.conftest import snapshot

SUBJECTS = ["locker code", "gym pin", "door word"]
VALUES = ["1234", "5678", "Blue", "9"]
LIFETIMES = ["remember permanently", "remember this for the project", "remember this for the session",
             "remember for now", "remember"]
subjects = st.sampled_from(SUBJECTS)
values = st.sampled_from(VALUES)


class PolicyMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.fs = MemoryFS()
        self.store_config = StoreConfig(root=Path("/mem/policy-prop"), fs=self.fs, checkpoint_every=7)
        self.config = PolicyConfig(project="p", session="s1", volatile_ttl_s=50.0, fold_window=2,
                                   fold_keep_recent=0, era_fanout=2)
        self.store = Store.open(self.store_config)
        self.mem = PolicyMemory(self.store, self.config)
        self.now = 1000.0
        self.turn = 0
        self.turns: list[tuple[str, str, float]] = []
        self.seen: set[tuple[str, str]] = set()  # (kind, key) of every policy row ever written

    def teardown(self) -> None:
        self.store.close()

    def _eid(self) -> str:
        self.turn += 1
        self.now += 1.0
        return f"turn-{self.turn}"

    def _line(self, text: str):
        return self.mem.handle(text, evidence_id=self._eid(), now=self.now)

    # ---- rules -------------------------------------------------------------------------------

    @rule(how=st.sampled_from(LIFETIMES), subject=subjects, value=values)
    def remember(self, how, subject, value):
        res = self._line(f"{how}: my {subject} is {value}")
        assert res is not None and not res.malformed
        event(f"remember: {'review' if res.review else 'changed' if res.changed else 'unchanged'}")
        if res.changed and res.review is None and how == "remember permanently":
            live = [f for f in self.mem.ledger.active()
                    if f.live(self.now) and f.subject == f"my {subject}" and f.scope.depth == 0]
            assert [f.value for f in live] == [value]

    @rule(subject=subjects, value=values)
    def chat(self, subject, value):
        text = f"by the way my {subject} is {value}"
        self.turns.append((f"turn-{self.turn + 1}", text, self.now + 1.0))
        eid = self._eid()
        assert self.mem.handle(text, evidence_id=eid, now=self.now) is None
        self.mem.observe(text, evidence_id=eid, now=self.now)

    @rule(subject=subjects, value=values)
    def correct(self, subject, value):
        res = self._line(f"correct memory: {subject} => {value}")
        event(f"correct: changed={res.changed}")
        if res.changed:
            (new,) = res.facts
            assert self.mem.fact(new).value == value and self.mem.fact(new).state == "active"

    @rule(subject=subjects, confirm=st.booleans())
    def forget(self, subject, confirm):
        res = self._line(f"forget: {subject}")
        if res.token and confirm:
            done = self._line(f"confirm forget {res.token}")
            assert done.changed
            event("forget: confirmed")
            res = done
        if res.changed:
            assert all(self.mem.fact(i).state == "superseded" for i in res.facts)

    @rule(query=st.sampled_from(["", "   ", "!!!", "zebra", '""', "code 31337"]),
          verb=st.sampled_from(["forget", "pin", "unpin", "mark immutable", "correct memory"]))
    def empty_match_changes_nothing(self, query, verb):
        before = snapshot(self.store)
        line = f"{verb}: {query} => 1" if verb == "correct memory" else f"{verb}: {query}"
        res = self._line(line)
        assert not res.changed and snapshot(self.store) == before

    @rule(subject=subjects, verb=st.sampled_from(["pin", "unpin", "mark immutable", "mark mutable"]))
    def revise(self, subject, verb):
        self._line(f"{verb}: {subject}")

    @precondition(lambda self: self.mem.reviews.pending())
    @rule(approve=st.booleans(), pick=st.integers(0, 5))
    def review(self, approve, pick):
        items = self.mem.reviews.pending()
        item = items[pick % len(items)]
        res = self._line(f"{'approve' if approve else 'reject'} review {item.id}")
        event(f"review: changed={res.changed}")
        if res.changed:
            assert self.mem.reviews.get(item.id).status == ("approved" if approve else "rejected")

    @rule(lossy=st.booleans())
    def fold(self, lossy):
        self.now += 1.0
        digester = (lambda s: "nothing was said") if lossy else None
        for res in self.mem.folder.fold_pending(self.turns, now=self.now, digester=digester):
            assert res.status in ("folded", "aborted", "skipped")
            event(f"fold: {res.status}{' era' if res.node and res.node.startswith('e-') else ''}")
            if res.status == "aborted":
                assert res.coverage < self.config.min_coverage

    @rule(dt=st.sampled_from([5.0, 30.0, 120.0]))
    def time_passes(self, dt):
        self.now += dt

    @rule()
    def restart(self):
        before = snapshot(self.store)
        self.store.close()
        self.store = Store.open(self.store_config)
        self.mem = PolicyMemory(self.store, self.config)
        assert snapshot(self.store) == before
        event("restart")

    # ---- invariants --------------------------------------------------------------------------

    @invariant()
    def no_active_contradictions(self):
        groups: dict = {}
        for f in self.mem.ledger.active():
            if not f.multi_valued:
                groups.setdefault((f.scope, f.key), []).append(f)
        for facts in groups.values():
            for a, b in combinations(facts, 2):
                assert not a.overlaps(b.valid_from, b.expires_at), (a.line(), b.line())

    @invariant()
    def lineage_resolvable(self):
        t = self.config.tenant
        for rec in self.store.records(t, FACT):
            for old in rec.meta["supersedes"]:
                assert self.store.get(t, FACT, old) is not None
            if rec.state != "superseded":
                assert self.store.get(t, LINEAGE, rec.key) is None
                continue
            edge = self.store.get(t, LINEAGE, rec.key)
            assert edge is not None, rec.key
            if edge.meta["successor"] is not None:
                assert self.store.get(t, FACT, edge.meta["successor"]) is not None
                end = self.mem.ledger.successor(rec.key)
                assert end is None or end.state == "active"
            else:
                tomb = self.store.get(t, TOMBSTONE, edge.meta["tombstone"])
                assert tomb is not None and rec.key in tomb.meta["facts"]

    @invariant()
    def nothing_lost(self):
        rows = {(r.kind, r.key) for r in self.store.records(self.config.tenant)}
        assert self.seen <= rows
        self.seen = rows

    @invariant()
    def retired_sources_reachable(self):
        f = self.mem.folder
        for item in f.retired():
            node = f.folded_into(item)
            top = f.folded_into(node) or node
            if f.node(item) is None:  # a source turn (not a digest)
                assert item in f.descend(top)


PolicyMachine.TestCase.settings = settings(max_examples=120, stateful_step_count=40, deadline=None,
                                           suppress_health_check=[HealthCheck.too_slow])
TestPolicyMachine = PolicyMachine.TestCase
