"""RedisStore: the shared-store backend - several GRM processes, on one or more machines, share
one memory through a Redis server. Same public interface as `Store` for what the rest of GRM
uses (put / transaction / delete / set_state / get / children / records / read_payload /
search_text / stats / fsck / checkpoint / close); local files stay the embedded default.

Lifecycle: `RedisStore.open(RedisConfig(url, namespace))` connects (no lock: readers are
concurrent). The first write to a tenant takes that tenant's lease (one writer per tenant at a
time): `SET lease NX PX ttl` with a random token; a thread renews held leases every ttl/3; a
second process writing the same tenant gets a StoreError naming when the lease expires. A
writer that dies stops renewing; after the expiry another process takes the lease, and nothing
committed is lost (every commit is one atomic server-side script). `close()` releases leases.

Keys (namespace N; tenant folder th = sha256(tenant)[:16]):
    N:lsn                       INCR counter: LSNs, one per mutation, assigned at commit
    N:log                       stream: one entry per committed transaction (first LSN, ops JSON)
    N:rows:<tenant>             hash: kind "\\0" key -> row JSON {tenant, kind, key, parent, meta,
                                payload, size, text, state, lsn}
    N:kids:<tenant>:<kind>:<parent>  set of child keys
    N:pay:<th>:<sha256 hex>     payload bytes (content-addressed within a tenant; verified on read)
    N:lease:<tenant>            the writer's token, with expiry
Commit = one Lua script: check every tenant lease still holds our token, INCRBY the LSN, write
rows (the LSN substituted into each row), update child sets, XADD the log entry. A lost lease
fails the whole transaction (StoreError), never half of it. Durability is the Redis server's
(appendonly / appendfsync): RedisConfig does not take a durability mode. Not yet: encryption at
rest. search_text ranks by BM25 in the client (grm.store.redis_search), as FTS5 does locally.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from grm.errors import StoreError, UserInputError
from grm.store.fsck import FsckReport
from grm.store.layout import tenant_dir_name
from grm.store.redis_search import bm25, tenant_kinds
from grm.store.record import (Record, canonical_json, check_key, check_name, check_state, check_text,
                              exported, normalize_meta)

_COMMIT = """
local n = tonumber(ARGV[2])
for i = 1, n do
  if redis.call('GET', KEYS[2 + i]) ~= ARGV[1] then return redis.error_reply('GRM_LEASE_LOST') end
