"""Rows: put/get/children/records/delete/set_state, transactions, and reopening."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from grm.errors import StoreError, UserInputError
from grm.store import Record
from tests.store.helpers import memory_store, open_store


def _fill(s) -> None:
    s.put("t", "block", "a", payload=b"A" * 1000, text="first block", meta={"n": 1, "z": [1, "x"]})
    s.put("t", "block", "b", parent="a", payload=b"B" * 10, text="second block")
    s.put("t", "block", "c", parent="a", meta={"u": "ü"})
    s.put("t", "doc", "d", text="a document", state="superseded")
    s.delete("t", "block", "c")
    s.set_state("t", "block", "b", "superseded")
    s.put("t", "block", "b", parent="a", payload=b"B" * 10, text="second block again")


def test_reopen_returns_the_same_records(root: Path) -> None:
    with open_store(root) as s:
        _fill(s)
        before = sorted(s.records(), key=lambda r: (r.kind, r.key))
        lsn = s.last_lsn
    with open_store(root) as s:
        after = sorted(s.records(), key=lambda r: (r.kind, r.key))
        assert after == before
        assert s.last_lsn == lsn
        assert s.read_payload(s.get("t", "block", "a")) == b"A" * 1000


def test_reopen_returns_the_same_records_on_memoryfs() -> None:
    s, fs = memory_store()
    _fill(s)
    before = sorted(s.records(), key=lambda r: (r.kind, r.key))
    s.close()
    s, _ = memory_store(fs)
    assert sorted(s.records(), key=lambda r: (r.kind, r.key)) == before
    assert [r.key for r, _ in s.search_text("t", "again")] == ["b"]
    s.close()


def test_put_returns_the_record_get_returns(root: Path) -> None:
    with open_store(root) as s:
        r = s.put("t", "block", "k", payload=b"xyz", parent="p", text="t", meta={"a": 1})
        assert isinstance(r, Record)
        assert r.payload == "3608bca1e44ea6c4d268eb6db02260269892c0b42b86bbf1e77a6fa16c3c9282"
        assert r.payload_size == 3 and r.lsn == 1 and r.state == "active"
        assert s.get("t", "block", "k") == r
        assert s.get("t", "block", "nope") is None


def test_children_are_active_rows_of_the_kind_with_that_parent(root: Path) -> None:
    with open_store(root) as s:
        s.put("t", "block", "c1", parent="p")
        s.put("t", "block", "c2", parent="p")
        s.put("t", "block", "c3", parent="p", state="superseded")
        s.put("t", "graft", "g", parent="p")
        s.put("t", "block", "c4", parent="q")
        s.put("t", "block", "c1", parent="q")  # moved to another parent
        assert [r.key for r in s.children("t", "block", "p")] == ["c2"]
        assert sorted(r.key for r in s.children("t", "block", "q")) == ["c1", "c4"]


def test_records_filters_by_tenant_and_kind(root: Path) -> None:
    with open_store(root) as s:
        s.put("t", "block", "1")
        s.put("t", "doc", "2")
        s.put("u", "block", "3")
        assert sorted(r.key for r in s.records()) == ["1", "2", "3"]
        assert [r.key for r in s.records(tenant="t", kind="doc")] == ["2"]
        assert [r.key for r in s.records(kind="block", tenant="u")] == ["3"]


def test_delete_and_set_state(root: Path) -> None:
    with open_store(root) as s:
        s.put("t", "block", "k")
        assert s.delete("t", "block", "k") is True
        assert s.delete("t", "block", "k") is False
        with pytest.raises(StoreError, match="no record"):
            s.set_state("t", "block", "k", "damaged")
        s.put("t", "block", "k")
        s.set_state("t", "block", "k", "superseded")
        assert s.get("t", "block", "k").state == "superseded"
        with pytest.raises(UserInputError):
            s.set_state("t", "block", "k", "gone")


@pytest.mark.parametrize("where", ["catalog", "memory"])
def test_meta_is_a_private_copy(root: Path, where: str) -> None:
    """Whether the rows live in the catalog (read afresh, handed out as read) or in memory (held,
    handed out as copies), no read lets a caller change the store's row."""
    s = open_store(root) if where == "catalog" else memory_store()[0]
    with s:
        meta = {"list": [1, 2]}
        r = s.put("t", "block", "k", meta=meta, parent="p", text="some words")
        meta["list"].append(3)
        r.meta["list"].append(4)
        s.get("t", "block", "k").meta["new"] = 1
        next(iter(s.records("t", "block"))).meta["list"].append(5)
        s.children("t", "block", "p")[0].meta["list"].append(6)
        s.rows_since("t", "block", 0)[0][0].meta["list"].append(7)
        s.search_text("t", "words")[0][0].meta["list"].append(8)
        assert s.get("t", "block", "k").meta == {"list": [1, 2]}


