"""Salvage of a log damaged in the middle (issue 14, bug 6).

1. One flipped byte in the middle of the log: the store refuses to open (CorruptionError, for
   every tenant); `Store.salvage` keeps every record before and after the damage, names exactly
   the record whose frame was hit, sets the damaged bytes aside (the old segment is moved, not
   deleted) and leaves a store that opens, with the other tenant untouched.
2. fsck then reports the lost record (exit 1) until `--repair` acknowledges it.
3. Encrypted stores too (the lost record is named by its key when its frame still opens, else by
   its keyed id), and a clean store is left untouched.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from grm.cli import main
from grm.errors import CorruptionError
from grm.store import Store, StoreConfig
from grm.store.log import HEADER_SIZE

from tests.store.helpers import segments

KEY = bytes(range(32))


@pytest.fixture(autouse=True)
def _quiet():
    logging.disable(logging.CRITICAL)
    yield
    logging.disable(logging.NOTSET)


def _fill(root: Path, key: bytes | None = None) -> dict[tuple[str, str], bytes]:
    written = {}
    with Store.open(StoreConfig(root, master_key=key, checkpoint_every=10_000)) as s:
        for i in range(30):
            tenant = "alice" if i % 2 else "bob"
            data = f"payload {i} ".encode() * 5
            s.put(tenant, "block", f"k{i:02d}", payload=data, text=f"text {i}", meta={"i": i})
            written[(tenant, f"k{i:02d}")] = data
    return written


def _frame_offsets(seg: Path) -> list[tuple[int, int, dict]]:
    data, out, off = seg.read_bytes(), [], HEADER_SIZE
    while off < len(data):
        n = int.from_bytes(data[off:off + 4], "little")
        out.append((off, off + 16 + n, json.loads(data[off + 16:off + 16 + n])))
        off += 16 + n
    return out


def _flip_put_of(seg: Path, key_index: int, where: str = "meta") -> None:
    data = bytearray(seg.read_bytes())
    puts = [(a, b) for a, b, body in _frame_offsets(seg) if body["op"] == "put"]
    a, b = puts[key_index]
    i = data.index(b'"i":', a) if where == "meta" else (a + b) // 2
    data[i + 1] ^= 0x01
    seg.write_bytes(bytes(data))


def test_salvage_keeps_every_intact_record_and_names_the_lost_one(root: Path) -> None:
    written = _fill(root)
    [seg] = segments(root)
    original = seg.read_bytes()
    _flip_put_of(seg, 13)  # k13, alice's
    with pytest.raises(CorruptionError):
        Store.open(StoreConfig(root))
    rep = Store.salvage(StoreConfig(root))
    assert rep.salvaged and rep.lost == ["alice/block/k13"] and len(rep.damaged_ranges) == 1
    assert rep.lost_lsns and rep.evidence
    moved = root / [q for q in rep.quarantined if q.endswith(seg.name)][0]
    assert len(moved.read_bytes()) == len(original)  # set aside whole, never deleted
    with Store.open(StoreConfig(root)) as s:
        for (tenant, key), data in written.items():
            rec = s.get(tenant, "block", key)
            if key == "k13":
                assert rec is None
                continue
            assert rec is not None and s.read_payload(rec) == data and rec.meta == {"i": int(key[1:])}
        assert s.fsck().lost == ["alice/block/k13"]
        s.put("bob", "block", "new", payload=b"after salvage")  # it writes again
    assert main(["fsck", "--store", str(root), "--json"]) == 1
    assert main(["fsck", "--store", str(root), "--json", "--repair"]) == 0
    assert main(["fsck", "--store", str(root), "--json"]) == 0


def test_salvage_of_an_encrypted_store(root: Path) -> None:
    written = _fill(root, KEY)
    [seg] = segments(root)
    _flip_put_of(seg, 4, where="middle")
    with pytest.raises(CorruptionError):
        Store.open(StoreConfig(root, master_key=KEY))
    rep = Store.salvage(StoreConfig(root, master_key=KEY))
    assert len(rep.lost) == 1 and rep.lost[0].startswith("bob/block/")
    with Store.open(StoreConfig(root, master_key=KEY)) as s:
        present = {(r.tenant, r.key) for r in s.records()}
        assert len(present) == len(written) - 1
        for tenant, key in present:
            assert s.read_payload(s.get(tenant, "block", key)) == written[(tenant, key)]


def test_salvage_after_a_zeroed_range_and_a_cut_tail_in_a_middle_segment(root: Path) -> None:
    written = _fill(root)
    [seg] = segments(root)
    data = bytearray(seg.read_bytes())
    frames = _frame_offsets(seg)
    a, b = frames[20][0], frames[25][1]
    data[a:b] = bytes(b - a)
    seg.write_bytes(bytes(data))
    with pytest.raises(CorruptionError):
        Store.open(StoreConfig(root))
    assert main(["fsck", "--store", str(root), "--salvage", "--json"]) == 1  # the CLI: records were lost
    rep = Store.salvage(StoreConfig(root))  # and again: nothing left to salvage
    assert not rep.salvaged
    with Store.open(StoreConfig(root)) as s:
        kept = {(r.tenant, r.key) for r in s.records()}
        rep.lost = s.fsck().lost
    assert kept and not (kept & {tuple(x.split("/")[0::2]) for x in rep.lost})
    assert len(kept) + len(rep.lost) == len(written)
    for tenant, key in kept:
        assert (tenant, key) in written


def test_salvage_leaves_a_clean_store_untouched(root: Path) -> None:
    _fill(root)
    before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file() and p.name != "LOCK"}
    rep = Store.salvage(StoreConfig(root))
    assert not rep.salvaged and rep.lost == [] and rep.records == 30
    after = {p: p.read_bytes() for p in root.rglob("*") if p.is_file() and p.name != "LOCK"}
    assert after == before


def test_a_frame_that_no_longer_parses_is_still_named(root: Path) -> None:
    _fill(root)
    [seg] = segments(root)
    data = bytearray(seg.read_bytes())
    a, _b = [(a, b) for a, b, body in _frame_offsets(seg) if body["op"] == "put"][7]
    i = data.index(b'"meta":{', a) + len(b'"meta":')
    data[i] = ord("[")  # the JSON of the frame is broken, its identity fields still read
    seg.write_bytes(bytes(data))
    rep = Store.salvage(StoreConfig(root))
    assert rep.lost == ["alice/block/k07"]
