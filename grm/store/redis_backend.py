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

Keys (namespace N; tenant folder th = sha256(tenant)[:16]; row, child and payload spellings,
plain or sealed, in grm.store.redis_rows):
    N:marker                    plain or encrypted (salt + key verifier); see grm.store.redis_rows
    N:lsn                       INCR counter: LSNs, one per mutation, assigned at commit
    N:log                       stream: one entry per committed transaction (first LSN, ops JSON)
    N:rows:<tenant>             hash: kind "\\0" key (sealed: kid) -> row JSON
    N:kids:<tenant>:<kind>:<parent>  set of child keys (sealed: kids)
    N:pay:<th>:<name>           payload bytes (plain: name = SHA-256; sealed: keyed name, envelope)
    N:lease:<tenant>            the writer's token, with expiry
Commit = one Lua script: check the marker is the one this process opened and every tenant lease
still holds our token, INCRBY the LSN, write rows (each row's LSN put in front of its JSON, never
substituted into it: user bytes stay as written), update
child sets, XADD the log entry. A lost lease fails the whole transaction (StoreError), never half
of it. Durability is the Redis server's (appendonly / appendfsync): RedisConfig does not take a
durability mode. Encryption at rest: `RedisStore.open(config, master_key=...)` seals every row's
key, parent, meta and text and every payload (grm.store.redis_rows). search_text ranks by BM25
in the client (grm.store.redis_search) over the rows this process reads (and, sealed, opens):
Redis never sees a word of an encrypted namespace, so no server-side index is possible there.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from grm.errors import StoreBusy, StoreError, UserInputError, redact
from grm.store.fsck import FsckReport
from grm.store.layout import tenant_dir_name
from grm.store.redis_rows import (CLAIM_SCRIPT, PLAIN_MARKER, PlainRows, RowCache, SealedRows,
                                  encrypted_marker, marker_keyring)
from grm.store.redis_search import bm25, tenant_kinds
from grm.store.record import Record, check_key, check_name, check_state, check_text, exported, normalize_meta

