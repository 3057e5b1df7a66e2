"""Damage is never hidden (issue 14, bugs 4, 5 and 7).

1. A payload flipped on disk: fsck reports it; after `--repair` marks it damaged it is still
   reported (`already_damaged`, `grm fsck` exits 1) on every later run, `is_damaged` says so, and
   a put of the good bytes heals it (fsck clean again).
2. A truncated log tail while the catalog was ahead of it: the records lost are named in fsck's
   `lost` (exit 1) on every run, the old catalog is kept, and only `--repair` acknowledges it
   (the evidence moves to lost/acknowledged/, nothing is deleted).
3. The fsck report carries `catalog_ok`, `already_damaged` and `lost`; a catalog that disagrees
   with the log shows `catalog_ok: false`, in a read-only fsck too.
"""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path

import pytest

from grm.cli import main
from grm.store import Store, StoreConfig

from tests.store.helpers import payload_files, segments


@pytest.fixture(autouse=True)
def _quiet():
    logging.disable(logging.ERROR)
    yield
    logging.disable(logging.NOTSET)


def _fsck_exit(root: Path, *flags: str) -> int:
    return main(["fsck", "--store", str(root), "--json", *flags])


def test_repaired_damage_stays_reported_until_a_write_heals_it(root: Path) -> None:
    with Store.open(StoreConfig(root)) as s:
        s.put("t", "block", "b", payload=b"block bytes " * 20)
        s.put("t", "block", "ok", payload=b"fine")
    [bad] = [p for p in payload_files(root) if p.stat().st_size == 240]
    data = bytearray(bad.read_bytes())
    data[7] ^= 0x20
    bad.write_bytes(bytes(data))
    with Store.open(StoreConfig(root)) as s:
        assert s.fsck().damaged == ["t/block/b"]
        assert s.fsck(repair=True).repaired[0].startswith("marked damaged t/block/b")
        rep = s.fsck()
        assert rep.damaged == [] and rep.already_damaged == ["t/block/b"]
        assert s.is_damaged(s.get("t", "block", "b")) and not s.is_damaged(s.get("t", "block", "ok"), verify=True)
    assert _fsck_exit(root) == 1 and _fsck_exit(root) == 1  # every run, not only the first
    assert _fsck_exit(root, "--repair") == 1
    with Store.open(StoreConfig(root)) as s:
        assert s.fsck().already_damaged == ["t/block/b"]
        rec = s.put("t", "block", "b", payload=b"block bytes " * 20)  # re-ingest recomputes and writes
        assert not s.is_damaged(rec, verify=True) and s.read_payload(rec) == b"block bytes " * 20
        rep = s.fsck()
        assert rep.damaged == [] and rep.already_damaged == []
    assert _fsck_exit(root) == 0


def test_unverified_damage_is_found_by_is_damaged_with_verify(root: Path) -> None:
    with Store.open(StoreConfig(root)) as s:
        rec = s.put("t", "block", "b", payload=b"x" * 50)
        payload_files(root)[0].write_bytes(b"y" * 50)
        assert not s.is_damaged(rec) and s.is_damaged(rec, verify=True)


def test_truncated_log_with_the_catalog_ahead_names_what_was_lost(root: Path) -> None:
    with Store.open(StoreConfig(root)) as s:
        for i in range(4):
            s.put("t", "doc", f"d{i}", text=f"document {i}")
    seg = segments(root)[-1]
    with open(seg, "r+b") as f:
        f.truncate(seg.stat().st_size - 37)  # the last put's commit frame, and part of its put
    with Store.open(StoreConfig(root)) as s:
        assert s.get("t", "doc", "d3") is None  # gone from the log: it cannot be served
        rep = s.fsck()
        assert rep.lost == ["t/doc/d3"]
    assert _fsck_exit(root) == 1 and _fsck_exit(root) == 1
    kept = sorted(p.name for p in (root / "lost").iterdir() if p.name.startswith("catalog-"))
    assert kept and kept[0].endswith(".sqlite")  # the evidence itself is kept
    old = sqlite3.connect(root / "lost" / kept[0])
    assert ("t", "doc", "d3") in old.execute("SELECT tenant, kind, key FROM rows").fetchall()
    old.close()
    assert _fsck_exit(root, "--repair") == 0
    assert _fsck_exit(root) == 0
    assert [p.suffix for p in (root / "lost" / "acknowledged").iterdir()] == [".json"]


def test_fsck_report_carries_catalog_ok_already_damaged_and_lost(root: Path) -> None:
    with Store.open(StoreConfig(root)) as s:
        s.put("t", "doc", "d", text="harbor")
        fields = s.fsck().to_json()
        assert {"catalog_ok", "already_damaged", "lost", "damaged"} <= set(fields)
    con = sqlite3.connect(root / "catalog.sqlite")
    con.execute("UPDATE rows SET text = 'forged' WHERE key = 'd'")
    con.commit()
    con.close()
    with Store.open(StoreConfig(root, read_only=True)) as r:
        assert r.fsck().catalog_ok is False
    assert _fsck_exit(root) == 1


def test_read_only_fsck_after_a_killed_writer_does_not_call_a_lagging_catalog_damage(root: Path) -> None:
    """A writer killed between its log append and its catalog update leaves the catalog behind
    the log: derived data the next writer rebuilds, not damage. A catalog that is not a database
    at all is damage."""
    with Store.open(StoreConfig(root)) as s:
        s.put("t", "doc", "d", text="harbor")
        s.put("t", "doc", "e", text="seal")
    con = sqlite3.connect(root / "catalog.sqlite")
    con.execute("UPDATE catalog_meta SET v = '2' WHERE k = 'lsn'")
    con.execute("DELETE FROM rows WHERE key = 'e'")
    con.commit()
    con.close()
    with Store.open(StoreConfig(root, read_only=True)) as r:
        rep = r.fsck()
        assert rep.catalog_ok and not rep.catalog_checked
    assert _fsck_exit(root) == 0
    for suffix in ("-wal", "-shm"):
        (root / f"catalog.sqlite{suffix}").unlink(missing_ok=True)
    (root / "catalog.sqlite").write_bytes(b"not a database " * 300)
    with Store.open(StoreConfig(root, read_only=True)) as r:
        assert r.fsck().catalog_ok is False
    assert _fsck_exit(root) == 1


def test_a_read_only_fsck_of_a_truncated_tail_names_what_is_lost(root: Path) -> None:
    """Issue 31: read-only fsck said `catalog_ok: false` with `lost: []`; it now names the record
    the log lost, as a writer's open does, and writes nothing (the writer still keeps the evidence)."""
    with Store.open(StoreConfig(root)) as s:
        for i in range(4):
            s.put("t", "doc", f"d{i}", text=f"document {i}")
    seg = segments(root)[-1]
    with open(seg, "r+b") as f:
        f.truncate(seg.stat().st_size - 37)
    with Store.open(StoreConfig(root, read_only=True)) as s:
        rep = s.fsck()
        assert rep.lost == ["t/doc/d3"] and rep.catalog_ok is False
    assert not (root / "lost").exists()  # read-only: nothing written
    with Store.open(StoreConfig(root)) as s:
        assert s.fsck().lost == ["t/doc/d3"]