@pytest.mark.parametrize("args", [("bad tenant", "block", "k"), ("t", "kind/x", "k"), ("", "block", "k"),
                                  ("t" * 65, "block", "k"), ("t", "block", ""), ("t", "block", 7)])
def test_bad_names_are_user_errors(root: Path, args: tuple) -> None:
    with open_store(root) as s:
        with pytest.raises(UserInputError):
            s.put(*args)


@pytest.mark.parametrize("kw", [{"meta": {"x": object()}}, {"meta": {"x": float("nan")}}, {"meta": [1]},
                                {"payload": "str"}, {"text": 5}, {"state": "alive"}, {"text": "\ud800"}])
def test_bad_fields_are_user_errors_and_write_nothing(root: Path, kw: dict) -> None:
    with open_store(root) as s:
        with pytest.raises(UserInputError):
            s.put("t", "block", "k", **kw)
        assert s.last_lsn == 0 and s.get("t", "block", "k") is None


def test_transaction_commits_all_at_once(root: Path) -> None:
    with open_store(root) as s:
        s.put("t", "block", "old")
        with s.transaction() as txn:
            a = txn.put("t", "block", "a", payload=b"a")
            b = txn.put("t", "block", "b", parent="a")
            assert txn.delete("t", "block", "old") is True
            assert txn.delete("t", "block", "old") is False  # sees its own delete
            txn.set_state("t", "block", "a", "superseded")  # sees its own put
            assert s.get("t", "block", "a") is None  # not visible before commit
        assert (a.lsn, b.lsn) == (3, 4)
        assert s.get("t", "block", "a").state == "superseded"
        assert s.get("t", "block", "b") == b
        assert s.get("t", "block", "old") is None
        assert s.last_lsn == 7  # 4 mutations + 1 commit after the first put's 2 frames


def test_exception_in_transaction_applies_nothing(root: Path) -> None:
    with open_store(root) as s:
        s.put("t", "block", "keep")
        with pytest.raises(RuntimeError):
            with s.transaction() as txn:
                txn.put("t", "block", "a", payload=b"a")
                txn.delete("t", "block", "keep")
                raise RuntimeError("boom")
        assert s.get("t", "block", "a") is None
        assert s.get("t", "block", "keep") is not None
        assert s.last_lsn == 2
        s.put("t", "block", "after")
    with open_store(root) as s:
        assert sorted(r.key for r in s.records()) == ["after", "keep"]
        assert s.get("t", "block", "after").lsn == 3


def test_nested_write_inside_transaction_is_refused(root: Path) -> None:
    with open_store(root) as s:
        with pytest.raises(StoreError, match="already open"):
            with s.transaction():
                s.put("t", "block", "x")
        assert s.get("t", "block", "x") is None


def test_finished_transaction_refuses_writes(root: Path) -> None:
    with open_store(root) as s:
        with s.transaction() as txn:
            pass
        with pytest.raises(StoreError, match="finished"):
            txn.put("t", "block", "k")


def test_concurrent_writers_get_distinct_lsns(root: Path) -> None:
    with open_store(root, durability="volatile") as s:
        def work(i: int) -> None:
            for j in range(25):
                s.put("t", "block", f"{i}-{j}", payload=f"{i}-{j}".encode())
        threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        rows = list(s.records())
        assert len(rows) == 100
        assert len({r.lsn for r in rows}) == 100
    with open_store(root) as s:
        assert len(list(s.records())) == 100