_COMMIT = """
local m = redis.call('GET', KEYS[3])
if not m then redis.call('SET', KEYS[3], ARGV[4]) elseif m ~= ARGV[4] then return redis.error_reply('GRM_MARKER') end
local n = tonumber(ARGV[2])
for i = 1, n do
  if redis.call('GET', KEYS[3 + i]) ~= ARGV[1] then return redis.error_reply('GRM_LEASE_LOST') end
end
local ops = cjson.decode(ARGV[3])
local first = redis.call('INCRBY', KEYS[1], #ops) - #ops + 1
for i, op in ipairs(ops) do
  local lsn = first + i - 1
  if op.v then
    redis.call('HSET', op.h, op.f, '{"lsn":' .. tostring(lsn) .. ',' .. string.sub(op.v, 2))
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
                                     f"{attempt + 1} tries): {redact(str(e))}") from None
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
            raise UserInputError(f"bad Redis URL {redact(str(self.url))!r}")
        check_name("namespace", self.namespace)
        if not isinstance(self.lease_ms, int) or self.lease_ms < 100:
            raise UserInputError(f"lease_ms must be an integer >= 100, got {self.lease_ms!r}")

    @property
    def location(self) -> str:
        """redis://HOST:PORT/NAMESPACE without credentials (for messages and stats)."""
        where = urlsplit(self.url)
        return f"{where.scheme}://{where.hostname}:{where.port or 6379}/{self.namespace}"


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
        rows = s.rows
        op: dict = {"h": s._k("rows", tenant), "f": rows.field(tenant, kind, key), "v": False}
        if rec is not None:
            op["v"] = rows.encode(rec)  # a JSON object without "lsn": the script puts it in front
            if rec.parent is not None:
                op["add"] = [s._k("kids", tenant, kind, rows.ref(tenant, kind, rec.parent)), rows.ref(tenant, kind, key)]
        if old is not None and old.parent is not None and (rec is None or rec.parent != old.parent):
            op["rem"] = [s._k("kids", tenant, kind, rows.ref(tenant, kind, old.parent)), rows.ref(tenant, kind, key)]
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
            digest, size = self._s._write_payload(tenant, kind, key, bytes(payload))
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
    def __init__(self, config: RedisConfig, client, marker: str = PLAIN_MARKER,
                 rows: PlainRows | None = None) -> None:
        """Use `RedisStore.open`. `marker` is the namespace marker this process writes under;
        `rows` spells rows and payloads (plain, or sealed with the namespace's keyring)."""
        self.config = config
        self._r = client
        self._marker = marker
        self.rows = rows or PlainRows()
        self._cache = RowCache(self.rows)
        self._token = os.urandom(16).hex()
        self._held: set[str] = set()
        self._lost: set[str] = set()
        self._mutex = threading.RLock()
        self._closed = False
        self._stop = threading.Event()
        self._commit = client.register_script(_COMMIT)
        self._renew = client.register_script(_RENEW)
        self._release = client.register_script(_RELEASE)
        self.counters = {"payload_corrupt": 0, "payload_missing": 0, "text_unauthenticated": 0}
        self._renewer = threading.Thread(target=self._renew_loop, name="grm-redis-lease", daemon=True)
        self._renewer.start()

    @classmethod
    def open(cls, config: RedisConfig, master_key: bytes | None = None) -> RedisStore:
        """Connect; with `master_key`, open (or create) the namespace encrypted. A plain namespace
        opened with a key, an encrypted one without, or a wrong key: StoreError, nothing read."""
        try:
            import redis
        except ImportError:
            raise StoreError("the Redis backend needs the redis package: pip install redis==8.1.0") from None
        try:
            client = redis.Redis.from_url(config.url)
            client.ping()
        except redis.RedisError as e:
            raise StoreError(f"cannot reach Redis at {redact(config.url)}: {redact(str(e))}") from e
        guarded = _Guarded(client, redact(config.url))
        where, marker_key = config.location, f"{config.namespace}:marker"
        try:
            if master_key is None:
                marker = guarded.get(marker_key)
            else:
                claim = guarded.register_script(CLAIM_SCRIPT)
                try:
                    marker = claim(keys=[marker_key, f"{config.namespace}:lsn"], args=[encrypted_marker(master_key)])
                except redis.ResponseError as e:
                    if "GRM_UNMARKED_DATA" not in str(e):
                        raise StoreError(f"Redis refused to open {where}: {e}") from e
                    marker = PLAIN_MARKER  # written before markers: plain
            keyring = None if marker is None else marker_keyring(marker, master_key, where)
        except BaseException:
            guarded.close()
            raise
        if keyring is None:
            return cls(config, guarded)
        return cls(config, guarded, marker.decode() if isinstance(marker, bytes) else marker, SealedRows(keyring))

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
            ttl = max(self._r.pttl(key), 0)
            raise StoreBusy(f"tenant {tenant!r} is being written by another GRM process "
                            f"(its lease expires in {ttl} ms unless renewed)", retry_after_s=ttl / 1000)
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

    def _write_payload(self, tenant: str, kind: str, key: str, data: bytes) -> tuple[str, int]:
        name, value = self.rows.seal_payload(tenant, kind, key, data)
        self._r.set(self._k("pay", tenant_dir_name(tenant), name), value)
        return name, len(data)

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
        keys = [self._k("lsn"), self._k("log"), self._k("marker")] + [self._k("lease", t) for t in tenants]
        try:
            self._commit(keys=keys, args=[self._token, len(tenants), json.dumps(txn.ops), self._marker])
        except redis.ResponseError as e:
            if "GRM_MARKER" in str(e):
                raise StoreError(f"Redis store {self.config.location} was re-created or its encryption changed "
                                 "since this process opened it; nothing was written, reopen it") from None
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

    def _counted(self, found):
        self.counters["text_unauthenticated"] = getattr(self.rows, "unauthenticated", 0)
        return found

    def get(self, tenant: str, kind: str, key: str) -> Record | None:
        """The row, or None: missing, or (encrypted) failing to authenticate - a miss the caller
        recomputes; its write replaces the row."""
        self._check_open()
        field = self.rows.field(check_name("tenant", tenant), check_name("kind", kind), key)
        got = self._counted(self._cache.one(tenant, field, self._r.hget(self._k("rows", tenant), field)))
        return got.export() if got is not None and got.rec.key == key else None

    def children(self, tenant: str, kind: str, parent: str) -> list[Record]:
        self._check_open()
        rows = self.rows
        refs = sorted(k.decode() for k in self._r.smembers(self._k(
            "kids", check_name("tenant", tenant), check_name("kind", kind), rows.ref(tenant, kind, parent))))
        fields = [f"{kind}\0{ref}" for ref in refs]
        raws = self._r.hmget(self._k("rows", tenant), fields) if fields else []
        got = [self._cache.one(tenant, f, r) for f, r in zip(fields, raws) if r is not None]
        self._counted(None)
        return sorted((o.export() for o in got if o.rec.state == "active" and o.rec.parent == parent),
                      key=lambda r: r.lsn)

    def records(self, tenant: str | None = None, kind: str | None = None) -> Iterator[Record]:
        self._check_open()
        if tenant is None:
            names = [k.decode()[len(self._k("rows", "")):] for k in self._r.scan_iter(self._k("rows", "*"))]
        else:
            names = [check_name("tenant", tenant)]
        out = [o for t in names for o in self._tenant_rows(t) if kind is None or o.rec.kind == kind]
        return iter([o.export() for o in out])

    def _tenant_rows(self, tenant: str):
        return self._counted(self._cache.tenant(tenant, self._r.hgetall(self._k("rows", tenant))))

    def read_payload(self, record: Record) -> bytes | None:
        """The bytes if they re-hash to the record's digest with its size; else None (a miss)."""
        self._check_open()
        if record.payload is None:
            return None
        data = self._r.get(self._k("pay", tenant_dir_name(record.tenant), record.payload))
        if data is None:
            self.counters["payload_missing"] += 1
            return None
        out = self.rows.open_payload(record, data)
        if out is None:
            self.counters["payload_corrupt"] += 1
        return out

    def payload_path(self, record: Record) -> Path:
        raise StoreError("a Redis store has no payload files")

    def search_text(self, tenant: str, query: str, kind: str | None = None,
                    limit: int = 10) -> list[tuple[Record, float]]:
        """Active rows of `tenant` matching words of `query`, ranked by BM25 as the local store's
        FTS5 ranks them (grm.store.redis_search; one pass over the tenant's rows)."""
        if not isinstance(query, str):
            raise UserInputError(f"search query must be a string, got {type(query).__name__}")
        self._check_open()
        hits = bm25(self._tenant_rows(check_name("tenant", tenant)), query, kind, limit)
        return [(d.export(), score) for d, score in hits]

    def stats(self) -> dict:
        rows = list(self.records())
        where = urlsplit(self.config.url)  # no credentials in what stats print
        return {"backend": "redis", "url": f"{where.scheme}://{where.hostname}:{where.port or 6379}{where.path}",
                "namespace": self.config.namespace, "root": self.config.location,
                "durability": "the Redis server's (appendonly / appendfsync)", "encrypted": self.rows.encrypted,
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
