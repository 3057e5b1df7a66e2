"""How a RedisStore namespace spells its rows, child sets and payloads: in clear (`PlainRows`) or
sealed with the namespace's key (`SealedRows`), and the namespace marker that says which.

Marker `N:marker` (a string, written once, SET-if-absent inside a script):
    plain:     {"encryption":null,"version":1}
    encrypted: {"encryption":{"check":hex,"cipher":"AES-256-GCM","kdf":"HKDF-SHA256","salt":hex},"version":1}
An opener with a master key creates the encrypted marker when the namespace has none and no LSN
yet; a plain writer's first commit creates the plain marker. Every commit script checks that the
marker is still the one its process opened (`grm.store.redis_backend`), so a plain and an
encrypted process can never both write one namespace. Key handling is the local store's
(`grm.store.crypt`): master key from --key-file / GRM_MASTER_KEY, HKDF per tenant with the
marker's random salt, the marker's verifier rejects a wrong key before any row is read.

Rows (hash `N:rows:<tenant>`, field -> row JSON object; the client encodes it without "lsn", and
the commit script writes `{"lsn":N,` + the rest of it after its opening brace: the LSN is put in
front of the row, never substituted into it, so no user string can become or break an LSN):
    plain:  field kind "\\0" key;  {lsn, tenant, kind, key, parent, meta, payload, size, text, state}
    sealed: field kind "\\0" kid;  {lsn, tenant, kind, kid, payload, size, state, wid, sealed}
      kid    = HMAC-SHA256(tenant name key, ["key", kind, key]) hex (grm.store.envelope), so the
               field, child sets and log stream never name a key, a parent or a path
      wid    = 16 random bytes hex, fresh on every write of the row
      sealed = AES-256-GCM of canonical JSON {key, parent, meta, text}, associated data
               [tenant, kind, kid, payload, size, state, wid] (Codec.redis_row_ad): a row moved to
               another field, tenant or kind, or any clear field edited, fails to open.
    The LSN is the server's counter, assigned inside the commit script after sealing: it stays
    outside the seal (an edited LSN reorders rows; it cannot change what a row says).
Child sets `N:kids:<tenant>:<kind>:<ref(parent)>` hold ref(child): ref is the key (plain) or kid.
Payloads `N:pay:<sha256(tenant)[:16]>:<name>`:
    plain:  name = SHA-256 hex of the bytes, value = the bytes (content-addressed per tenant)
    sealed: name = Codec.name (HMAC of kind, key, SHA-256), value = the Codec payload envelope
            (AES-GCM, associated data = tenant, kind, key, name; one value per record).
Every read re-checks: size and SHA-256 (keyed name) of the bytes, authentication of envelopes and
sealed rows. A sealed row that fails to open is not served: `get` returns None (the caller
recomputes and its write replaces the row), `records` lists it as a damaged row whose key is
"sealed:" + kid (as the local store lists an unauthenticated log row), counted once per version
in `text_unauthenticated`. `RowCache` keeps what a process has decoded, keyed by the exact raw
value, so a row is decrypted (and tokenized for search) once per version, never trusted stale:
every read still fetches the raw value and a changed value is decoded again.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import Counter

from grm.errors import StoreError
from grm.store.crypt import Keyring, key_check, keyring_for, new_kdf_salt
from grm.store.defences import Defences
from grm.store.envelope import Codec, Unauthenticated
from grm.store.record import Record, canonical_json
from grm.store.redis_search import tokens
from grm.store.state import SEALED_KEY

PLAIN_MARKER = canonical_json({"version": 1, "encryption": None})

# Returns the marker, creating ARGV[1] when there is none and nothing was ever committed; else
# an error naming why not. KEYS: marker, lsn counter.
CLAIM_SCRIPT = """
local m = redis.call('GET', KEYS[1])
if m then return m end
if tonumber(redis.call('GET', KEYS[2]) or '0') > 0 then return redis.error_reply('GRM_UNMARKED_DATA') end
redis.call('SET', KEYS[1], ARGV[1])
return ARGV[1]
"""


def encrypted_marker(master_key: bytes) -> str:
    salt = new_kdf_salt()
    return canonical_json({"version": 1, "encryption": {"cipher": "AES-256-GCM", "kdf": "HKDF-SHA256",
                                                        "salt": salt.hex(), "check": key_check(master_key, salt)}})


def marker_keyring(marker: bytes | str, master_key: bytes | None, where: str) -> Keyring | None:
    """The keyring the namespace marker asks for (None: plain), or a StoreError saying what is
    wrong (grm.store.crypt.keyring_for), or that the marker is not GRM's."""
    try:
        enc = json.loads(marker)["encryption"]
        section = None if enc is None else (bytes.fromhex(enc["salt"]), enc["check"])
        if section is not None and (not isinstance(section[1], str) or len(section[0]) != 16):
            raise ValueError(section)
    except (ValueError, KeyError, TypeError, UnicodeDecodeError):
        raise StoreError(f"Redis store {where} has an unreadable marker; it was not written by GRM") from None
    return keyring_for(section, master_key, f"Redis store {where}")


