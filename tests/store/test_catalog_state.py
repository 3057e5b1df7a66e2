"""A plain local store's host state is its catalog (grm.store.state.CatalogState): open reads no
row, a damaged row is caught by its CRC and rebuilt from checkpoint + log, fsck compares the
catalog with checkpoint + log (never with itself), checkpoints stream (format 2; format 1 read)."""

from __future__ import annotations

import json
import sqlite3
import struct
from pathlib import Path

import crc32c
import pytest

from grm.store import checkpoint as ck
from grm.store.checkpoint import CheckpointInvalid, open_checkpoint, read_checkpoint, write_checkpoint
from grm.store.fs import LocalFS
from grm.store.record import Record, canonical_json
from grm.store.state import CatalogState, HostState
from tests.store.helpers import memory_store, open_store


def _fill(root: Path) -> dict:
    with open_store(root) as s:
        for i in range(30):
            s.put("t", "doc", f"k{i}", text=f"row {i} walrus", payload=b"p%d" % i, parent="p" if i % 3 else None)
        s.checkpoint()
        s.put("t", "doc", "late", text="after the checkpoint")
        s.delete("t", "doc", "k4")
        s.set_state("t", "doc", "k5", "superseded")  # a checkpoint row changed by the log
        s.put("t", "doc", "k6", text="rewritten")
        return {r.key: r for r in s.records("t")}


def test_open_reads_no_checkpoint_row_and_serves_the_rows_from_the_catalog(root: Path, monkeypatch) -> None:
    truth = _fill(root)

    def boom(*a, **k):
        raise AssertionError("open read the checkpoint's rows")
    monkeypatch.setattr("grm.store.recovery.checkpoint_rows", boom)
    with open_store(root) as s:
        assert isinstance(s._state, CatalogState) and len(s._state) == len(truth) == 30
        assert {r.key: r for r in s.records("t")} == truth
        assert [r.key for r in s.children("t", "doc", "p")] == [k for k in truth if truth[k].parent == "p"
                                                                and truth[k].state == "active"]
        assert s.counters["catalog_rebuilds"] == 0


def test_encrypted_and_memory_stores_stay_resident() -> None:
    s, _ = memory_store()
    with s:
        assert type(s._state) is HostState


def test_a_row_changed_behind_the_stores_back_fails_its_crc_and_is_rebuilt(root: Path) -> None:
    truth = _fill(root)
    con = sqlite3.connect(root / "catalog.sqlite")
    con.execute("UPDATE rows SET text = 'row 1 forged' WHERE key = 'k1'")
    con.commit()
    con.close()
    with open_store(root) as s:
        assert s.get("t", "doc", "k1") == truth["k1"]
        assert s.counters["catalog_rebuilds"] == 1
        assert s.search_text("t", "forged") == []


def test_fsck_compares_the_catalog_with_checkpoint_and_log_not_with_itself(root: Path) -> None:
    truth = _fill(root)
    con = sqlite3.connect(root / "catalog.sqlite")
    con.execute("DELETE FROM rows WHERE key = 'k7'")  # consistent SQLite, CRCs fine: a lost row
    con.commit()
    con.close()
    with open_store(root) as s:
        assert s.get("t", "doc", "k7") is None
        assert not s.fsck().catalog_ok
        assert "rebuilt catalog" in s.fsck(repair=True).repaired
        assert s.get("t", "doc", "k7") == truth["k7"] and s.fsck().catalog_ok
        rows, lsn, _ = s._truth()
        assert {r.key: r for r in rows} == truth and lsn == s.last_lsn


def test_catalog_of_the_old_schema_is_rebuilt(root: Path) -> None:
    truth = _fill(root)
    con = sqlite3.connect(root / "catalog.sqlite")
    con.execute("UPDATE catalog_meta SET v = '1' WHERE k = 'schema'")
    con.commit()
    con.close()
    with open_store(root) as s:
        assert s.counters["catalog_rebuilds"] == 1 and {r.key: r for r in s.records("t")} == truth


def _rows(n: int) -> list[Record]:
    return [Record("t", "k", f"x{i}", None, {"a": [i, "é\n"]}, None, 0, f"line\n{i}", "active", i + 1)
            for i in range(n)]


def test_checkpoint_streams_in_chunks_and_reads_back(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(ck, "_CHUNK", 64)  # many chunks, lines split across them
    rows = _rows(300)
    p = str(tmp_path / "c.ckpt")
    write_checkpoint(LocalFS(), p, 300, rows, sync=False, mode="full")
    assert read_checkpoint(LocalFS(), p) == (300, rows, "full")
    data = bytearray(Path(p).read_bytes())
    for at in (3, 20, 45, len(data) // 2, len(data) - 30, len(data) - 3):
        bad = bytearray(data)
        bad[at] ^= 0x10
        Path(p).write_bytes(bytes(bad))
        with pytest.raises(CheckpointInvalid):
            open_checkpoint(LocalFS(), p)


def test_format_1_checkpoints_are_still_read(tmp_path: Path) -> None:
    rows = _rows(5)
    body = canonical_json({"lsn": 5, "mode": None, "rows": [r.to_list() for r in rows]}).encode()
    head = ck.HEADER.pack(ck.MAGIC, 1, 0, 5, len(body))
    crc = crc32c.crc32c(body, value=crc32c.crc32c(head))
    p = tmp_path / "old.ckpt"
    p.write_bytes(head + struct.pack("<II", crc, 0) + body)
    assert read_checkpoint(LocalFS(), str(p)) == (5, rows, None)
    assert json.loads(body)["lsn"] == 5


def test_stats_counted_by_sqlite_match_a_count_of_the_rows(root: Path) -> None:
    with open_store(root) as s:
        for i in range(40):
            s.put("t", "a" if i % 2 else "b", f"k{i}", payload=b"x" * (i % 5 + 1), text="hi")
        s.put("u", "a", "z", payload=b"x")
        s.set_state("t", "a", "k1", "superseded")
        s.put("t", "a", "k3", payload=b"x" * 9)  # a new payload; its old one is still other rows'
        s.put("t", "a", "k5", payload=b"x" * 9)  # the same bytes: counted once
        resident = HostState()
        for r in s._state.iter_all():
            resident.put(r)
        assert s.stats()["tenants"] == resident.tally()
        assert s.stats()["tenants"]["t"]["a"] == {"records": 20, "active": 19, "superseded": 1, "damaged": 0,
                                                  "payload_bytes": 1 + 2 + 3 + 4 + 5 + 9}
