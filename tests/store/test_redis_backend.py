"""The Redis shared-store backend against a real redis-server started on a loopback port (tests
skip, with the reason, when redis-server or the redis package is missing)."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from grm.errors import StoreError
from grm.store.layout import tenant_dir_name
from grm.store.redis_backend import RedisConfig, RedisStore

pytest.importorskip("redis", reason="the redis package is not installed (pip install redis==8.1.0)")
if shutil.which("redis-server") is None:
    pytest.skip("redis-server is not installed (apt-get install redis-server)", allow_module_level=True)

REPO = Path(__file__).resolve().parents[2]


_ns = iter(range(10**6))


@pytest.fixture
def cfg(redis_url: str) -> RedisConfig:
    return RedisConfig(redis_url, namespace=f"t{next(_ns)}", lease_ms=600)


def _child(cfg: RedisConfig, body: str) -> subprocess.Popen:
    code = ("from grm.store.redis_backend import RedisConfig, RedisStore\n"
            f"s = RedisStore.open(RedisConfig({cfg.url!r}, namespace={cfg.namespace!r}, lease_ms={cfg.lease_ms}))\n"
            + body)
    return subprocess.Popen([sys.executable, "-c", code], cwd=REPO, stdout=subprocess.PIPE, text=True)


def test_a_record_written_by_one_process_is_served_to_another(cfg: RedisConfig) -> None:
    out = _child(cfg, "s.put('alice', 'block', 'k', payload=b'shared bytes', text='hello there')\n"
                      "s.close(); print('ok')").communicate(timeout=60)[0]
    assert out.strip() == "ok"
    with RedisStore.open(cfg) as s:
        rec = s.get("alice", "block", "k")
        assert rec.text == "hello there" and rec.lsn == 1
        assert s.read_payload(rec) == b"shared bytes"
        assert [r.key for r, _ in s.search_text("alice", "hello")] == ["k"]
        assert s.search_text("bob", "hello") == [] and s.get("bob", "block", "k") is None


def test_second_writer_of_a_tenant_is_refused_while_the_lease_holds(cfg: RedisConfig) -> None:
    """1. writer A holds alice; 2. writer B is refused for alice but may write bob; 3. readers
    are never refused; 4. after A closes (releasing), B can write alice."""
    with RedisStore.open(cfg) as a, RedisStore.open(cfg) as b:
        a.put("alice", "block", "k1")
        time.sleep(cfg.lease_ms / 1000 * 1.5)  # the renewer keeps A's lease past its first expiry
        with pytest.raises(StoreError, match="another GRM process"):
            b.put("alice", "block", "k2")
        b.put("bob", "block", "k1")
        assert b.get("alice", "block", "k1") is not None
        a.close()
        b.put("alice", "block", "k2")
        assert sorted(r.key for r in _records(cfg, "alice")) == ["k1", "k2"]


def _records(cfg: RedisConfig, tenant: str) -> list:
    with RedisStore.open(cfg) as r:
        return list(r.records(tenant))


def test_killed_writer_is_taken_over_after_expiry_with_nothing_lost(cfg: RedisConfig) -> None:
    child = _child(cfg, "import sys, time\n"
                        "for i in range(5):\n"
                        "    s.put('alice', 'block', f'k{i}', payload=bytes([i]) * 10, parent=f'k{i-1}' if i else None)\n"
                        "print('written', flush=True); time.sleep(60)")
    assert child.stdout.readline().strip() == "written"
    child.send_signal(signal.SIGKILL)
    child.wait(10)
    with RedisStore.open(cfg) as s:
        deadline = time.monotonic() + 10
        while True:
            try:
                s.put("alice", "block", "k5", parent="k4")
                break
            except StoreError:
                assert time.monotonic() < deadline, "lease never expired"
                time.sleep(0.1)
        recs = {r.key: r for r in s.records("alice")}
        assert sorted(recs) == [f"k{i}" for i in range(6)]
        assert all(s.read_payload(recs[f"k{i}"]) == bytes([i]) * 10 for i in range(5))
        assert [r.key for r in s.children("alice", "block", "k3")] == ["k4"]
        assert s.last_lsn == 6


def test_transactions_are_atomic_and_lsns_contiguous(cfg: RedisConfig) -> None:
    with RedisStore.open(cfg) as s:
        with s.transaction() as txn:
            txn.put("t", "doc", "a", text="one")
            txn.put("t", "doc", "b", parent="a")
            txn.set_state("t", "doc", "a", "superseded")
        with pytest.raises(RuntimeError):
            with s.transaction() as txn:
                txn.put("t", "doc", "c")
                raise RuntimeError("abort")
        assert s.get("t", "doc", "c") is None
        assert s.delete("t", "doc", "b") and not s.delete("t", "doc", "b")
        assert sorted(r.lsn for r in s.records("t")) == [3] and s.last_lsn == 4
        assert s.get("t", "doc", "a").state == "superseded"


def test_tampered_payload_is_a_miss_and_fsck_marks_it(cfg: RedisConfig) -> None:
    with RedisStore.open(cfg) as s:
        rec = s.put("t", "block", "k", payload=b"genuine")
        s._r.set(s._k("pay", tenant_dir_name("t"), rec.payload), b"forged!")
        assert s.read_payload(rec) is None and s.counters["payload_corrupt"] == 1
        rep = s.fsck(repair=True)
        assert rep.damaged == ["t/block/k"] and s.get("t", "block", "k").state == "damaged"
        assert s.fsck().already_damaged == ["t/block/k"]  # still reported after the repair ...
        assert s.is_damaged(s.get("t", "block", "k"))
        healed = s.put("t", "block", "k", payload=b"genuine")  # ... until a write replaces it
        assert not s.is_damaged(healed, verify=True) and s.fsck().already_damaged == []


def test_lost_lease_fails_the_whole_transaction(cfg: RedisConfig) -> None:
    with RedisStore.open(cfg) as s:
        s.put("t", "doc", "a")
        s._r.set(s._k("lease", "t"), "someone else")  # another process took over
        with pytest.raises(StoreError, match="lost"):
            s.put("t", "doc", "b")
        assert s.get("t", "doc", "b") is None