class PlainRows:
    """Rows, child sets and payloads in clear (a namespace created without a key)."""

    encrypted = False

    def field(self, tenant: str, kind: str, key: str) -> str:
        return f"{kind}\0{self.ref(tenant, kind, key)}"

    def ref(self, tenant: str, kind: str, key: str) -> str:
        return key

    def encode(self, rec: Record) -> str:
        doc = dict(zip(("tenant", "kind", "key", "parent", "meta", "payload", "size", "text", "state"),
                       rec.to_list()[:9]))
        return canonical_json(doc)

    def decode(self, tenant: str, field: str, raw: bytes) -> Record:
        d = json.loads(raw)
        if "sealed" in d:
            raise StoreError("this Redis store holds encrypted rows: give its master key "
                             "(--key-file PATH or GRM_MASTER_KEY)")
        return Record(d["tenant"], d["kind"], d["key"], d["parent"], d["meta"], d["payload"], d["size"],
                      d["text"], d["state"], d["lsn"])

    def seal_payload(self, tenant: str, kind: str, key: str, data: bytes) -> tuple[str, bytes]:
        """(name, stored value) of payload `data`."""
        return hashlib.sha256(data).hexdigest(), data

    def open_payload(self, record: Record, blob: bytes) -> bytes | None:
        """The bytes if they match the record (size and SHA-256), else None."""
        if len(blob) != record.payload_size or hashlib.sha256(blob).hexdigest() != record.payload:
            return None
        return bytes(blob)


