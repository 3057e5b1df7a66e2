"""fsck: find damaged payloads, orphans and catalog drift; repair only what is safe."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from grm.store.layout import tenant_dir_name
from tests.store.helpers import open_store


def _payload(root: Path, tenant: str, digest: str) -> Path:
    return root / "payloads" / tenant_dir_name(tenant) / digest[:2] / digest


def test_fsck_of_a_healthy_store_is_clean(root: Path) -> None:
    with open_store(root) as s:
        s.put("t", "block", "a", payload=b"a")
        s.put("t", "block", "b", payload=b"a")
        s.put("t", "doc", "c")
        rep = s.fsck()
    assert (rep.records, rep.damaged, rep.orphans, rep.repaired, rep.catalog_ok) == (3, [], [], [], True)


def test_fsck_finds_orphans_and_damage_and_repair_fixes_them(root: Path) -> None:
    """1. a payload file no row names and a stale temporary are orphans; 2. a row whose payload
    is corrupt or missing is damaged; 3. repair removes the orphans, marks the rows damaged
    through the log (it survives a reopen) and deletes no row and no named file; 4. a second
    fsck is clean, listing the rows as already damaged."""
    with open_store(root) as s:
        good = s.put("t", "block", "good", payload=b"good")
        bad = s.put("t", "block", "bad", payload=b"will rot")
        gone = s.put("u", "block", "gone", payload=b"will vanish")
        with s.transaction() as txn:  # a committed-then-deleted row leaves an orphan file
            txn.put("t", "block", "tmp", payload=b"orphaned")
        s.delete("t", "block", "tmp")
    _payload(root, "t", bad.payload).write_bytes(b"will r0t")
    _payload(root, "u", gone.payload).unlink()
    stray = _payload(root, "t", good.payload).parent / (good.payload + ".tmp.1.abcd")
    stray.write_bytes(b"half")
    with open_store(root) as s:
        rep = s.fsck()
        assert rep.records == 3
        assert sorted(rep.damaged) == ["t/block/bad", "u/block/gone"]
        assert len(rep.orphans) == 2 and any(o.endswith(".tmp.1.abcd") for o in rep.orphans)
        assert rep.repaired == []
        assert stray.exists()  # report only

        rep = s.fsck(repair=True)
        assert sorted(rep.damaged) == ["t/block/bad", "u/block/gone"]
        assert sum(line.startswith("removed orphan") for line in rep.repaired) == 2
        assert sum(line.startswith("marked damaged") for line in rep.repaired) == 2
        assert not stray.exists()
        assert _payload(root, "t", bad.payload).exists()  # named by a row: never deleted
        assert s.read_payload(s.get("t", "block", "good")) == b"good"
    with open_store(root) as s:
        assert s.get("t", "block", "bad").state == "damaged"
        assert s.get("u", "block", "gone").state == "damaged"
        assert s.get("t", "block", "good").state == "active"
        rep = s.fsck()
        assert (rep.damaged, rep.orphans) == ([], [])
        assert sorted(rep.already_damaged) == ["t/block/bad", "u/block/gone"]


def test_fsck_detects_and_repairs_catalog_drift(root: Path) -> None:
    with open_store(root) as s:
        s.put("t", "doc", "a", text="apples")
    con = sqlite3.connect(root / "catalog.sqlite")
    con.execute("UPDATE rows SET state = 'superseded'")  # LSN still matches: open trusts it
    con.commit()
    con.close()
    with open_store(root) as s:
        assert s.search_text("t", "apples") == []
        rep = s.fsck()
        assert rep.catalog_ok is False and rep.repaired == []
        rep = s.fsck(repair=True)
        assert rep.repaired == ["rebuilt catalog"]
        assert [r.key for r, _ in s.search_text("t", "apples")] == ["a"]
        assert s.fsck().catalog_ok is True


def test_a_payload_put_again_after_repair_removed_its_orphan_file_is_written_again(root: Path) -> None:
    """The same open store: an orphan file fsck --repair removes must not stay trusted by name, so
    putting the same bytes again writes the file again (else the new row names a missing file)."""
    with open_store(root) as s:
        with s.transaction() as txn:
            txn.put("t", "block", "tmp", payload=b"same bytes")
        s.delete("t", "block", "tmp")
        assert len(s.fsck(repair=True).orphans) == 1
        rec = s.put("t", "block", "again", payload=b"same bytes")
        assert s.read_payload(rec) == b"same bytes"
        assert s.fsck().damaged == []
