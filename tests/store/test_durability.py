"""Durability modes: the promises, mode changes as logged records, async's background flusher
with a bounded window, strict's read-back verification."""

from __future__ import annotations

import errno
import time
from pathlib import Path

import pytest

from grm.errors import StorePoisoned, UserInputError
from grm.store import DURABILITY_MODES, DURABILITY_PROMISES, MemoryFS, Store, StoreConfig
from grm.store.log import read_segment
from tests.store.helpers import FaultyFS, memory_store, segments


def test_every_mode_states_its_crash_and_power_loss_promise() -> None:
    assert set(DURABILITY_PROMISES) == set(DURABILITY_MODES)
    for mode, line in DURABILITY_PROMISES.items():
        assert "process crash: survives" in line, mode
        assert ("power loss: does not" in line) == (mode == "volatile"), mode
    assert "StoreConfig" in StoreConfig.__name__ and "volatile: crash yes, power loss no" in StoreConfig.__doc__


def _mode_frames(root: Path) -> list[str]:
    out = []
    for seg in segments(root):
        from grm.store import LocalFS
        out += [f.body["mode"] for f in read_segment(LocalFS(), str(seg)).frames if f.body["op"] == "mode"]
    return out


def test_mode_changes_are_logged_records_that_survive_reopen_and_checkpoint(root: Path) -> None:
    """1. set_durability writes a mode record; 2. opening with another mode writes one too;
    3. the last mode survives a checkpoint (no record when reopened with the same mode)."""
    with Store.open(StoreConfig(root)) as s:
        s.put("t", "block", "a")
        s.set_durability("strict")
        assert s.durability == "strict" and s.stats()["durability"] == "strict"
        s.put("t", "block", "b")
    assert _mode_frames(root) == ["strict"]
    with Store.open(StoreConfig(root, durability="full")) as s:
        assert s.durability == "full"
        s.checkpoint()
    with Store.open(StoreConfig(root, durability="full")) as s:
        lsn = s.last_lsn
    with Store.open(StoreConfig(root, durability="full")) as s:
        assert s.last_lsn == lsn  # same mode as the checkpoint says: nothing logged
    with pytest.raises(UserInputError):
        Store.open(StoreConfig(root)).set_durability("sometimes")


def test_async_commits_do_not_fsync_and_the_flusher_makes_them_durable() -> None:
    """1. puts in async mode make no fsync on the caller's thread; 2. within the flush window the
    background flusher fsyncs payloads and log and advances durable_lsn."""
    fs = FaultyFS(MemoryFS())
    s = Store.open(StoreConfig(root="/mem/a", fs=fs, durability="async", async_flush_ms=3_600_000))
    before = fs.fsyncs
    rec = s.put("t", "block", "a", payload=b"x" * 100)
    assert fs.fsyncs == before and s.durable_lsn < rec.lsn
    s.flush()
    assert s.durable_lsn >= rec.lsn and fs.fsyncs >= before + 2  # payload + log
    s.close()
    s = Store.open(StoreConfig(root="/mem/b", fs=fs, durability="async", async_flush_ms=20))
    rec = s.put("t", "block", "b", payload=b"y")
    deadline = time.monotonic() + 5
    while s.durable_lsn < rec.lsn and time.monotonic() < deadline:
        time.sleep(0.005)
    assert s.durable_lsn >= rec.lsn
    s.close()


def test_async_flushes_at_once_when_max_pending_commits_wait() -> None:
    s, _ = memory_store(durability="async", async_flush_ms=3_600_000, async_max_pending=3)
    recs = [s.put("t", "block", f"k{i}") for i in range(3)]
    deadline = time.monotonic() + 5
    while s.durable_lsn < recs[-1].lsn and time.monotonic() < deadline:
        time.sleep(0.005)
    assert s.durable_lsn >= recs[-1].lsn
    s.close()


def test_async_fsync_failure_in_the_flusher_poisons_the_store() -> None:
    fs = FaultyFS(MemoryFS())
    s = Store.open(StoreConfig(root="/mem/a", fs=fs, durability="async", async_flush_ms=3_600_000))
    s.put("t", "block", "a")
    fs.fail_fsync = True
    s.flush()
    with pytest.raises(StorePoisoned):
        s.put("t", "block", "b")
    fs.fail_fsync = False
    s.close()
    with Store.open(StoreConfig(root="/mem/a", fs=fs)) as s2:
        assert s2.get("t", "block", "a") is not None


class _LyingFS(FaultyFS):
    """Drops the last byte of every payload write while claiming success."""

    def open_write(self, path, *, append=False):
        handle = self.inner.open_write(path, append=append)

        class H:
            def write(self, data):
                data = bytes(data)
                handle.write(data[:-1] if "/payloads/" in path and data else data)

            def fsync(self):
                handle.fsync()

            def close(self):
                handle.close()
        return H()


@pytest.mark.parametrize("mode", ["strict", "normal"])
def test_strict_reads_back_and_refuses_a_lying_disk(mode: str) -> None:
    """strict: the put fails (poisoned) and nothing names the bad file; normal does not read
    back, so the lie is only caught on read (a miss) - which is why strict exists."""
    fs = _LyingFS(MemoryFS())
    s = Store.open(StoreConfig(root="/mem/a", fs=fs, durability=mode))
    if mode == "strict":
        with pytest.raises(StorePoisoned, match="read-back"):
            s.put("t", "block", "a", payload=b"abcdef")
        assert s.get("t", "block", "a") is None
    else:
        rec = s.put("t", "block", "a", payload=b"abcdef")
        assert s.read_payload(rec) is None
    s.close()


def test_payload_written_under_volatile_is_rewritten_and_synced_under_normal() -> None:
    fs = FaultyFS(MemoryFS())
    s = Store.open(StoreConfig(root="/mem/a", fs=fs, durability="volatile"))
    s.put("t", "block", "a", payload=b"same")
    s.set_durability("normal")
    before = fs.fsyncs
    s.put("t", "block", "b", payload=b"same")
    assert fs.fsyncs >= before + 3  # payload file, its folder, the log
    s.close()


def test_an_fsync_eio_is_reported_as_poison_not_success() -> None:
    fs = FaultyFS(MemoryFS())
    s = Store.open(StoreConfig(root="/mem/a", fs=fs, durability="full"))
    fs.fail_fsync = True
    with pytest.raises(StorePoisoned) as e:
        s.put("t", "block", "a")
    assert e.value.__cause__.errno == errno.EIO
    s.close()
