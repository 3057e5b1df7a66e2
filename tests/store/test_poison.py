"""Any fsync (or other I/O) failure during a write poisons the store until it is reopened."""

from __future__ import annotations

from pathlib import Path

import pytest

from grm.errors import StorePoisoned
from grm.store import LocalFS, MemoryFS, Store, StoreConfig
from tests.store.helpers import FaultyFS


@pytest.mark.parametrize("inner", ["memory", "local"])
@pytest.mark.parametrize("with_payload", [True, False])
def test_fsync_error_poisons_the_store(root: Path, inner: str, with_payload: bool) -> None:
    """1. the failing write raises StorePoisoned; 2. later writes do too, even with fsync fixed;
    3. reads still work; 4. after reopening, the acknowledged rows are there and writes work."""
    fs = FaultyFS(MemoryFS() if inner == "memory" else LocalFS())
    cfg = StoreConfig(root=root, fs=fs)
    s = Store.open(cfg)
    s.put("t", "block", "ok", payload=b"safe")
    fs.fail_fsync = True
    with pytest.raises(StorePoisoned):
        s.put("t", "block", "bad", payload=b"doomed" if with_payload else None)
    fs.fail_fsync = False
    with pytest.raises(StorePoisoned):
        s.put("t", "block", "later")
    with pytest.raises(StorePoisoned):
        s.delete("t", "block", "ok")
    with pytest.raises(StorePoisoned):
        s.fsck(repair=True)
    assert s.get("t", "block", "bad") is None
    assert s.read_payload(s.get("t", "block", "ok")) == b"safe"
    assert s.stats()["poisoned"] is True
    s.close()
    with Store.open(cfg) as s:
        assert s.read_payload(s.get("t", "block", "ok")) == b"safe"
        s.put("t", "block", "later")
        assert s.get("t", "block", "later") is not None


def test_fsync_error_during_checkpoint_poisons(root: Path) -> None:
    """The commit that triggers a checkpoint is durable (its log fsync succeeded) even though
    the checkpoint's fsync fails: the write raises, the store is poisoned, reopen has the row."""
    fs = FaultyFS(MemoryFS())
    cfg = StoreConfig(root=root, fs=fs, checkpoint_every=4)
    s = Store.open(cfg)
    s.put("t", "block", "a")
    fs.fail_fsync, fs.fail_only = True, "checkpoints"
    with pytest.raises(StorePoisoned):
        s.put("t", "block", "b")  # frames 3-4 reach checkpoint_every
    with pytest.raises(StorePoisoned):
        s.put("t", "block", "c")
    s.close()
    fs.fail_fsync = False
    with Store.open(cfg) as s:
        assert sorted(r.key for r in s.records()) == ["a", "b"]
        s.checkpoint()
        assert s.counters["checkpoints_written"] == 1


def test_volatile_mode_never_fsyncs(root: Path) -> None:
    fs = FaultyFS(MemoryFS())
    fs.fail_fsync = True  # would poison on the first fsync
    with Store.open(StoreConfig(root=root, fs=fs, durability="volatile", checkpoint_every=3)) as s:
        for i in range(5):
            s.put("t", "block", f"{i}", payload=bytes([i]))
        s.checkpoint()
        assert fs.fsyncs == 0
    fs.fail_fsync = False
    with Store.open(StoreConfig(root=root, fs=fs)) as s:
        assert len(list(s.records())) == 5


def test_normal_mode_fsyncs_payload_before_log(root: Path) -> None:
    """Invariant 5 on the call sequence: the payload file's fsync and rename come before the
    log append that names it."""
    events: list[str] = []
    inner = MemoryFS()

    class Recording(FaultyFS):
        def open_write(self, path, *, append=False):
            h = super().open_write(path, append=append)
            kind = "log" if path.endswith(".seg") else "payload" if "/payloads/" in path else "other"

            class H:
                def write(self, data):
                    events.append(f"write {kind}")
                    h.write(data)

                def fsync(self):
                    events.append(f"fsync {kind}")
                    h.fsync()

                def close(self):
                    h.close()
            return H()

        def rename(self, src, dst):
            events.append("rename payload" if "/payloads/" in dst else "rename other")
            inner.rename(src, dst)

    with Store.open(StoreConfig(root=root, fs=Recording(inner))) as s:
        events.clear()
        s.put("t", "block", "k", payload=b"data")
    assert events == ["write payload", "fsync payload", "rename payload", "write log", "fsync log"]
