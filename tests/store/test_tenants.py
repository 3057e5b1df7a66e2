"""Invariant 7: no API returns another tenant's rows."""

from __future__ import annotations

from pathlib import Path

from tests.store.helpers import open_store


def test_tenants_never_meet(root: Path) -> None:
    """1. same (kind, key) in two tenants are two rows; 2. get/children/records/search_text
    with tenant A never return tenant B's rows; 3. deleting in A leaves B alone."""
    with open_store(root) as s:
        for t in ("alice", "bob"):
            s.put(t, "block", "root", text=f"shared words {t}", payload=t.encode())
            s.put(t, "block", "child", parent="root", text=f"shared words child {t}")
        s.put("bob", "block", "only-bob", parent="root", text="shared words secret")
        assert s.get("alice", "block", "root").text == "shared words alice"
        assert s.get("alice", "block", "only-bob") is None
        assert [r.key for r in s.children("alice", "block", "root")] == ["child"]
        assert sorted(r.key for r in s.children("bob", "block", "root")) == ["child", "only-bob"]
        assert {r.tenant for r in s.records(tenant="alice")} == {"alice"}
        hits = s.search_text("alice", "shared secret words")
        assert hits and {r.tenant for r, _ in hits} == {"alice"}
        assert s.search_text("alice", "secret") == []
        assert s.delete("alice", "block", "root")
        assert s.get("bob", "block", "root") is not None
        stats = s.stats()["tenants"]
        assert stats["alice"]["block"]["records"] == 1 and stats["bob"]["block"]["records"] == 3


def test_tenants_with_similar_names_stay_apart(root: Path) -> None:
    """Names that tokenize alike (a.b vs a-b) must not share search results."""
    with open_store(root) as s:
        s.put("a.b", "doc", "1", text="needle")
        s.put("a-b", "doc", "2", text="needle")
        s.put("A.B", "doc", "3", text="needle")
        assert [r.key for r, _ in s.search_text("a.b", "needle")] == ["1"]
        assert [r.key for r, _ in s.search_text("a-b", "needle")] == ["2"]
        assert [r.key for r, _ in s.search_text("A.B", "needle")] == ["3"]
