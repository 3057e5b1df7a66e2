"""Encryption at rest: AES-256-GCM with per-tenant HKDF keys; payloads and stored text sealed;
names keyed; wrong, missing or unexpected keys are clear errors; moved files are misses."""

from __future__ import annotations

from pathlib import Path

import pytest

from grm.errors import StoreError, UserInputError
from grm.store import Store, StoreConfig, load_master_key
from grm.store.envelope import HEAD_SIZE
from grm.store.layout import tenant_dir_name

KEY = bytes(range(32))
SECRET = b"the launch code is 0000 " * 20


def _open(root: Path, key: bytes | None = KEY, **kw) -> Store:
    return Store.open(StoreConfig(root, master_key=key, **kw))


def _all_bytes(root: Path) -> bytes:
    return b"".join(p.read_bytes() for p in root.rglob("*") if p.is_file())


def test_encrypted_store_round_trips_and_leaves_no_plaintext_on_disk(root: Path) -> None:
    """1. payload and text come back after reopen; 2. neither appears on disk (log,
    checkpoint, payload files); 3. no catalog file is written; 4. search still works."""
    with _open(root, checkpoint_every=4) as s:
        s.put("alice", "doc", "d1", payload=SECRET, text="zebra crossing memo")
        s.put("alice", "doc", "d2", payload=b"more", text="second zebra")
        s.put("alice", "doc", "d3", text="third note")  # crosses a checkpoint
    with _open(root) as s:
        rec = s.get("alice", "doc", "d1")
        assert rec.text == "zebra crossing memo" and s.read_payload(rec) == SECRET
        assert sorted(r.key for r, _ in s.search_text("alice", "zebra")) == ["d1", "d2"]
        assert s.stats()["encrypted"] is True
    disk = _all_bytes(root)
    assert b"launch code" not in disk and b"zebra" not in disk and b"third note" not in disk
    assert not (root / "catalog.sqlite").exists()
    assert list((root / "checkpoints").iterdir())


def test_wrong_key_is_a_clear_error_not_garbage(root: Path) -> None:
    _open(root).close()
    with pytest.raises(StoreError, match="wrong master key"):
        _open(root, key=bytes(32))


def test_encrypted_store_without_key_is_a_clear_error(root: Path) -> None:
    _open(root).close()
    with pytest.raises(StoreError, match="is encrypted"):
        _open(root, key=None)


def test_plain_store_opened_with_a_key_is_refused(root: Path) -> None:
    _open(root, key=None).close()
    with pytest.raises(StoreError, match="without encryption"):
        _open(root)


def test_marker_holds_a_verifier_not_the_key(root: Path) -> None:
    _open(root).close()
    marker = (root / "GRM-STORE").read_bytes()
    assert KEY.hex().encode() not in marker and KEY not in marker and b'"version":2' in marker


def test_nonces_are_fresh_for_every_write(root: Path) -> None:
    """Same bytes in two records: different file names and different nonces; the same text
    twice: different sealed strings."""
    with _open(root) as s:
        a = s.put("alice", "doc", "a", payload=SECRET, text="same")
        b = s.put("alice", "doc", "b", payload=SECRET, text="same")
        pa, pb = s.payload_path(a).read_bytes(), s.payload_path(b).read_bytes()
    assert a.payload != b.payload
    assert pa[12:HEAD_SIZE] != pb[12:HEAD_SIZE]
    assert pa[HEAD_SIZE:] != pb[HEAD_SIZE:]
    log = _all_bytes(root / "log")
    assert log.count(b'"sealed"') == 2 and b'"etext"' not in log


def test_payload_moved_to_another_tenant_or_record_fails_to_authenticate(root: Path) -> None:
    with _open(root) as s:
        a = s.put("alice", "doc", "k", payload=SECRET)
        b = s.put("bob", "doc", "k", payload=b"bob's own bytes")
        c = s.put("alice", "doc", "other", payload=b"alice's other bytes")
        s.payload_path(b).write_bytes(s.payload_path(a).read_bytes())
        s.payload_path(c).write_bytes(s.payload_path(a).read_bytes())
        assert s.read_payload(b) is None and s.read_payload(c) is None
        assert s.read_payload(a) == SECRET
        assert s.counters["payload_corrupt"] == 2


def test_compression_shrinks_files_and_round_trips(root: Path) -> None:
    data = b"abc" * 10_000
    for key in (None, KEY):
        r = root / ("enc" if key else "plain")
        with _open(r, key=key, compress=True) as s:
            rec = s.put("t", "block", "k", payload=data)
            assert s.payload_path(rec).stat().st_size < len(data) // 10
        with _open(r, key=key, compress=True) as s:
            assert s.read_payload(s.get("t", "block", "k")) == data


def test_turning_compression_on_keeps_old_plain_files_readable(root: Path) -> None:
    with _open(root, key=None) as s:
        s.put("t", "block", "k", payload=b"old plain bytes")
    with _open(root, key=None, compress=True) as s:
        assert s.read_payload(s.get("t", "block", "k")) == b"old plain bytes"


def test_load_master_key_reads_raw_and_hex_files_and_the_environment(tmp_path: Path) -> None:
    raw, hexf = tmp_path / "raw", tmp_path / "hex"
    raw.write_bytes(KEY)
    hexf.write_text(KEY.hex() + "\n")
    assert load_master_key(raw, None) == KEY
    assert load_master_key(hexf, "ff" * 32) == KEY  # the file wins
    assert load_master_key(None, KEY.hex()) == KEY
    assert load_master_key(None, None) is None and load_master_key(None, "  ") is None


@pytest.mark.parametrize("content", [b"short", b"\x01" * 31, b"zz" * 32, b"ab" * 33])
def test_bad_key_file_is_a_user_error_naming_it(tmp_path: Path, content: bytes) -> None:
    f = tmp_path / "key"
    f.write_bytes(content)
    with pytest.raises(UserInputError, match=str(f)):
        load_master_key(f, None)
    with pytest.raises(UserInputError, match="cannot read key file"):
        load_master_key(tmp_path / "missing", None)
    with pytest.raises(UserInputError, match="GRM_MASTER_KEY"):
        load_master_key(None, "abc")


def test_config_refuses_a_master_key_of_the_wrong_length(root: Path) -> None:
    with pytest.raises(UserInputError, match="32 bytes"):
        StoreConfig(root, master_key=b"x" * 16)
    assert "master_key" not in repr(StoreConfig(root, master_key=KEY))


def test_tenant_folders_are_hashed_in_encrypted_stores_too(root: Path) -> None:
    with _open(root) as s:
        rec = s.put("alice", "doc", "k", payload=b"x")
        assert s.payload_path(rec).parts[-3] == tenant_dir_name("alice")


def test_plain_payload_that_starts_like_an_envelope_round_trips(root: Path) -> None:
    from grm.store.envelope import MAGIC

    data = MAGIC + b"\x00" * 40 + b"user bytes"
    for compress in (False, True):
        with _open(root / str(compress), key=None, compress=compress) as s:
            assert s.read_payload(s.put("t", "block", "k", payload=data)) == data
