"""Tiering in the crash-image suite (tests/sim): a document ingested, then demoted, evicted and
dropped by the tiering policy, then gc, all on a recording file system. Every image a crash (or a
power cut) could leave at any operation recovers to the rows after some step, and in it every span
is servable: its exact payload verifies, or its archive record's does, or it is text-only with its
text and token ids (re-read), and a row that says archived has its archive record. A policy that
dropped the exact payload before the archive record committed would leave images where a span says
archived without one; the last test shows the checker catches that."""

from __future__ import annotations

import logging
from contextlib import contextmanager
from dataclasses import replace

import pytest

from grm.archive.policy import PolicyConfig, TieringPolicy
from grm.runtime import Runtime
from grm.store.gc import collect
from grm.store.kinds import ARCHIVE, BLOCK, GRAFT
from grm.store.tiering import TierConfig, inventory
from tests.conftest import lorem
from tests.sim import crash
from tests.sim.workloads import Run, _run

SMALL = PolicyConfig(min_train_tokens=32, train_tokens=2048, max_train=500, gc=False)


class Stepped:
    """The store as the planes see it, each write (a put, a delete, a whole transaction) one
    step of the crash run, so the checker knows every state a crash may recover."""

    def __init__(self, run: Run) -> None:
        self._run, self._s = run, run.store

    def __getattr__(self, name: str):
        return getattr(self._s, name)

    def put(self, *a, **kw):
        return self._run.step(f"put {a[1]}", lambda: self._s.put(*a, **kw))

    def delete(self, *a, **kw):
        return self._run.step(f"delete {a[1]}", lambda: self._s.delete(*a, **kw))

    def set_state(self, *a, **kw):
        return self._run.step(f"state {a[1]}", lambda: self._s.set_state(*a, **kw))

    @contextmanager
    def transaction(self):
        start = len(self._run.fs.ops)  # payload files are written before the commit: the step starts here
        with self._s.transaction() as txn:
            yield txn
        self._run.step("transaction", lambda: None)
        self._run.steps[-1] = replace(self._run.steps[-1], start=start)


def every_span_servable(s) -> list[str]:
    """Every block row present (a crash before its first write leaves it to be ingested again) is
    servable from some tier, and every document graft's block exists."""
    bad = []
    rows = {r.key: r for r in s.records("default", BLOCK)}
    for key, r in rows.items():
        if r.payload is not None:
            continue  # the checker verifies every payload a row names
        arc = s.get("default", ARCHIVE, key)
        if arc is None and not (r.text and isinstance(r.meta.get("ids"), list)):
            bad.append(f"block {key[:8]} has neither exact K/V, an archive record, nor text and ids")
        if arc is None and r.meta.get("tier") == "archive":
            bad.append(f"block {key[:8]} says archived but no archive record exists")
    for g in s.records("default", GRAFT):
        if g.meta.get("kind") == "document" and g.meta.get("block") not in rows:
            bad.append(f"document graft {g.key[:8]} names a missing block")
    return bad


def tiering_run(make_runtime) -> Run:
    base = make_runtime()  # the model, dialect and self-test; its own store is not used
    run = _run(durability="normal", checkpoint_every=1000)
    run.open()
    store = Stepped(run)
    rt = Runtime(replace(base.config, section_tokens=32, block_tokens=32), base.lm, base.dialect, base.selftest,
                 store, owns_store=False)
    rt.ingest_text(lorem(1) + "\nThe vault code is 4512.\n", "doc.txt")
    run.invariant = every_span_servable
    full = inventory(run.store).footprint
    rep = TieringPolicy(store, rt.lm, rt.dialect, TierConfig(int(full * 0.9), low_water=0.9), SMALL,
                        archive=rt.archive).run()
    inv = inventory(run.store)
    assert inv.by_tier()["archive"]["spans"] > 0, rep
    tight = TierConfig(inv.kept_bytes + inv.log_bytes + inv.row_bytes + 1, high_water=0.95, low_water=0.95)
    TieringPolicy(store, rt.lm, rt.dialect, tight, SMALL, archive=rt.archive).run()
    assert inventory(run.store).by_tier()["text"]["spans"] > 0
    run.step("gc", lambda: collect(run.store, retain_writes=None))
    run.step("close", run.store.close)
    return run


@pytest.fixture(autouse=True)
def _quiet():
    logging.disable(logging.WARNING)
    yield
    logging.disable(logging.NOTSET)


def test_every_crash_image_of_tiering_recovers_with_every_span_servable(make_runtime) -> None:
    run = tiering_run(make_runtime)
    names = [st.name for st in run.steps]
    assert "transaction" in names and names.count("put block") >= 2  # archive commits, then exact drops
    rep = crash.check_run("tiering", run, seed=0, subsets=1)
    assert rep.violations == []
    assert rep.distinct > 100, rep


def test_checker_catches_a_demotion_that_drops_the_exact_payload_first(make_runtime, monkeypatch) -> None:
    """The suite can fail: a demotion that rewrites the row without its payload (saying archived)
    before the archive record commits leaves images where a span says archived and has no archive
    record (the emulated wrong order restores the bytes, then demotes the right way)."""
    real = TieringPolicy._demote

    def exact_first(self, tenant, kind, key):
        rec = self.store.get(tenant, kind, key)
        data = self.store.read_payload(rec) if rec is not None and rec.payload is not None else None
        if data is not None:
            self.store.put(tenant, kind, key, meta={**rec.meta, "tier": "archive"}, payload=None,
                           parent=rec.parent, text=rec.text, state=rec.state)
            self.store.put(tenant, kind, key, meta=rec.meta, payload=data, parent=rec.parent, text=rec.text,
                           state=rec.state)
        return real(self, tenant, kind, key)

    monkeypatch.setattr(TieringPolicy, "_demote", exact_first)
    rep = crash.check_run("tiering-wrong-order", tiering_run(make_runtime), seed=0, subsets=1)
    assert any("says archived but no archive record exists" in v for v in rep.violations)
