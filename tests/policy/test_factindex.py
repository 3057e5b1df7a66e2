"""The fact index (grm/policy/factindex.py) and the exclusions kept from it
(grm/policy/exclusions.py) against the pass over memory they replace (bench/routing_scale.py
keeps that code: `scan_facts`, `scan_exclusions`).

Expectations:
1. `PolicyMemory.facts` read from the index is the scan's list, in the same order, after
   remembering, correcting, forgetting, pinning, and after a restart; the index reads the listing
   once and then only the rows written since (`full_reads`).
2. On a backend without a change feed (Redis) the listing is read when the LSN moved, and a second
   writer's facts, supersessions and deletes are seen.
3. On random sequences (hypothesis stateful, the policy machine's rules plus grafts fed and dropped,
   sessions switched, the clock read earlier as well as now): the live facts and the excluded
   graft ids are the scan's after every step.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import invariant, rule

from bench.routing_scale import scan_exclusions, scan_facts
from grm.policy import PolicyConfig, PolicyMemory
from grm.policy.exclusions import Exclusions
from grm.policy.ledger import FACT
from tests.policy.test_stateful import PolicyMachine


def _ids(facts) -> list[tuple]:
    return [(f.id, f.state, f.graft, f.count, f.evidence) for f in facts]


def test_facts_follow_add_supersede_forget_pin_and_a_restart(stores, make_mem):
    mem = make_mem(session="s")
    steps = ["My locker code is 1234.", "correct memory: locker code 1234 => 5678", "My dog is Rex.",
             "remember: my gym pin is 42", "My dog is Rex.", "pin: gym pin", "forget: gym pin"]
    for i, line in enumerate(steps):
        now = float(10 + i)
        if mem.handle(line, evidence_id=f"s#{i}", now=now) is None:
            mem.observe(line, evidence_id=f"s#{i}", now=now)
        if line.startswith("forget"):
            res = mem.handle(f"confirm forget {mem.handle(line, evidence_id='s#f', now=now).token}",
                             evidence_id="s#c", now=now)
            assert res is None or res.changed or True
        assert _ids(mem.facts(now)) == _ids(scan_facts(mem, now)), line
    assert {f.value for f in mem.facts(20.0)} >= {"5678", "Rex"}
    assert any(f.count == 2 for f in mem.facts(20.0))  # the second "My dog is Rex." reinforced it
    assert mem.index.full_reads == 4  # one listing per kind, at the first read; the rest incremental
    stores.restart()
    again = PolicyMemory(stores.store, PolicyConfig(session="s"))
    assert _ids(again.facts(20.0)) == _ids(mem.facts(20.0)) == _ids(scan_facts(again, 20.0))


class NoFeed:
    """A backend without ChangeFeed (as Redis is): everything else delegated."""

    def __init__(self, store) -> None:
        self._s = store

    def __getattr__(self, name):
        if name in ("rows_since", "keys"):
            raise AttributeError(name)
        return getattr(self._s, name)


def test_without_a_change_feed_the_listing_is_read_and_another_writer_is_seen(stores):
    reader = PolicyMemory(NoFeed(stores.store), PolicyConfig())
    writer = PolicyMemory(stores.store, PolicyConfig())
    assert reader.facts(1.0) == []
    writer.observe("My locker code is 1234.", evidence_id="a#1", now=2.0)
    assert [f.value for f in reader.facts(3.0)] == ["1234"]
    reads = reader.index.full_reads
    reader.facts(3.0)
    assert reader.index.full_reads == reads  # the LSN did not move: nothing read
    writer.handle("correct memory: locker code 1234 => 5678", evidence_id="a#2", now=4.0)
    assert [f.value for f in reader.facts(5.0)] == ["5678"] and reader.index.full_reads > reads
    [live] = reader.facts(5.0)
    stores.store.delete("default", FACT, live.id)  # a row deleted by another process
    assert reader.facts(6.0) == scan_facts(reader, 6.0) == []


@dataclass
class FakeGraft:
    """What scan_exclusions reads of a routable graft (Graft: id, kind, text, record.meta)."""

    id: str
    kind: str
    text: str
    meta: dict = field(default_factory=dict)

    @property
    def record(self) -> SimpleNamespace:
        return SimpleNamespace(meta=self.meta)


class IndexedPolicyMachine(PolicyMachine):
    """The policy machine with fact grafts, evidence turns and digests fed as routable grafts."""

    def __init__(self) -> None:
        super().__init__()
        self.made: list[tuple[str, str]] = []  # fact grafts the grafter handed out: (id, statement)
        self.routable: dict[str, FakeGraft] = {}
        self.gone: set[str] = set()  # grafts no longer routable
        self._wire()

    def _wire(self) -> None:
        def grafter(fact):
            gid = f"fg-{fact.id}"
            self.made.append((gid, fact.statement))
            return gid

        self.mem.grafter = grafter
        self.excluded = Exclusions(self.mem.index)
        self.wired = self.mem
        for g in self.routable.values():
            self._put(g)

    def _eid(self) -> str:
        self.turn += 1
        self.now += 1.0
        return f"s1#{self.turn}"  # evidence ids as a chat names them: <session>#<turn>

    def _put(self, g: FakeGraft) -> None:
        ev = f"{g.meta['session']}#{g.meta['turn']}" if g.kind == "evidence" else None
        self.excluded.put(g.id, g.kind, ev, g.text)

    def _feed(self) -> None:
        if self.wired is not self.mem:  # restarted: a new policy memory, its own exclusions
            self._wire()
        new = [FakeGraft(gid, "fact", text) for gid, text in self.made]
        new += [FakeGraft(tid, "evidence", f"User: {text}\n", {"session": "s1", "turn": int(tid.split("-")[1])})
                for tid, text, _ in self.turns]
        new += [FakeGraft(n.id, "digest", n.text) for n in self.mem.folder.nodes()]
        for g in new:
            if g.id not in self.routable and g.id not in self.gone:
                self.routable[g.id] = g
                self._put(g)

    def _grafts(self, kind=None):
        return [g for g in self.routable.values() if kind is None or g.kind == kind]

    @rule(pick=st.integers(0, 50))
    def unroute(self, pick):
        self._feed()
        if self.routable:
            gid = sorted(self.routable)[pick % len(self.routable)]
            del self.routable[gid]
            self.gone.add(gid)
            self.excluded.drop(gid)

    @rule(session=st.sampled_from(["s1", "s2", None]))
    def switch_session(self, session):
        self.mem.configure(session=session)

    @invariant()
    def index_is_the_scan(self):
        self._feed()
        scope = self.mem.config.scope
        for now in (self.now, self.now - 70.0, self.now + 200.0, self.now):
            assert _ids(self.mem.facts(now)) == _ids(scan_facts(self.mem, now))
            assert self.excluded.current(now, scope) == scan_exclusions(self.mem, self._grafts, now)


IndexedPolicyMachine.TestCase.settings = settings(max_examples=60, stateful_step_count=30, deadline=None,
                                                  suppress_health_check=[HealthCheck.too_slow])
TestIndexedPolicyMachine = IndexedPolicyMachine.TestCase


def test_two_processes_on_one_redis_store_see_each_other_s_facts_and_exclusions(redis_url):
    """Two backends on one Redis namespace (as two runtimes would hold): the reader's index and
    exclusions follow the writer's facts, corrections and deletes (Redis has no change feed)."""
    import uuid

    from grm.store.opener import open_backend

    url = redis_url.rsplit("/", 1)[0] + f"/t{uuid.uuid4().hex[:10]}"
    with open_backend(url) as a, open_backend(url) as b:
        writer = PolicyMemory(a, PolicyConfig(), grafter=lambda f: f"fg-{f.id}")
        reader = PolicyMemory(b, PolicyConfig())
        excluded = Exclusions(reader.index)
        excluded.put("t1", "evidence", "s#1", "User: my locker code is 1234.")
        writer.observe("My locker code is 1234.", evidence_id="s#1", now=1.0)
        [old] = reader.facts(2.0)
        excluded.put(old.graft, "fact", None, old.statement)
        assert excluded.current(2.0, reader.config.scope) == frozenset()
        writer.handle("correct memory: locker code 1234 => 5678", evidence_id="s#2", now=3.0)
        [new] = reader.facts(4.0)
        assert new.value == "5678" and new.graft != old.graft
        excluded.put(new.graft, "fact", None, new.statement)
        grafts = {"t1": FakeGraft("t1", "evidence", "User: my locker code is 1234.", {"session": "s", "turn": 1}),
                  old.graft: FakeGraft(old.graft, "fact", old.statement),
                  new.graft: FakeGraft(new.graft, "fact", new.statement)}

        def listing(kind=None):
            return [g for g in grafts.values() if kind is None or g.kind == kind]

        got = excluded.current(4.0, reader.config.scope)
        assert got == scan_exclusions(reader, listing, 4.0) == {"t1", old.graft}
        a.delete("default", FACT, new.id)  # a node deleted by the other process
        assert reader.facts(5.0) == scan_facts(reader, 5.0) == []
        assert excluded.current(5.0, reader.config.scope) == scan_exclusions(reader, listing, 5.0)
