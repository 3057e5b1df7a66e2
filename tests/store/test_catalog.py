"""The SQLite catalog: derived, rebuilt when missing, damaged or behind; FTS5 search."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from tests.store.helpers import memory_store, open_store


def _catalog_files(root: Path) -> list[Path]:
    return [p for p in root.iterdir() if p.name.startswith("catalog.sqlite")]


def _seed(root: Path) -> None:
    with open_store(root) as s:
        s.put("t", "doc", "fox", text="The quick brown fox jumps over the lazy dog")
        s.put("t", "doc", "cat", text="A cat sleeps in the warm afternoon sun")
        s.put("t", "doc", "old", text="an old fox story", state="superseded")


def test_search_ranks_matching_rows(root: Path) -> None:
    _seed(root)
    with open_store(root) as s:
        hits = s.search_text("t", "brown fox")
        assert [r.key for r, _ in hits] == ["fox"]  # superseded rows are not returned
        assert s.search_text("t", "sun cat", kind="doc")[0][0].key == "cat"
        assert s.search_text("t", "fox", kind="block") == []
        s.put("t", "doc", "fox2", text="fox fox fox fox")
        hits = s.search_text("t", "fox")
        assert [r.key for r, _ in hits] == ["fox2", "fox"]
        assert hits[0][1] > hits[1][1]  # higher score = better
        assert len(s.search_text("t", "fox", limit=1)) == 1


def test_deleted_catalog_is_rebuilt_and_search_works(root: Path) -> None:
    _seed(root)
    for p in _catalog_files(root):
        p.unlink()
    with open_store(root) as s:
        assert s.counters["catalog_rebuilds"] == 1
        assert [r.key for r, _ in s.search_text("t", "fox")] == ["fox"]


def test_garbled_catalog_is_rebuilt_and_search_works(root: Path) -> None:
    _seed(root)
    (root / "catalog.sqlite").write_bytes(b"this is not a database" * 500)
    with open_store(root) as s:
        assert s.counters["catalog_rebuilds"] == 1
        assert [r.key for r, _ in s.search_text("t", "afternoon")] == ["cat"]
    with open_store(root) as s:
        assert s.counters["catalog_rebuilds"] == 0


@pytest.mark.parametrize("checkpoint", [False, True])
def test_catalog_behind_the_log_catches_up_or_is_rebuilt(root: Path, tmp_path: Path, checkpoint: bool) -> None:
    """Behind the log but not the checkpoint (a power cut took its last commits): the log after
    its LSN is replayed into it. Behind the checkpoint (the log it needs is gone): rebuilt."""
    _seed(root)
    saved = tmp_path / "old-catalog"
    saved.mkdir()
    for p in _catalog_files(root):
        shutil.copy(p, saved / p.name)
    with open_store(root) as s:
        s.put("t", "doc", "new", text="zebra crossing")
        s.delete("t", "doc", "cat")
        s.set_state("t", "doc", "fox", "superseded")
        if checkpoint:
            s.checkpoint()
    for p in _catalog_files(root):
        p.unlink()
    for p in saved.iterdir():
        shutil.copy(p, root / p.name)
    with open_store(root) as s:
        assert s.counters["catalog_rebuilds"] == (1 if checkpoint else 0)
        assert [r.key for r, _ in s.search_text("t", "zebra")] == ["new"]
        assert s.search_text("t", "afternoon") == [] and s.get("t", "doc", "cat") is None
        assert s.get("t", "doc", "fox").state == "superseded" and len(s._state) == 3
        assert s.fsck().catalog_ok


def test_catalog_damaged_while_open_is_rebuilt_on_next_use(root: Path) -> None:
    _seed(root)
    with open_store(root) as s:
        s._catalog.conn.execute("DROP TABLE rows")  # simulate an index gone bad under us
        s.put("t", "doc", "w", text="walrus")
        assert [r.key for r, _ in s.search_text("t", "walrus")] == ["w"]
        assert s.counters["catalog_rebuilds"] == 1


def test_catalog_follows_the_log_lsn(root: Path) -> None:
    _seed(root)
    with open_store(root) as s:
        lsn = s.last_lsn
    con = sqlite3.connect(root / "catalog.sqlite")
    assert con.execute("SELECT v FROM catalog_meta WHERE k = 'lsn'").fetchone() == (str(lsn),)
    assert con.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    con.close()


HOSTILE = ['"', '""', '"fox', "AND", "fox AND", "OR NOT", "NOT fox", "*", "fox*", "^fox", "NEAR(fox dog)",
           "text:fox", "tag : x", "{tag text}: fox", "'; DROP TABLE rows; --", "(", ")", "fox)", "a\"b",
           "\x00fox", "日本語", "émoji 🦊 fox", "   ", "", "-", "+fox", "fox:", "col:(fox OR dog)",
           "x" * 5000, " ".join(["fox"] * 500)]


@pytest.mark.parametrize("query", HOSTILE)
def test_search_survives_hostile_queries(root: Path, query: str) -> None:
    _seed(root)
    with open_store(root) as s:
        hits = s.search_text("t", query)
        assert isinstance(hits, list)
        if "fox" in query:
            assert "fox" in [r.key for r, _ in hits]
        assert s.search_text("t", query, kind="doc", limit=3) is not None


def test_search_finds_unicode_text() -> None:
    s, _ = memory_store()
    s.put("t", "doc", "jp", text="東京 の 天気")
    s.put("t", "doc", "fr", text="Le café est très bon")
    assert [r.key for r, _ in s.search_text("t", "東京")] == ["jp"]
    assert [r.key for r, _ in s.search_text("t", "café")] == ["fr"]
    assert s.search_text("t", "") == []
    s.close()