end
local ops = cjson.decode(ARGV[3])
local first = redis.call('INCRBY', KEYS[1], #ops) - #ops + 1
for i, op in ipairs(ops) do
  local lsn = first + i - 1
  if op.v then
    local row = string.gsub(op.v, '"@LSN@"', tostring(lsn))
    redis.call('HSET', op.h, op.f, row)
  else
    redis.call('HDEL', op.h, op.f)
  end
  if op.add then redis.call('SADD', op.add[1], op.add[2]) end
  if op.rem then redis.call('SREM', op.rem[1], op.rem[2]) end
end
redis.call('XADD', KEYS[2], '*', 'first', first, 'ops', ARGV[3])
return first
"""
_RENEW = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end return 0"
_RELEASE = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0"


# Client calls that only read: retried on a lost connection (bounded, short backoff). Writes and
# the commit script are not retried here (a commit that may have run must not run twice).
_IDEMPOTENT = frozenset({"get", "mget", "hget", "hmget", "hvals", "hgetall", "smembers", "pttl", "ping",
                         "exists", "scan_iter"})
_RETRIES = 4  # after the first try; backoff 50, 100, 200, 400 ms: a restarting server has ~0.75 s


class _Guarded:
    """The redis client as RedisStore uses it: a lost connection or a timeout is a StoreError
    with one clear line (never a raw redis.ConnectionError), idempotent reads are retried."""

    def __init__(self, client, url: str) -> None:
        import redis

        self._client = client
        self._url = url
        self._transient = (redis.ConnectionError, redis.TimeoutError)

    def _call(self, name: str, fn, *args, **kw):
        tries = 1 + (_RETRIES if name in _IDEMPOTENT else 0)
        for attempt in range(tries):
            try:
                out = fn(*args, **kw)
                return list(out) if name == "scan_iter" else out
            except self._transient as e:
                if attempt == tries - 1:
                    what = "read" if name in _IDEMPOTENT else "write"
                    raise StoreError(f"lost the connection to Redis at {self._url} ({what} {name}, "
                                     f"{attempt + 1} tries): {e}") from None
                time.sleep(0.05 * 2 ** attempt)
        raise AssertionError("unreachable")

    def register_script(self, source: str):
        script = self._client.register_script(source)
        return lambda **kw: self._call("script", script, **kw)

    def close(self) -> None:
        self._client.close()

    def __getattr__(self, name: str):
        fn = getattr(self._client, name)
        return (lambda *a, **kw: self._call(name, fn, *a, **kw)) if callable(fn) else fn


@dataclass(frozen=True)
class RedisConfig:
    url: str  # redis://host:port/db
    namespace: str = "grm"  # key prefix: several stores can share one server
    lease_ms: int = 5000  # a writer's lease on a tenant; renewed every lease_ms / 3

    def __post_init__(self) -> None:
        if not isinstance(self.url, str) or not self.url.startswith(("redis://", "rediss://", "unix://")):
            raise UserInputError(f"bad Redis URL {self.url!r}")
        check_name("namespace", self.namespace)
        if not isinstance(self.lease_ms, int) or self.lease_ms < 100:
            raise UserInputError(f"lease_ms must be an integer >= 100, got {self.lease_ms!r}")


class RedisTxn:
    """Mutations collected until `RedisStore.transaction()` exits; LSNs are assigned at commit,
    so records returned inside a transaction carry lsn 0 (read them back after it for LSNs)."""

    def __init__(self, store: RedisStore) -> None:
        self._s = store
        self.ops: list[dict] = []
        self.tenants: set[str] = set()
        self.overlay: dict[tuple[str, str, str], Record | None] = {}
        self.finished = False

    def _current(self, ident: tuple[str, str, str]) -> Record | None:
        return self.overlay[ident] if ident in self.overlay else self._s.get(*ident)

    def _row(self, ident, rec: Record | None, old: Record | None) -> None:
        s, (tenant, kind, key) = self._s, ident
        op: dict = {"h": s._k("rows", tenant), "f": f"{kind}\0{key}", "v": False}
        if rec is not None:
            doc = dict(zip(("tenant", "kind", "key", "parent", "meta", "payload", "size", "text", "state"),
                           rec.to_list()[:9]))
            op["v"] = canonical_json({**doc, "lsn": "@LSN@"})  # the script puts the LSN in place of "@LSN@"
            if rec.parent is not None:
                op["add"] = [s._k("kids", tenant, kind, rec.parent), key]
        if old is not None and old.parent is not None and (rec is None or rec.parent != old.parent):
            op["rem"] = [s._k("kids", tenant, kind, old.parent), key]
        self.ops.append(op)
        self.tenants.add(tenant)
        self.overlay[ident] = rec

    def put(self, tenant: str, kind: str, key: str, *, meta: dict | None = None, payload=None,
            parent: str | None = None, text: str | None = None, state: str = "active") -> Record:
        ident = (check_name("tenant", tenant), check_name("kind", kind), check_key("key", key))
        parent, text, state = check_key("parent", parent, optional=True), check_text(text), check_state(state)
        meta = normalize_meta(meta)
        digest, size = None, 0
        if payload is not None:
            digest, size = self._s._write_payload(tenant, bytes(payload))
        rec = Record(tenant, kind, key, parent, meta, digest, size, text, state, 0)
        self._row(ident, rec, self._current(ident))
        return exported(rec)

    def delete(self, tenant: str, kind: str, key: str) -> bool:
        ident = (check_name("tenant", tenant), check_name("kind", kind), check_key("key", key))
        old = self._current(ident)
        if old is None:
            return False
        self._row(ident, None, old)
        return True

    def set_state(self, tenant: str, kind: str, key: str, state: str) -> None:
        ident = (check_name("tenant", tenant), check_name("kind", kind), check_key("key", key))
        cur = self._current(ident)
        if cur is None:
            raise StoreError(f"no record {tenant}/{kind}/{key} to set to {state!r}")
        self._row(ident, Record(*cur.to_list()[:8], check_state(state), 0), cur)


class RedisStore:
    def __init__(self, config: RedisConfig, client) -> None:
        self.config = config
        self._r = client
        self._token = os.urandom(16).hex()
        self._held: set[str] = set()
        self._lost: set[str] = set()
        self._mutex = threading.RLock()
        self._closed = False
        self._stop = threading.Event()
        self._commit = client.register_script(_COMMIT)
        self._renew = client.register_script(_RENEW)
        self._release = client.register_script(_RELEASE)
        self.counters = {"payload_corrupt": 0, "payload_missing": 0}
        self._renewer = threading.Thread(target=self._renew_loop, name="grm-redis-lease", daemon=True)
        self._renewer.start()

    @classmethod
    def open(cls, config: RedisConfig) -> RedisStore:
        try:
            import redis
        except ImportError:
            raise StoreError("the Redis backend needs the redis package: pip install redis==8.1.0") from None
        try:
            client = redis.Redis.from_url(config.url)
            client.ping()
        except redis.RedisError as e:
            raise StoreError(f"cannot reach Redis at {config.url}: {e}") from e
        return cls(config, _Guarded(client, config.url))

    def _k(self, *parts: str) -> str:
        return ":".join((self.config.namespace, *parts))

    # ---- leases ------------------------------------------------------------------------------

    def _lease(self, tenant: str) -> None:
        if tenant in self._lost:
            raise StoreError(f"lost the write lease on tenant {tenant!r}; reopen the store")
        if tenant in self._held:
            return
        key = self._k("lease", tenant)
        if not self._r.set(key, self._token, nx=True, px=self.config.lease_ms):
            ttl = self._r.pttl(key)
            raise StoreError(f"tenant {tenant!r} is being written by another GRM process "
                             f"(its lease expires in {max(ttl, 0)} ms unless renewed)")
        self._held.add(tenant)

    def _renew_loop(self) -> None:
        while not self._stop.wait(self.config.lease_ms / 3000.0):
            with self._mutex:
                for tenant in list(self._held):
                    with contextlib.suppress(Exception):
                        if not self._renew(keys=[self._k("lease", tenant)], args=[self._token, self.config.lease_ms]):
                            self._held.discard(tenant)
                            self._lost.add(tenant)

    # ---- writes ------------------------------------------------------------------------------

    def _write_payload(self, tenant: str, data: bytes) -> tuple[str, int]:
        digest = hashlib.sha256(data).hexdigest()
        self._r.set(self._k("pay", tenant_dir_name(tenant), digest), data)
        return digest, len(data)

    @contextlib.contextmanager
    def transaction(self) -> Iterator[RedisTxn]:
        self._check_open()
        with self._mutex:
            txn = RedisTxn(self)
            try:
                yield txn
                self._commit_txn(txn)
            finally:
                txn.finished = True

    def _commit_txn(self, txn: RedisTxn) -> None:
        if not txn.ops:
            return
        import redis
        tenants = sorted(txn.tenants)
        for t in tenants:
            self._lease(t)
        keys = [self._k("lsn"), self._k("log")] + [self._k("lease", t) for t in tenants]
        try:
            self._commit(keys=keys, args=[self._token, len(tenants), json.dumps(txn.ops)])
        except redis.ResponseError as e:
            if "GRM_LEASE_LOST" in str(e):
                self._lost.update(tenants)
                self._held.difference_update(tenants)
                raise StoreError(f"write lease on {', '.join(tenants)} was lost; nothing was written") from None
            raise StoreError(f"Redis refused the commit: {e}") from e

    def put(self, tenant: str, kind: str, key: str, **kw) -> Record:
        with self.transaction() as txn:
            txn.put(tenant, kind, key, **kw)
        rec = self.get(tenant, kind, key)
        assert rec is not None
        return rec

    def delete(self, tenant: str, kind: str, key: str) -> bool:
        with self.transaction() as txn:
            return txn.delete(tenant, kind, key)

    def set_state(self, tenant: str, kind: str, key: str, state: str) -> None:
        with self.transaction() as txn:
            txn.set_state(tenant, kind, key, state)

    def checkpoint(self) -> None:
        """Nothing to do: the server persists (its own RDB / AOF settings)."""

    # ---- reads -------------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError("Redis store is closed")

    @staticmethod
    def _decode(raw: bytes) -> Record:
        d = json.loads(raw)
        return Record(d["tenant"], d["kind"], d["key"], d["parent"], d["meta"], d["payload"], d["size"],
                      d["text"], d["state"], d["lsn"])

    def get(self, tenant: str, kind: str, key: str) -> Record | None:
        self._check_open()
        raw = self._r.hget(self._k("rows", check_name("tenant", tenant)), f"{check_name('kind', kind)}\0{key}")
        return self._decode(raw) if raw is not None else None

    def children(self, tenant: str, kind: str, parent: str) -> list[Record]:
        self._check_open()
        keys = sorted(k.decode() for k in self._r.smembers(self._k("kids", check_name("tenant", tenant),
                                                                    check_name("kind", kind), parent)))
        raws = self._r.hmget(self._k("rows", tenant), [f"{kind}\0{k}" for k in keys]) if keys else []
        rows = [self._decode(r) for r in raws if r is not None]
        return sorted((r for r in rows if r.state == "active" and r.parent == parent), key=lambda r: r.lsn)

    def records(self, tenant: str | None = None, kind: str | None = None) -> Iterator[Record]:
        self._check_open()
        if tenant is None:
            names = [k.decode()[len(self._k("rows", "")):] for k in self._r.scan_iter(self._k("rows", "*"))]
        else:
            names = [check_name("tenant", tenant)]
        out = []
        for t in names:
            out += [self._decode(v) for v in self._r.hvals(self._k("rows", t))]
        return iter([r for r in out if kind is None or r.kind == kind])

    def read_payload(self, record: Record) -> bytes | None:
        """The bytes if they re-hash to the record's digest with its size; else None (a miss)."""
        self._check_open()
        if record.payload is None:
            return None
        data = self._r.get(self._k("pay", tenant_dir_name(record.tenant), record.payload))
        if data is None:
            self.counters["payload_missing"] += 1
            return None
        if len(data) != record.payload_size or hashlib.sha256(data).hexdigest() != record.payload:
            self.counters["payload_corrupt"] += 1
            return None
        return bytes(data)

    def payload_path(self, record: Record) -> Path:
        raise StoreError("a Redis store has no payload files")

    def search_text(self, tenant: str, query: str, kind: str | None = None,
                    limit: int = 10) -> list[tuple[Record, float]]:
        """Active rows of `tenant` matching words of `query`, ranked by BM25 as the local store's
        FTS5 ranks them (grm.store.redis_search; one pass over the tenant's rows)."""
        if not isinstance(query, str):
            raise UserInputError(f"search query must be a string, got {type(query).__name__}")
        return bm25(self.records(tenant), query, kind, limit)

    def stats(self) -> dict:
        rows = list(self.records())
        where = urlsplit(self.config.url)  # no credentials in what stats print
        return {"backend": "redis", "url": f"{where.scheme}://{where.hostname}:{where.port or 6379}{where.path}",
                "namespace": self.config.namespace,
                "root": f"{where.scheme}://{where.hostname}:{where.port or 6379}/{self.config.namespace}",
                "durability": "the Redis server's (appendonly / appendfsync)", "encrypted": False,
                "compressed": False, "records": len(rows), "tenants": tenant_kinds(rows), "last_lsn": int(self._r.get(self._k("lsn")) or 0),
                "leases_held": sorted(self._held), "counters": dict(self.counters)}

    @property
    def last_lsn(self) -> int:
        return int(self._r.get(self._k("lsn")) or 0)

    def fsck(self, repair: bool = False) -> FsckReport:
        """Verify every payload; with repair, mark rows with bad payloads damaged (logged)."""
        rows = list(self.records())
        damaged = [r for r in rows if r.payload is not None and r.state != "damaged" and self.read_payload(r) is None]
        repaired = []
        if repair and damaged:
            with self.transaction() as txn:
                for r in damaged:
                    txn.set_state(r.tenant, r.kind, r.key, "damaged")
                    repaired.append(f"marked damaged {r.ident}")
        return FsckReport(records=len(rows), damaged=[r.ident for r in damaged], orphans=[], repaired=repaired,
                          already_damaged=[r.ident for r in rows if r.state == "damaged"])

    def is_damaged(self, record: Record, *, verify: bool = False) -> bool:
        """As `Store.is_damaged`: marked damaged, or (verify) its payload does not verify now."""
        if record.state == "damaged":
            return True
        return verify and record.payload is not None and self.read_payload(record) is None

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._stop.set()
        self._renewer.join()
        for tenant in list(self._held):
            with contextlib.suppress(Exception):
                self._release(keys=[self._k("lease", tenant)], args=[self._token])
        self._held.clear()
        self._r.close()

    def __enter__(self) -> RedisStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
