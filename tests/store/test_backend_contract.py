"""The store contract (grm.store.backend.StoreBackend), run against every backend: the local
`Store` and `RedisStore`, plain and encrypted (a real redis-server on a loopback port; those cases
skip, with the reason, when redis-server or the redis package is missing).

Expectations:
1. Both backends satisfy StoreBackend; optional abilities are declared, not probed.
2. put/get round-trips every field; a missing row is None; a row without payload reads None.
3. Tenants never meet: rows, children, listings, search and payload bytes stay per tenant, even
   for the same key and the same bytes.
4. records() lists by tenant and kind.
5. A payload whose stored bytes changed by one bit is a miss (None, counted), never served, and
   fsck names it.
6. stats() has the common keys on every backend.
7. A transaction applies all or nothing; what was acknowledged survives close and reopen.
8. A store location names its backend: a folder, or redis://HOST:PORT/NAMESPACE.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from grm.errors import StoreError, UserInputError
from grm.store import Record, RedisStore, Store
from grm.store.backend import MISS_COUNTERS, STATS_KEYS, DurabilityControl, ScatterReads, StoreBackend
from grm.store.kinds import BLOCK, DOCUMENT, GRAFT
from grm.store.layout import tenant_dir_name
from grm.store.opener import is_redis, open_backend, redis_config


@dataclass
class Backend:
    name: str
    open: Callable[[], Any]  # opens (or reopens) the same store
    flip: Callable[[Any, Record], None]  # flips one bit of a record's stored payload bytes
    abilities: tuple[type, ...]  # the optional Protocols this backend has


def _local(tmp_path: Path) -> Backend:
    root = tmp_path / "store"

    def flip(store: Store, rec: Record) -> None:
        path = store.payload_path(rec)
        data = bytearray(path.read_bytes())
        data[len(data) // 2] ^= 0x01
        path.write_bytes(bytes(data))

    return Backend("local", lambda: open_backend(root), flip, (ScatterReads, DurabilityControl))


_namespaces = iter(range(10**6))


def _redis(url: str, master_key: bytes | None = None) -> Backend:
    import redis

    namespace = f"contract{next(_namespaces)}"
    location = f"{url.rsplit('/', 1)[0]}/{namespace}"  # --store redis://HOST:PORT/NS

    def flip(store: RedisStore, rec: Record) -> None:
        key = f"{namespace}:pay:{tenant_dir_name(rec.tenant)}:{rec.payload}"
        client = redis.Redis.from_url(url)
        data = bytearray(client.get(key))
        data[len(data) // 2] ^= 0x01
        client.set(key, bytes(data))
        client.close()

    name = "redis" if master_key is None else "redis-encrypted"
    return Backend(name, lambda: open_backend(location, master_key=master_key), flip, ())


@pytest.fixture(params=["local", "redis", "redis-encrypted"])
def backend(request, tmp_path: Path) -> Backend:
    if request.param == "local":
        return _local(tmp_path)
    return _redis(request.getfixturevalue("redis_url"), bytes(range(32)) if request.param == "redis-encrypted" else None)


@pytest.fixture
def store(backend: Backend):
    s = backend.open()
    yield s
    s.close()


def test_backend_satisfies_the_interface_and_declares_its_abilities(backend: Backend, store) -> None:
    assert isinstance(store, StoreBackend)
    assert isinstance(store, RedisStore if backend.name.startswith("redis") else Store)
    for ability in (ScatterReads, DurabilityControl):
        assert isinstance(store, ability) == (ability in backend.abilities), ability.__name__


def test_put_get_round_trip(store) -> None:
    meta = {"seat": 4, "ids": [1, 2, 3], "name": "ünï"}
    put = store.put("alice", BLOCK, "k1", meta=meta, payload=b"\x00K/V bytes\xff", parent="p0", text="the text")
    got = store.get("alice", BLOCK, "k1")
    assert got is not None and got == put
    assert (got.tenant, got.kind, got.key, got.parent, got.text, got.state) == (
        "alice", BLOCK, "k1", "p0", "the text", "active")
    assert got.meta == meta and got.payload_size == len(b"\x00K/V bytes\xff") and got.lsn > 0
    assert store.read_payload(got) == b"\x00K/V bytes\xff"
    assert store.last_lsn >= got.lsn
    got.meta["seat"] = 99  # callers get a private copy
    assert store.get("alice", BLOCK, "k1").meta["seat"] == 4
    again = store.put("alice", BLOCK, "k1", text="replaced")  # put replaces the row as a whole
    assert again.lsn > got.lsn and store.get("alice", BLOCK, "k1").payload is None
    assert [r.key for r in store.children("alice", BLOCK, "p0")] == []


def test_missing_is_none_not_an_error(store) -> None:
    assert store.get("alice", BLOCK, "nothing") is None
    assert store.children("alice", BLOCK, "nothing") == []
    assert list(store.records("nobody")) == []
    rec = store.put("alice", DOCUMENT, "no-payload", text="only text")
    assert store.read_payload(rec) is None
    assert not store.delete("alice", BLOCK, "nothing")


def test_tenants_never_meet(backend: Backend, store) -> None:
    same = b"the same bytes in two tenants"
    a = store.put("alice", BLOCK, "k", payload=same, parent="root", text="alpine lake")
    b = store.put("bob", BLOCK, "k", payload=same, parent="root", text="desert road")
    assert store.get("alice", BLOCK, "k").text == "alpine lake"
    assert store.get("bob", BLOCK, "k").text == "desert road"
    assert [r.tenant for r in store.records("alice")] == ["alice"]
    assert [r.tenant for r in store.children("bob", BLOCK, "root")] == ["bob"]
    assert [r.key for r, _ in store.search_text("alice", "desert road")] == []
    assert [r.key for r, _ in store.search_text("bob", "desert road")] == ["k"]
    assert store.get("carol", BLOCK, "k") is None
    # Content addressing is within a tenant: damaging alice's copy leaves bob's bytes served.
    backend.flip(store, a)
    assert store.read_payload(a) is None
    assert store.read_payload(b) == same


def test_records_list_by_tenant_and_kind(store) -> None:
    for kind, key in ((BLOCK, "b1"), (BLOCK, "b2"), (GRAFT, "g1"), (DOCUMENT, "d1")):
        store.put("alice", kind, key, payload=key.encode())
    store.put("bob", BLOCK, "b9")
    assert sorted(r.key for r in store.records("alice", BLOCK)) == ["b1", "b2"]
    assert [r.key for r in store.records("alice", GRAFT)] == ["g1"]
    assert sorted(r.key for r in store.records("alice")) == ["b1", "b2", "d1", "g1"]
    assert sorted((r.tenant, r.key) for r in store.records(kind=BLOCK)) == [
        ("alice", "b1"), ("alice", "b2"), ("bob", "b9")]
    assert len(list(store.records())) == 5


def test_flipped_payload_bit_is_a_counted_miss_never_served(backend: Backend, store) -> None:
    rec = store.put("alice", BLOCK, "k", payload=bytes(range(256)) * 4)
    good = store.put("alice", BLOCK, "other", payload=b"untouched")
    before = sum(store.stats()["counters"][c] for c in MISS_COUNTERS)
    backend.flip(store, rec)
    assert store.read_payload(rec) is None
    assert sum(store.stats()["counters"][c] for c in MISS_COUNTERS) == before + 1
    assert store.read_payload(good) == b"untouched"
    report = store.fsck()
    assert report.damaged == [rec.ident]


def test_stats_shape(store) -> None:
    store.put("alice", BLOCK, "k", payload=b"x")
    store.put("bob", GRAFT, "g")
    st = store.stats()
    assert set(STATS_KEYS) <= set(st)
    assert isinstance(st["backend"], str) and st["records"] == 2 and st["last_lsn"] == store.last_lsn
    assert all(isinstance(st["counters"][c], int) for c in MISS_COUNTERS)


def test_transaction_is_all_or_nothing_and_acknowledged_records_survive_reopen(backend: Backend) -> None:
    s = backend.open()
    with s.transaction() as txn:
        txn.put("alice", BLOCK, "a", payload=b"first", text="one")
        txn.put("alice", BLOCK, "b", parent="a", payload=b"second")
        txn.set_state("alice", BLOCK, "a", "superseded")
    with pytest.raises(RuntimeError), s.transaction() as txn:
        txn.put("alice", BLOCK, "c", payload=b"never")
        raise RuntimeError("abort inside the transaction")
    assert s.get("alice", BLOCK, "c") is None
    s.put("bob", DOCUMENT, "d", payload=b"doc bytes")
    assert s.delete("alice", BLOCK, "b")
    lsn = s.last_lsn
    s.close()
    with pytest.raises(StoreError):
        s.get("alice", BLOCK, "a")
    with backend.open() as again:
        assert again.last_lsn == lsn
        a = again.get("alice", BLOCK, "a")
        assert a.state == "superseded" and again.read_payload(a) == b"first"
        assert again.get("alice", BLOCK, "b") is None and again.get("alice", BLOCK, "c") is None
        assert again.read_payload(again.get("bob", DOCUMENT, "d")) == b"doc bytes"


def test_a_location_names_its_backend() -> None:
    assert is_redis("redis://127.0.0.1:6379/team") and is_redis("rediss://h/x")
    assert not is_redis("/var/grm") and not is_redis(Path("redis:/x")) and not is_redis("redis-folder")
    cfg = redis_config("redis://user:pw@10.0.0.5:7000/team-a")
    assert (cfg.url, cfg.namespace) == ("redis://user:pw@10.0.0.5:7000/0", "team-a")
    assert redis_config("redis://h:1").namespace == "grm"
    for bad in ("redis:///ns", "redis://h:1/a/b", "redis://h:1/ns?db=2"):
        with pytest.raises(UserInputError):
            redis_config(bad)


def test_a_master_key_with_a_redis_location_is_used_not_ignored(backend: Backend, store) -> None:
    assert store.stats()["encrypted"] == (backend.name == "redis-encrypted")
