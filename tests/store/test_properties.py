"""Property tests (hypothesis, on MemoryFS): the store behaves like a dict of rows across
transactions, aborts, checkpoints and reopens; and a log cut at any byte recovers to exactly
the state after the last transaction that fits."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from grm.store import MemoryFS, Store, StoreConfig

ROOT = Path("/mem/prop")
tenants = st.sampled_from(["a", "b"])
kinds = st.sampled_from(["block", "doc"])
keys = st.sampled_from(["k1", "k2", "k3", "k4"])
parents = st.one_of(st.none(), keys)
payloads = st.one_of(st.none(), st.sampled_from([b"", b"x", b"y" * 300]))
texts = st.one_of(st.none(), st.sampled_from(["red fox", "blue whale", "ünïcode"]))
states = st.sampled_from(["active", "superseded", "damaged"])


def _view(store: Store) -> dict:
    return {(r.tenant, r.kind, r.key): (r.parent, r.meta, r.payload, r.payload_size, r.text, r.state)
            for r in store.records()}


class StoreMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.fs = MemoryFS()
        self.cfg = StoreConfig(root=ROOT, fs=self.fs, checkpoint_every=7)
        self.store = Store.open(self.cfg)
        self.model: dict = {}

    def _row(self, parent, payload, text, state, n):
        digest = hashlib.sha256(payload).hexdigest() if payload is not None else None
        return (parent, {"n": n}, digest, len(payload) if payload is not None else 0, text, state)

    @rule(t=tenants, k=kinds, key=keys, parent=parents, payload=payloads, text=texts, n=st.integers(0, 3))
    def put(self, t, k, key, parent, payload, text, n):
        self.store.put(t, k, key, meta={"n": n}, payload=payload, parent=parent, text=text)
        self.model[(t, k, key)] = self._row(parent, payload, text, "active", n)

    @rule(t=tenants, k=kinds, key=keys)
    def delete(self, t, k, key):
        assert self.store.delete(t, k, key) == ((t, k, key) in self.model)
        self.model.pop((t, k, key), None)

    @rule(t=tenants, k=kinds, key=keys, state=states)
    def set_state(self, t, k, key, state):
        if (t, k, key) in self.model:
            self.store.set_state(t, k, key, state)
            self.model[(t, k, key)] = self.model[(t, k, key)][:5] + (state,)

    @rule(t=tenants, key=keys, abort=st.booleans(), n=st.integers(0, 3))
    def transaction(self, t, key, abort, n):
        staged = dict(self.model)
        try:
            with self.store.transaction() as txn:
                txn.put(t, "block", key, meta={"n": n}, payload=b"x", text="red fox")
                staged[(t, "block", key)] = self._row(None, b"x", "red fox", "active", n)
                if txn.delete(t, "doc", key):
                    del staged[(t, "doc", key)]
                if abort:
                    raise KeyboardInterrupt  # any exception, even a BaseException, aborts
        except KeyboardInterrupt:
            pass
        if not abort:
            self.model = staged

    @rule()
    def reopen(self):
        before = sorted(self.store.records(), key=lambda r: (r.tenant, r.kind, r.key))
        self.store.close()
        self.store = Store.open(self.cfg)
        assert sorted(self.store.records(), key=lambda r: (r.tenant, r.kind, r.key)) == before

    @rule()
    def checkpoint(self):
        self.store.checkpoint()

    @invariant()
    def matches_model(self):
        assert _view(self.store) == self.model
        for t, k, key in self.model:
            kids = {r.key for r in self.store.children(t, k, key)}
            assert kids == {kk for (tt, kind, kk), rr in self.model.items()
                            if (tt, kind) == (t, k) and rr[0] == key and rr[5] == "active"}

    def teardown(self):
        self.store.close()


TestStoreMachine = StoreMachine.TestCase
TestStoreMachine.settings = settings(max_examples=25, stateful_step_count=30, deadline=None,
                                     suppress_health_check=[HealthCheck.too_slow])


@settings(max_examples=40, deadline=None)
@given(ops=st.lists(st.tuples(keys, payloads, texts), min_size=1, max_size=8), data=st.data())
def test_log_cut_anywhere_recovers_a_committed_prefix(ops, data) -> None:
    fs = MemoryFS()
    cfg = StoreConfig(root=ROOT, fs=fs)
    snapshots = []  # (log size after the commit, view)
    with Store.open(cfg) as s:
        seg = os.path.join(str(ROOT), "log", fs.listdir(str(ROOT / "log"))[0])
        snapshots.append((fs.size(seg), {}))
        for key, payload, text in ops:
            s.put("a", "block", key, payload=payload, text=text)
            snapshots.append((fs.size(seg), _view(s)))
    cut = data.draw(st.integers(min_value=snapshots[0][0], max_value=snapshots[-1][0]), label="cut")
    fs.truncate(seg, cut)
    expected = [v for size, v in snapshots if size <= cut][-1]
    with Store.open(cfg) as s:
        assert _view(s) == expected
        assert (s.counters["torn_records_dropped"] > 0) == (cut not in {size for size, _ in snapshots})