class SealedRows(PlainRows):
    """Rows sealed with the namespace's keyring (layout in the module docstring)."""

    encrypted = True

    def __init__(self, keyring: Keyring, defences: Defences | None = None) -> None:
        self.codec = Codec(keyring, compress=False, defences=defences or Defences())
        self.unauthenticated = 0  # row versions that failed to open (RowCache decodes each once)

    def ref(self, tenant: str, kind: str, key: str) -> str:
        return self.codec.kid(tenant, kind, key)

    def encode(self, rec: Record) -> str:
        kid, wid = self.codec.kid(rec.tenant, rec.kind, rec.key), os.urandom(16).hex()
        ad = self.codec.redis_row_ad(rec.tenant, rec.kind, kid, [rec.payload, rec.payload_size, rec.state, wid])
        sealed = self.codec.seal_fields(rec.tenant, ad, {"key": rec.key, "parent": rec.parent,
                                                         "meta": rec.meta, "text": rec.text})
        return canonical_json({"tenant": rec.tenant, "kind": rec.kind, "kid": kid, "payload": rec.payload,
                               "size": rec.payload_size, "state": rec.state, "wid": wid, "sealed": sealed})

    def decode(self, tenant: str, field: str, raw: bytes) -> Record:
        kind, _, kid = field.partition("\0")
        try:
            d = json.loads(raw)
            if not isinstance(d, dict) or "sealed" not in d:
                raise Unauthenticated("a row in clear in an encrypted store")
            lsn = d["lsn"] if isinstance(d.get("lsn"), int) else 0
            payload, size, state = d.get("payload"), d.get("size"), d.get("state")
            if (d.get("tenant"), d.get("kind"), d.get("kid")) != (tenant, kind, kid):
                raise Unauthenticated("row stored under another field")
            ad = self.codec.redis_row_ad(tenant, kind, kid, [payload, size, state, d.get("wid")])
            f = self.codec.open_fields(tenant, ad, d["sealed"])
            if self.codec.kid(tenant, kind, f["key"]) != kid:
                raise Unauthenticated("sealed key does not match the row's kid")
            return Record(tenant, kind, f["key"], f["parent"], f["meta"], payload, size, f["text"], state, lsn)
        except (Unauthenticated, ValueError, KeyError, TypeError):
            self.unauthenticated += 1
            return Record(tenant, kind, SEALED_KEY + kid, None, {}, None, 0, None, "damaged", 0)

    def seal_payload(self, tenant: str, kind: str, key: str, data: bytes) -> tuple[str, bytes]:
        name = self.codec.name(tenant, kind, key, hashlib.sha256(data).hexdigest())
        return name, self.codec.encode_payload(tenant, kind, key, name, data)

    def open_payload(self, record: Record, blob: bytes) -> bytes | None:
        if record.key.startswith(SEALED_KEY):
            return None  # a row that failed to open: no key to authenticate its payload with
        return self.codec.decode_payload(record.tenant, record.kind, record.key, record.payload,
                                         record.payload_size, bytes(blob))


class Opened:
    """One decoded row version: the raw value it came from, the row (shared: hand out `export()`),
    its meta as canonical JSON (a private copy per export), its word counts once searched."""

    __slots__ = ("raw", "rec", "meta", "counts")

    def __init__(self, raw: bytes, rec: Record) -> None:
        self.raw, self.rec, self.meta = raw, rec, canonical_json(rec.meta)
        self.counts: Counter | None = None

    def export(self) -> Record:
        r = self.rec
        return Record(r.tenant, r.kind, r.key, r.parent, json.loads(self.meta), r.payload, r.payload_size,
                      r.text, r.state, r.lsn)

    def words(self) -> Counter:
        if self.counts is None:
            self.counts = Counter(tokens(self.rec.text or ""))
        return self.counts


class RowCache:
    """Rows this process decoded, per tenant and hash field, each with the raw value it came
    from: a row is decoded (for a sealed one: authenticated and decrypted) once per version. Only
    an identical raw value is a hit; bounded by the rows of the tenants read (a tenant's map is
    replaced by each full read of the tenant). Dict operations only: safe under threads."""

    def __init__(self, rows: PlainRows) -> None:
        self.rows = rows
        self._tenants: dict[str, dict[str, Opened]] = {}

    def one(self, tenant: str, field: str, raw: bytes | None) -> Opened | None:
        seen = self._tenants.setdefault(tenant, {})
        if raw is None:
            seen.pop(field, None)
            return None
        hit = seen.get(field)
        if hit is None or hit.raw != raw:
            hit = seen[field] = Opened(bytes(raw), self.rows.decode(tenant, field, raw))
        return hit

    def tenant(self, tenant: str, values: dict[bytes, bytes]) -> list[Opened]:
        """Every row of `tenant` (hash field -> raw value, as HGETALL returns them)."""
        old = self._tenants.get(tenant, {})
        new: dict[str, Opened] = {}
        for f, raw in values.items():
            field = f.decode("utf-8", "surrogateescape")
            hit = old.get(field)
            new[field] = hit if hit is not None and hit.raw == raw else Opened(bytes(raw), self.rows.decode(tenant, field, raw))
        self._tenants[tenant] = new
        return list(new.values())
