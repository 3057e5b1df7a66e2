"""Payload files: content addressing within a tenant, fail-closed reads."""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path

from grm.store.layout import tenant_dir_name
from tests.store.helpers import open_store, payload_files


def _path(root: Path, tenant: str, digest: str) -> Path:
    return root / "payloads" / tenant_dir_name(tenant) / digest[:2] / digest


def test_payload_file_is_named_by_tenant_and_digest(root: Path) -> None:
    data = bytes(range(256)) * 64
    with open_store(root) as s:
        r = s.put("t", "block", "k", payload=data)
    assert r.payload == hashlib.sha256(data).hexdigest()
    assert _path(root, "t", r.payload).read_bytes() == data


def test_flipped_byte_in_payload_reads_as_none_and_is_counted(root: Path, caplog) -> None:
    with open_store(root) as s:
        r = s.put("t", "block", "k", payload=b"\x01" * 4096)
    p = _path(root, "t", r.payload)
    data = bytearray(p.read_bytes())
    data[1234] ^= 0x01
    p.write_bytes(bytes(data))
    with open_store(root) as s, caplog.at_level(logging.WARNING, logger="grm.store"):
        rec = s.get("t", "block", "k")
        assert s.read_payload(rec) is None
        assert s.read_payload(rec) is None
        assert s.counters["payload_corrupt"] == 2
        assert sum(r.payload in m for m in caplog.messages) == 1  # logged once per digest


def test_truncated_payload_reads_as_none(root: Path) -> None:
    with open_store(root) as s:
        r = s.put("t", "block", "k", payload=b"abc" * 100)
        _path(root, "t", r.payload).write_bytes(b"abc" * 99)
        assert s.read_payload(r) is None
        assert s.counters["payload_corrupt"] == 1


def test_missing_payload_reads_as_none_and_is_counted(root: Path) -> None:
    with open_store(root) as s:
        r = s.put("t", "block", "k", payload=b"abc")
        _path(root, "t", r.payload).unlink()
        assert s.read_payload(r) is None
        assert s.counters["payload_missing"] == 1
        assert s.counters["payload_corrupt"] == 0


def test_record_without_payload_reads_as_none_without_counting(root: Path) -> None:
    with open_store(root) as s:
        assert s.read_payload(s.put("t", "block", "k")) is None
        assert s.counters["payload_missing"] == s.counters["payload_corrupt"] == 0


def test_forged_digest_never_escapes_the_store(root: Path) -> None:
    from dataclasses import replace
    with open_store(root) as s:
        r = s.put("t", "block", "k", payload=b"abc")
        assert s.read_payload(replace(r, payload="../../../etc/passwd")) is None
        assert s.read_payload(replace(r, payload_size=2)) is None


def test_same_bytes_in_one_tenant_are_written_once(root: Path) -> None:
    with open_store(root) as s:
        a = s.put("t", "block", "a", payload=b"same")
        b = s.put("t", "graft", "b", payload=b"same")
        assert a.payload == b.payload
        assert len(payload_files(root)) == 1


def test_same_bytes_in_two_tenants_are_two_files(root: Path) -> None:
    with open_store(root) as s:
        a = s.put("alice", "block", "k", payload=b"same")
        b = s.put("bob", "block", "k", payload=b"same")
        assert a.payload == b.payload
        files = payload_files(root)
        assert len(files) == 2
        assert {f.parent.parent.name for f in files} == {tenant_dir_name("alice"), tenant_dir_name("bob")}
        _path(root, "alice", a.payload).unlink()  # damage to one tenant never reaches the other
        assert s.read_payload(s.get("alice", "block", "k")) is None
        assert s.read_payload(s.get("bob", "block", "k")) == b"same"


def test_reputting_a_damaged_payload_rewrites_it(root: Path) -> None:
    with open_store(root) as s:
        r = s.put("t", "block", "k", payload=b"good bytes")
    _path(root, "t", r.payload).write_bytes(b"bad  bytes")
    with open_store(root) as s:
        s.put("t", "block", "k", payload=b"good bytes")  # first sight in this process: verified
        assert s.read_payload(s.get("t", "block", "k")) == b"good bytes"
        _path(root, "t", r.payload).write_bytes(b"bad  bytes")
        assert s.read_payload(s.get("t", "block", "k")) is None  # the miss ...
        s.put("t", "block", "k", payload=b"good bytes")  # ... and the recompute repairs it
        assert s.read_payload(s.get("t", "block", "k")) == b"good bytes"


def test_payload_accepts_bytearray_and_memoryview(root: Path) -> None:
    with open_store(root) as s:
        a = s.put("t", "block", "a", payload=bytearray(b"xy" * 10))
        b = s.put("t", "block", "b", payload=memoryview(b"xy" * 10))
        assert a.payload == b.payload and a.payload_size == 20
        assert s.read_payload(b) == b"xy" * 10
