"""Defences, attacked: each attack runs with its defence on (it fails), switched off through
the test-only `Defences` hook (it succeeds - the test can fail), and restored (it fails again).
The byte comparison of stored text against the prompt lives in grm.exact, not here."""

from __future__ import annotations

import base64
import logging

import pytest

from grm.store import Defences, MemoryFS, Store, StoreConfig
from grm.store.record import canonical_json
from tests.store.helpers import rewrite_log

KEY = bytes(range(32))
ROOT = "/mem/store"


@pytest.fixture(autouse=True)
def _quiet():
    logging.disable(logging.WARNING)
    yield
    logging.disable(logging.NOTSET)


def _digest_attack(defences: Defences) -> bytes | None:
    """Overwrite a payload file with other bytes of the same size; what does a read serve?"""
    fs = MemoryFS()
    with Store.open(StoreConfig(ROOT, fs=fs), defences=defences) as s:
        rec = s.put("alice", "block", "k", payload=b"genuine payload")
        fs.raw(str(s.payload_path(rec)))[:] = b"forged! payload"
        return s.read_payload(rec)


def _tenant_attack(defences: Defences) -> str | None:
    """Relabel alice's sealed row as bob's (the frame's tenant rewritten, log checksums made
    valid again); what text does bob's row serve after reopening?"""
    fs = MemoryFS()
    cfg = StoreConfig(ROOT, fs=fs, master_key=KEY)
    with Store.open(cfg, defences=defences) as s:
        s.put("alice", "note", "k", text="alice's secret")
        s.put("bob", "note", "other", text="bob's note")

    def steal(body: dict) -> dict:
        if body.get("op") == "put" and body["tenant"] == "alice":
            body["tenant"] = "bob"
        return body

    rewrite_log(fs, ROOT, steal)
    with Store.open(cfg, defences=defences) as s:
        rec = s.get("bob", "note", "k")  # a sealed row that fails to open is a damaged row, not bob's
        return rec.text if rec is not None else None


def _auth_attack(defences: Defences) -> str | None:
    """Known-plaintext bit flipping: turn the sealed "pay 10" into "pay 99" without the key."""
    fs = MemoryFS()
    cfg = StoreConfig(ROOT, fs=fs, master_key=KEY)
    with Store.open(cfg, defences=defences) as s:
        s.put("alice", "note", "k", text="pay 10")

    # The sealed row is the canonical JSON of the record's private fields.
    at = canonical_json({"key": "k", "meta": {}, "parent": None, "text": "pay 10"}).encode().index(b"pay 10")

    def flip(body: dict) -> dict:
        if body.get("op") == "put":
            raw = bytearray(base64.b64decode(body["sealed"]))
            for i, (a, b) in enumerate(zip(b"pay 10", b"pay 99")):
                raw[13 + at + i] ^= a ^ b  # 1 version byte + 12 nonce bytes, then the ciphertext
            body["sealed"] = base64.b64encode(bytes(raw)).decode()
        return body

    rewrite_log(fs, ROOT, flip)
    with Store.open(cfg, defences=defences) as s:
        rec = s.get("alice", "note", "k")
        return rec.text if rec is not None else None


@pytest.mark.parametrize("attack,switch,won", [
    (_digest_attack, "digest_check", b"forged! payload"),
    (_tenant_attack, "tenant_binding", "alice's secret"),
    (_auth_attack, "authentication", "pay 99"),
], ids=["digest-check", "tenant-binding", "authentication"])
def test_attack_fails_with_the_defence_succeeds_without_it_and_fails_once_restored(attack, switch, won) -> None:
    on = Defences()
    assert attack(on) is None  # 1. defended: a miss (payload) or no text (row marked damaged)
    off = Defences(**{switch: False})
    assert attack(off) == won  # 2. undefended: the attacker's bytes are served
    restored = Defences(**{switch: True})
    assert attack(restored) is None  # 3. restored: defended again


def test_a_text_that_fails_authentication_marks_its_row_damaged_and_counts() -> None:
    fs = MemoryFS()
    cfg = StoreConfig(ROOT, fs=fs, master_key=KEY)
    with Store.open(cfg) as s:
        s.put("alice", "note", "k", text="pay 10", payload=b"p")
    rewrite_log(fs, ROOT, lambda b: {**b, "sealed": b["sealed"][:-4] + "AAAA"} if b.get("op") == "put" else b)
    with Store.open(cfg) as s:
        assert s.get("alice", "note", "k") is None  # its key was sealed too: the row is kept under its kid
        [rec] = s.records("alice")
        assert rec.key.startswith("sealed:") and rec.text is None and rec.state == "damaged"
        assert s.counters["text_unauthenticated"] == 1
        assert s.search_text("alice", "pay") == []
