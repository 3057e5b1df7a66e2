"""Invariant 7: no API returns another tenant's rows."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.store.helpers import open_store

MODES = pytest.mark.parametrize("kw", [{}, {"master_key": bytes(range(32))}, {"compress": True}],
                                ids=["plain", "encrypted", "compressed"])


@MODES
def test_tenants_never_meet(root: Path, kw: dict) -> None:
    """1. same (kind, key) in two tenants are two rows; 2. get/children/records/search_text
    with tenant A never return tenant B's rows; 3. deleting in A leaves B alone."""
    with open_store(root, **kw) as s:
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


@MODES
def test_tenants_with_similar_names_stay_apart(root: Path, kw: dict) -> None:
    """Names that tokenize alike (a.b vs a-b) must not share search results."""
    with open_store(root, **kw) as s:
        s.put("a.b", "doc", "1", text="needle")
        s.put("a-b", "doc", "2", text="needle")
        s.put("A.B", "doc", "3", text="needle")
        assert [r.key for r, _ in s.search_text("a.b", "needle")] == ["1"]
        assert [r.key for r, _ in s.search_text("a-b", "needle")] == ["2"]
        assert [r.key for r, _ in s.search_text("A.B", "needle")] == ["3"]


@MODES
def test_tenants_never_meet_across_reopen_payloads_stats_and_fsck(root: Path, kw: dict) -> None:
    """1. payload reads, children and records stay per tenant after a reopen; 2. a record of one
    tenant read through another tenant's name is no row; 3. the same bytes are two files;
    4. fsck sees both tenants' files as referenced (no orphans)."""
    with open_store(root, **kw) as s:
        a = s.put("alice", "block", "k", payload=b"same bytes", text="alpha")
        b = s.put("bob", "block", "k", payload=b"same bytes", text="beta")
        assert s.payload_path(a) != s.payload_path(b)
    with open_store(root, **kw) as s:
        ra, rb = s.get("alice", "block", "k"), s.get("bob", "block", "k")
        assert (ra.tenant, ra.text, rb.tenant, rb.text) == ("alice", "alpha", "bob", "beta")
        assert s.read_payload(ra) == s.read_payload(rb) == b"same bytes"
        assert [r.tenant for r in s.records("bob")] == ["bob"]
        assert s.get("carol", "block", "k") is None and list(s.records("carol")) == []
        assert s.search_text("carol", "alpha beta") == []
        assert [r.tenant for r, _ in s.search_text("bob", "alpha beta")] == ["bob"]
        rep = s.fsck()
        assert rep.orphans == [] and rep.damaged == []
