"""gc and log compaction in the crash-image suite (tests/sim): every image a crash could leave
during or after `collect` recovers to an acknowledged state, and every payload a recovered row
names is served (never a miss, never other bytes)."""

from __future__ import annotations

import logging

import pytest

from tests.sim import crash
from tests.sim.gc_workloads import GC_WORKLOADS

MINIMUM = {"gc-normal": 250, "gc-async": 800, "compaction-normal": 600, "compaction-async": 1800}


@pytest.fixture(autouse=True)
def _quiet():
    logging.disable(logging.WARNING)
    yield
    logging.disable(logging.NOTSET)


@pytest.mark.parametrize("name", sorted(GC_WORKLOADS))
def test_every_gc_crash_image_recovers_an_acknowledged_prefix(name: str) -> None:
    rep = crash.check_run(name, GC_WORKLOADS[name](), seed=0, subsets=16)
    assert rep.violations == []
    assert rep.distinct >= MINIMUM[name], rep


def test_checker_catches_a_gc_that_removes_files_before_the_rewrite_is_durable(monkeypatch) -> None:
    """The suite can fail: a gc that removes the stale files first and logs the rewrite after
    leaves images (power cut between) where an acknowledged row names a removed file."""
    import grm.store.gc as gc_mod

    real = gc_mod.collect

    def files_first(store, **kw):
        doomed = {r.payload for r in store.records() if r.state == "superseded" and r.payload}
        for path, _, name in list(store._payloads.files()):
            if name in doomed:
                store._fs.remove(path)
        return real(store, **kw)

    monkeypatch.setattr(gc_mod, "collect", files_first)
    import tests.sim.gc_workloads as w

    monkeypatch.setattr(w, "collect", files_first)
    rep = crash.check_run("gc-normal", w.gc("normal"), subsets=2)
    assert any("is a miss" in v for v in rep.violations)
