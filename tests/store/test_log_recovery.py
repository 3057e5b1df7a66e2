"""Recovery from the event log: torn tails, mid-log damage, uncommitted transactions,
checkpoints and segment rotation."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from grm.errors import CorruptionError
from grm.store.log import FRAME_SIZE, HEADER_SIZE, encode_body
from tests.store.helpers import open_store, segments


def _three_puts(root: Path) -> tuple[int, int]:
    """Three single-put transactions; returns (log size after the 2nd, after the 3rd)."""
    with open_store(root) as s:
        s.put("t", "block", "a", payload=b"a" * 100, text="alpha")
        s.put("t", "block", "b", parent="a", text="beta")
        mid = segments(root)[-1].stat().st_size
        s.put("t", "block", "c", parent="b", meta={"x": 1}, text="gamma")
        end = segments(root)[-1].stat().st_size
    return mid, end


def _keys(s) -> list[str]:
    return sorted(r.key for r in s.records())


def test_torn_tail_is_dropped_and_counted(root: Path, tmp_path: Path) -> None:
    """Cutting the last transaction anywhere (inside its first frame's header, its body, at the
    frame boundary before the commit, inside the commit frame) loses exactly that transaction,
    counts it, truncates the file back to the last commit, and the store stays writable."""
    mid, end = _three_puts(root)
    assert end - mid > 2 * FRAME_SIZE
    for cut in sorted({mid + 1, mid + FRAME_SIZE - 1, mid + FRAME_SIZE + 3, (mid + end) // 2, end - 5, end - 1}):
        copy = tmp_path / f"cut{cut}"
        shutil.copytree(root, copy)
        seg = segments(copy)[-1]
        with open(seg, "r+b") as f:
            f.truncate(cut)
        with open_store(copy) as s:
            assert _keys(s) == ["a", "b"], cut
            assert s.counters["torn_records_dropped"] >= 1
            assert s.last_lsn == 4
            assert seg.stat().st_size == mid
            s.put("t", "block", "d")
        with open_store(copy) as s:
            assert _keys(s) == ["a", "b", "d"]
            assert s.counters["torn_records_dropped"] == 0


def test_uncommitted_frames_at_the_tail_are_dropped(root: Path) -> None:
    """A transaction whose mutation frames are whole but whose commit frame is missing is not
    applied, and its frames are cut so a later transaction cannot be confused with it."""
    with open_store(root) as s:
        s.put("t", "block", "a")
        mid = segments(root)[-1].stat().st_size
        with s.transaction() as txn:
            txn.put("t", "block", "b")
            txn.put("t", "block", "c")
        first = s.get("t", "block", "b").lsn
    commit_len = FRAME_SIZE + len(encode_body({"op": "commit", "txn": first, "count": 2, "dur": first - 1}))
    seg = segments(root)[-1]
    with open(seg, "r+b") as f:
        f.truncate(seg.stat().st_size - commit_len)
    with open_store(root) as s:
        assert _keys(s) == ["a"]
        assert s.counters["torn_records_dropped"] == 2
        assert seg.stat().st_size == mid
        s.put("t", "block", "z")
    with open_store(root) as s:
        assert _keys(s) == ["a", "z"]


@pytest.mark.parametrize("fill", [b"\0" * 4096, b"\xff" * 37, b'{"op":"put"} garbage'])
def test_trailing_garbage_is_dropped_and_counted(root: Path, fill: bytes) -> None:
    _, end = _three_puts(root)
    seg = segments(root)[-1]
    with open(seg, "ab") as f:
        f.write(fill)
    with open_store(root) as s:
        assert _keys(s) == ["a", "b", "c"]
        assert s.counters["torn_records_dropped"] == 1
    assert seg.stat().st_size == end
    with open_store(root) as s:  # idempotent: nothing left to drop
        assert _keys(s) == ["a", "b", "c"]
        assert s.counters["torn_records_dropped"] == 0


@pytest.mark.parametrize("where", ["body", "length", "lsn"])
def test_damage_in_the_middle_raises_corruption_with_path_and_offset(root: Path, where: str) -> None:
    _three_puts(root)
    seg = segments(root)[-1]
    data = bytearray(seg.read_bytes())
    at = {"body": HEADER_SIZE + FRAME_SIZE + 7, "length": HEADER_SIZE + 2, "lsn": HEADER_SIZE + 9}[where]
    data[at] ^= 0x40
    seg.write_bytes(bytes(data))
    with pytest.raises(CorruptionError) as e:
        open_store(root)
    assert e.value.path == str(seg)
    assert e.value.offset == HEADER_SIZE  # the first frame is the damaged one
    assert seg.read_bytes() == bytes(data)  # nothing was truncated away


def test_damaged_segment_header_raises_corruption(root: Path) -> None:
    _three_puts(root)
    seg = segments(root)[-1]
    data = bytearray(seg.read_bytes())
    data[20] ^= 1  # inside the generation field
    seg.write_bytes(bytes(data))
    with pytest.raises(CorruptionError) as e:
        open_store(root)
    assert e.value.path == str(seg) and e.value.offset == 40


def test_checkpoint_rotates_the_log_and_reopens(root: Path) -> None:
    """1. every `checkpoint_every` frames a checkpoint is written and a new generation starts;
    2. covered segments and older checkpoints are removed; 3. reopen replays only the tail."""
    with open_store(root, checkpoint_every=10) as s:
        for i in range(23):  # 46 frames -> checkpoints at 10, 20, 30, 40 frames
            s.put("t", "block", f"k{i}", payload=f"{i}".encode(), parent=f"k{i - 1}" if i else None)
        s.delete("t", "block", "k0")
        before = sorted(s.records(), key=lambda r: r.key)
        assert s.counters["checkpoints_written"] == 4
        stats = s.stats()
    assert stats["checkpoint_lsn"] == 40 and stats["log_segments"] == 1
    assert [p.name for p in segments(root)] == [f"{5:016x}.seg"]
    assert [p.name for p in (root / "checkpoints").iterdir()] == [f"{40:016x}.ckpt"]
    with open_store(root, checkpoint_every=10) as s:
        assert sorted(s.records(), key=lambda r: r.key) == before
        assert [r.key for r in s.children("t", "block", "k5")] == ["k6"]
        assert s.last_lsn == 48
        s.put("t", "block", "more")
    with open_store(root) as s:
        assert len(list(s.records())) == 23


def test_segment_left_behind_by_a_crash_during_rotation_is_ignored(root: Path, tmp_path: Path) -> None:
    with open_store(root) as s:
        s.put("t", "block", "a")
        s.put("t", "block", "b")
        saved = {p.name: p.read_bytes() for p in segments(root)}
        s.checkpoint()
        s.put("t", "block", "c")
    for name, data in saved.items():  # as if the removal of the covered segment never happened
        (root / "log" / name).write_bytes(data)
    with open_store(root) as s:
        assert _keys(s) == ["a", "b", "c"]
    assert [p.name for p in segments(root)] == [f"{2:016x}.seg"]


def test_checkpoint_without_new_segment_still_recovers(root: Path) -> None:
    """Crash after the checkpoint file is durable but before the new generation exists."""
    with open_store(root) as s:
        s.put("t", "block", "a")
        saved = {p.name: p.read_bytes() for p in segments(root)}
        s.checkpoint()
    for p in segments(root):
        p.unlink()
    for name, data in saved.items():
        (root / "log" / name).write_bytes(data)
    with open_store(root) as s:
        assert _keys(s) == ["a"]
        s.put("t", "block", "b")
    with open_store(root) as s:
        assert _keys(s) == ["a", "b"]


def test_damaged_checkpoint_whose_log_is_gone_raises_instead_of_losing_data(root: Path) -> None:
    with open_store(root) as s:
        s.put("t", "block", "a")
        s.checkpoint()
        s.put("t", "block", "b")
    ckpt = next((root / "checkpoints").iterdir())
    data = bytearray(ckpt.read_bytes())
    data[-3] ^= 0xFF
    ckpt.write_bytes(bytes(data))
    with pytest.raises(CorruptionError, match="gap"):
        open_store(root)


def test_missing_segment_in_the_middle_raises(root: Path) -> None:
    with open_store(root) as s:
        s.put("t", "block", "a")
        s.checkpoint()
        s.put("t", "block", "b")
        first = {p.name: p.read_bytes() for p in segments(root)}
        s.checkpoint()
        s.put("t", "block", "c")
    for p in (root / "checkpoints").iterdir():
        p.unlink()  # no checkpoint: the whole log is needed, and generation 1 is gone
    for name, data in first.items():
        (root / "log" / name).write_bytes(data)
    with pytest.raises(CorruptionError):
        open_store(root)


def test_stale_temporaries_are_removed_on_open(root: Path) -> None:
    open_store(root).close()
    junk = root / "log" / f"{9:016x}.seg.tmp.123.abcd"
    junk.write_bytes(b"half a segment")
    with open_store(root) as s:
        assert s.last_lsn == 0
    assert not junk.exists()
