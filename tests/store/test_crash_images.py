"""Crash images (tests/sim): for every prefix of each workload's file-system operation log,
the disk images a crash could leave are recovered in a fresh store and checked against the
durability promise. Together the workloads recover > 5,000 distinct images per run."""

from __future__ import annotations

import logging

import pytest

from grm.errors import CorruptionError
from grm.store import MemoryFS, Store, StoreConfig, config
from grm.store.log import HEADER_SIZE
from tests.sim import crash
from tests.sim.workloads import WORKLOADS
from tests.store.helpers import memory_store

SUBSETS = 16  # random subsets of the pending writes per crash point
# distinct images each workload must at least produce (their sum is > 5,000)
MINIMUM = {"ingest-normal": 400, "ingest-async": 1500, "chat-full": 200, "chat-async": 500,
           "chat-strict": 200, "memory-chat": 200, "memory-chat-async": 600, "mode-change": 600,
           "fsck-repair": 100, "encrypted": 400, "encrypted-async": 1500}


@pytest.fixture(autouse=True)
def _quiet():
    logging.disable(logging.WARNING)  # thousands of recoveries each log a dropped tail
    yield
    logging.disable(logging.NOTSET)


def test_workload_minimums_add_up_to_five_thousand_images() -> None:
    assert set(MINIMUM) == set(WORKLOADS)
    assert sum(MINIMUM.values()) >= 5000


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_every_crash_image_recovers_an_acknowledged_prefix(name: str) -> None:
    """See tests/sim/crash.py for the five invariants each image is checked against."""
    rep = crash.check_run(name, WORKLOADS[name](), seed=0, subsets=SUBSETS)
    assert rep.violations == []
    assert rep.distinct >= MINIMUM[name], rep


def test_checker_catches_a_store_that_acknowledges_before_fsync(monkeypatch) -> None:
    """The suite can fail: with normal mode's fsync switched off, power-loss images lose
    acknowledged writes and the checker says so."""
    monkeypatch.setitem(config.MODE_RULES, "normal", {**config.MODE_RULES["normal"], "fsync_commit": False})
    rep = crash.check_run("ingest-normal", WORKLOADS["ingest-normal"](), subsets=2)
    assert any("acknowledged" in v for v in rep.violations)


def test_checker_catches_a_supersession_split_across_commits(monkeypatch) -> None:
    """The memory chat's invariant can fail: with a correction's new fact node, the old node's
    state and its lineage edge committed one by one instead of as one transaction, images between
    the commits hold two active locker facts in one scope, or a superseded fact without lineage."""
    from grm.policy.ledger import FACT, LINEAGE, Ledger

    def split_write(self, fact, supersede, evidence):
        parent = fact.supersedes[0] if fact.supersedes else None
        self.store.put(self.tenant, FACT, fact.id, meta=fact.to_meta(), text=fact.statement, parent=parent)
        for old, reason in supersede:
            self.store.set_state(self.tenant, FACT, old, "superseded")
            self.store.put(self.tenant, LINEAGE, old, parent=fact.id,
                           meta={"successor": fact.id, "tombstone": None, "reason": reason, "at": evidence.at,
                                 "evidence": evidence.to_json()})
        return fact

    monkeypatch.setattr(Ledger, "write", split_write)
    rep = crash.check_run("memory-chat", WORKLOADS["memory-chat"](), subsets=2)
    assert any("2 active facts of ('my locker code', 'is') in scope tenant" in v for v in rep.violations)
    assert any("has no lineage edge" in v for v in rep.violations)


def test_checker_catches_recovery_that_refuses_unsynced_gaps(monkeypatch) -> None:
    """With the old rule (any valid frame after a bad one is corruption), async images where a
    later unsynced write landed before an earlier one fail to recover."""
    import grm.store.log as log_mod

    def old_rule(data, start, salt, lsn):
        return next(((off, later, None) for off, later, _ in log_mod.valid_frames_after(data, start, salt, lsn)), None)

    monkeypatch.setattr(log_mod, "_durability_proof", old_rule)
    rep = crash.check_run("ingest-async", WORKLOADS["ingest-async"](), subsets=4)
    assert any("recovery failed: CorruptionError" in v for v in rep.violations)


def _log_path(fs: MemoryFS) -> str:
    return "/mem/store/log/" + next(n for n in fs.listdir("/mem/store/log") if n.endswith(".seg"))


def test_unsynced_gap_followed_by_later_frames_is_dropped() -> None:
    """Async: frames after the last fsync whose first frame never landed are a tail, not damage:
    1. recovery drops them and the store opens; 2. everything up to the flush is there."""
    s, fs = memory_store(durability="async", async_flush_ms=3_600_000)
    s.put("t", "block", "a", payload=b"a")
    s.flush()
    durable_end = fs.size(_log_path(fs))
    s.put("t", "block", "b")
    s.put("t", "block", "c")
    s._stop_flusher(join=True)  # a crash: no final flush
    raw = fs.raw(_log_path(fs))
    raw[durable_end:durable_end + 20] = bytes(20)  # the first unsynced frame never landed
    s._lock_handle.release()
    with Store.open(StoreConfig(root="/mem/store", fs=fs)) as s2:
        assert sorted(r.key for r in s2.records()) == ["a"]
        assert s2.counters["torn_records_dropped"] >= 1


def test_damage_before_a_frame_written_after_it_was_durable_raises() -> None:
    """Normal mode: a frame whose writer knew an earlier LSN was fsynced proves that the earlier
    frame was acknowledged: damage there is CorruptionError naming the file and offset."""
    s, fs = memory_store()
    s.put("t", "block", "a")
    s.put("t", "block", "b")
    s.close()
    path = _log_path(fs)
    fs.raw(path)[HEADER_SIZE + 20] ^= 0x10
    with pytest.raises(CorruptionError) as e:
        Store.open(StoreConfig(root="/mem/store", fs=fs))
    assert e.value.path == path and e.value.offset == HEADER_SIZE
