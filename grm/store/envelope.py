"""Payload and text envelopes: how bytes are compressed, encrypted and bound to their record.

Payload file content, by store configuration:
    plain (no key, no compression): exactly the payload bytes; name = SHA-256 hex of them
    compressed or encrypted: an envelope
       0   8  magic b"GRMPAY1\\0"
       8   1  flags: bit 0 = zstandard-compressed, bit 1 = AES-256-GCM encrypted,
                     bit 2 = byte planes (the compressed bytes are `grm.store.planes.shuffle`d)
       9   1  plane width in bytes (1-8) when bit 2 is set, else zero
      10   2  zero
      12  12  nonce (random per write, never reused; zeros when not encrypted)
      24   .  body: the (compressed) bytes, or AES-GCM(ciphertext || 16-byte tag) of them
Compression (a store opened with `compress`): the payload's bytes are split into byte planes of its
tensors' element width (`grm.store.planes.width_of`), zstandard-compressed, then encrypted if the
store is; read back in the reverse order. A payload that zstd would not shrink below
`KEEP_RATIO` of its size is written plain (no envelope; encrypted only, where encrypted).
Envelopes without bit 2 (written before byte planes) read as they always did; a reader that
predates bit 2 gets shuffled bytes, fails the digest check and counts a miss (never serves them).
Names (the record's `payload` field, the content address):
    not encrypted: SHA-256 hex of the payload bytes - same bytes, same file within a tenant
    encrypted:     HMAC-SHA256(tenant name key, ["payload", kind, key, sha256 hex]) - deterministic
                   within a tenant and record (re-putting the same bytes reuses the file), reveals
                   nothing about the bytes, and differs between records: an encrypted store keeps
                   one file per record even when two records hold the same bytes.
Associated data (never stored; recomputed from the record on read):
    payload: b"grm-payload v1\\0" + canonical JSON [tenant, kind, key, name]
    text:    b"grm-text v1\\0"    + canonical JSON [tenant, kind, key]   (stores before row sealing)
    row:     b"grm-row v1\\0"     + canonical JSON [tenant, kind, kid, op, lsn]
    redis:   b"grm-redis-row v1\\0" + canonical JSON [tenant, kind, kid, payload, size, state, wid]
             (a Redis row: grm.store.redis_rows; wid = random per-write id kept beside it)
The format version is in the AD prefix, and the model identity is inside the key (a block's
key is its fingerprint, which hashes the model identity), so a file or text moved to another
tenant, record or format fails to authenticate: `decode_payload` returns None (a miss).
Encrypted text in log frames and checkpoints is base64 of: 1 byte version (1) || nonce || ct+tag.

Sealed rows (encrypted stores): everything in a log frame or checkpoint row that derives from
user content - the record `key` (fact ids, fingerprints, routing keys), `parent`, `meta` (fact
statements, paths, token ids) and `text` - is one AES-GCM-sealed canonical JSON object under
`"sealed"` (same base64 form as a sealed text). What stays in clear is what the store itself
needs to frame, order and account for records: op, txn, dur, tenant, kind, the keyed record id
`kid` = HMAC-SHA256(tenant name key, ["key", kind, key]) hex (deterministic, so salvage and fsck
can name a record whose frame is damaged, but reveals nothing about the key), the payload name
(already keyed), size and state. The associated data binds the sealed fields to tenant, kind,
kid, op and the frame's LSN, so sealed fields moved to another record, op or frame fail.

After decryption and decompression the bytes are checked again: their size and their SHA-256
(or keyed name) must match the record, so compression and encryption never weaken the digest
check of an unencrypted store.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import struct

import zstandard
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from grm.store import planes
from grm.store.crypt import Keyring
from grm.store.defences import Defences
from grm.store.record import Record, canonical_json

MAGIC = b"GRMPAY1\0"
HEAD = struct.Struct("<8sBB2x12s")
HEAD_SIZE = HEAD.size  # 24
F_ZSTD, F_AES, F_PLANES = 1, 2, 4
NONCE = 12
TAG = 16
TEXT_VERSION = 1
PRIVATE_FIELDS = ("key", "parent", "meta", "text")  # sealed in an encrypted store's log and checkpoints
# zstd level 1: on byte planes of bf16 K/V it kept 68% of the bytes where level 3 kept 71%, and
# compresses ~4x faster (bench/results/bytes-per-token.md)
_ZSTD_LEVEL = 1
KEEP_RATIO = 0.95  # a compressed body must be below this share of the payload, or it is written plain


class Unauthenticated(Exception):
    """Raised by `open_text` when a stored text fails authentication."""


def _ctr_decrypt(key: bytes, nonce: bytes, ct_and_tag: bytes) -> bytes:
    """AES-GCM decryption *without* the tag check (GCM's keystream starts at counter 2): only
    reachable when a test has switched `Defences.authentication` off."""
    dec = Cipher(algorithms.AES(key), modes.CTR(nonce + b"\0\0\0\2")).decryptor()
    return dec.update(ct_and_tag[:-TAG]) + dec.finalize()


class Codec:
    """Turns payload bytes into file content and names, and texts into sealed strings."""

    def __init__(self, keyring: Keyring | None, compress: bool, defences: Defences) -> None:
        self.keyring = keyring
        self.compress = compress
        self.defences = defences

    @property
    def encrypted(self) -> bool:
        return self.keyring is not None

    @property
    def enveloped(self) -> bool:
        return self.keyring is not None or self.compress

    def _tenant(self, tenant: str) -> str:
        return tenant if self.defences.tenant_binding else ""

    # ---- payloads ----------------------------------------------------------------------------

    def name(self, tenant: str, kind: str, key: str, sha_hex: str) -> str:
        if self.keyring is None:
            return sha_hex
        _, name_key = self.keyring.tenant(self._tenant(tenant))
        msg = canonical_json(["payload", kind, key, sha_hex]).encode("utf-8")
        return hmac.new(name_key, msg, hashlib.sha256).hexdigest()

    def _payload_ad(self, tenant: str, kind: str, key: str, name: str) -> bytes:
        return b"grm-payload v1\0" + canonical_json([self._tenant(tenant), kind, key, name]).encode("utf-8")

    def encode_payload(self, tenant: str, kind: str, key: str, name: str, data: bytes) -> bytes:
        """File content for `data` (fresh random nonce on every call)."""
        if not self.enveloped:
            return bytes(data)
        flags, width, body, nonce = 0, 0, bytes(data), bytes(NONCE)
        if self.compress:
            w = planes.width_of(body)
            packed = zstandard.ZstdCompressor(level=_ZSTD_LEVEL).compress(planes.shuffle(body, w))
            if len(packed) < KEEP_RATIO * len(body):
                flags |= F_ZSTD | (F_PLANES if w > 1 else 0)
                width = w if w > 1 else 0
                body = packed
            elif self.keyring is None:
                return body  # does not pay: plain bytes, read as any plain file
        if self.keyring is not None:
            flags |= F_AES
            nonce = os.urandom(NONCE)
            enc, _ = self.keyring.tenant(self._tenant(tenant))
            body = AESGCM(enc).encrypt(nonce, body, self._payload_ad(tenant, kind, key, name))
        return HEAD.pack(MAGIC, flags, width, nonce) + body

    def decode_payload(self, tenant: str, kind: str, key: str, name: str, size: int,
                       blob: bytes) -> bytes | None:
        """The payload bytes if `blob` authenticates (encrypted) and its bytes match the record
        (size and digest / keyed name); else None."""
        candidates = []
        opened = self._open_envelope(tenant, kind, key, name, size, blob)
        if opened is not None:
            candidates.append(opened)
        if not self.encrypted:
            candidates.append(blob)  # plain bytes (written before compression was on, or that
            # merely start with the envelope magic): the digest decides which reading is right
        for data in candidates:
            if not self.defences.digest_check:
                return data
            if len(data) == size and self.name(tenant, kind, key, hashlib.sha256(data).hexdigest()) == name:
                return data
        return None

    def _open_envelope(self, tenant: str, kind: str, key: str, name: str, size: int,
                       blob: bytes) -> bytes | None:
        if len(blob) < HEAD_SIZE or blob[:8] != MAGIC:
            return None
        _, flags, width, nonce = HEAD.unpack_from(blob, 0)
        body = blob[HEAD_SIZE:]
        if flags & F_AES:
            if self.keyring is None:
                return None
            enc, _ = self.keyring.tenant(self._tenant(tenant))
            if not self.defences.authentication:
                body = _ctr_decrypt(enc, nonce, body)
            else:
                try:
                    body = AESGCM(enc).decrypt(nonce, body, self._payload_ad(tenant, kind, key, name))
                except InvalidTag:
                    return None
        elif self.encrypted:
            return None  # an encrypted store serves only authenticated bytes
        if flags & F_ZSTD:
            try:
                body = zstandard.ZstdDecompressor().decompress(body, max_output_size=max(size, 1))
            except zstandard.ZstdError:
                return None
        if flags & F_PLANES:
            if not 1 <= width <= planes.MAX_WIDTH:
                return None
            body = planes.unshuffle(body, width)
        return body

    # ---- texts -------------------------------------------------------------------------------

    def _text_ad(self, tenant: str, kind: str, key: str) -> bytes:
        return b"grm-text v1\0" + canonical_json([self._tenant(tenant), kind, key]).encode("utf-8")

    def seal_text(self, tenant: str, kind: str, key: str, text: str) -> str:
        assert self.keyring is not None
        enc, _ = self.keyring.tenant(self._tenant(tenant))
        nonce = os.urandom(NONCE)
        ct = AESGCM(enc).encrypt(nonce, text.encode("utf-8"), self._text_ad(tenant, kind, key))
        return base64.b64encode(bytes([TEXT_VERSION]) + nonce + ct).decode("ascii")

    def seal_row(self, r: Record) -> list:
        """A checkpoint row: `Record.to_list`; encrypted, [tenant, kind, kid, null, null, payload,
        size, {"r": sealed {key, parent, meta, text}}, state, lsn]."""
        v = r.to_list()
        if self.keyring is None:
            return v
        kid = self.kid(r.tenant, r.kind, r.key)
        sealed = self._seal(r.tenant, r.kind, kid, "row", r.lsn,
                            {"key": r.key, "parent": r.parent, "meta": r.meta, "text": r.text})
        return [r.tenant, r.kind, kid, None, None, r.payload, r.payload_size, {"r": sealed}, r.state, r.lsn]

    def open_row(self, v: list) -> list:
        """The `Record.to_list` form of a sealed checkpoint row, or Unauthenticated."""
        f = self._open(v[0], v[1], v[2], "row", v[9], v[7]["r"])
        return [v[0], v[1], f["key"], f["parent"], f["meta"], v[5], v[6], f["text"], v[8], v[9]]

    # ---- sealed rows -------------------------------------------------------------------------

    def kid(self, tenant: str, kind: str, key: str) -> str:
        """The keyed record id kept in clear in an encrypted store's log and checkpoints."""
        assert self.keyring is not None
        _, name_key = self.keyring.tenant(self._tenant(tenant))
        return hmac.new(name_key, canonical_json(["key", kind, key]).encode("utf-8"), hashlib.sha256).hexdigest()

    def _row_ad(self, tenant: str, kind: str, kid: str, op: str, lsn: int) -> bytes:
        return b"grm-row v1\0" + canonical_json([self._tenant(tenant), kind, kid, op, lsn]).encode("utf-8")

    def _seal(self, tenant: str, kind: str, kid: str, op: str, lsn: int, fields: dict) -> str:
        return self.seal_fields(tenant, self._row_ad(tenant, kind, kid, op, lsn), fields)

    def _open(self, tenant: str, kind: str, kid: str, op: str, lsn: int, sealed: object) -> dict:
        return self.open_fields(tenant, self._row_ad(tenant, kind, kid, op, lsn), sealed)

    def redis_row_ad(self, tenant: str, kind: str, kid: str, bound: list) -> bytes:
        """Associated data of a sealed Redis row: its identity and every field kept in clear."""
        return b"grm-redis-row v1\0" + canonical_json([self._tenant(tenant), kind, kid, *bound]).encode("utf-8")

    def seal_fields(self, tenant: str, ad: bytes, fields: dict) -> str:
        """`fields` (key, parent, meta, text) as one sealed string bound to `ad`."""
        assert self.keyring is not None
        enc, _ = self.keyring.tenant(self._tenant(tenant))
        nonce = os.urandom(NONCE)
        ct = AESGCM(enc).encrypt(nonce, canonical_json(fields).encode("utf-8"), ad)
        return base64.b64encode(bytes([TEXT_VERSION]) + nonce + ct).decode("ascii")

    def open_fields(self, tenant: str, ad: bytes, sealed: object) -> dict:
        """The fields `seal_fields` sealed under `ad`, or Unauthenticated."""
        if self.keyring is None or not isinstance(sealed, str):
            raise Unauthenticated("store has no key" if self.keyring is None else "sealed row is not a string")
        raw = self._unbase64(sealed)
        enc, _ = self.keyring.tenant(self._tenant(tenant))
        if not self.defences.authentication:
            plain = _ctr_decrypt(enc, raw[1:1 + NONCE], raw[1 + NONCE:])
        else:
            try:
                plain = AESGCM(enc).decrypt(raw[1:1 + NONCE], raw[1 + NONCE:], ad)
            except InvalidTag:
                raise Unauthenticated("sealed row failed authentication") from None
        try:
            fields = json.loads(plain.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            raise Unauthenticated("sealed row is not JSON") from None
        if not isinstance(fields, dict) or not isinstance(fields.get("key"), str):
            raise Unauthenticated("sealed row has no key")
        fields.setdefault("parent", None)
        fields.setdefault("meta", {})
        fields.setdefault("text", None)
        return fields

    def seal_mutation(self, body: dict, lsn: int) -> dict:
        """A log frame body with its private fields (key, parent, meta, text) sealed."""
        private = {k: body[k] for k in PRIVATE_FIELDS if k in body}
        kid = self.kid(body["tenant"], body["kind"], body["key"])
        out = {k: v for k, v in body.items() if k not in PRIVATE_FIELDS}
        out["kid"] = kid
        out["sealed"] = self._seal(body["tenant"], body["kind"], kid, body["op"], lsn, private)
        return out

    def open_mutation(self, body: dict, lsn: int) -> dict:
        """The plain body of a sealed frame (Unauthenticated if it fails to open)."""
        fields = self._open(body["tenant"], body["kind"], body["kid"], body["op"], lsn, body["sealed"])
        out = {k: v for k, v in body.items() if k not in ("sealed", "kid")}
        out.update(fields)
        return out

    @staticmethod
    def _unbase64(sealed: str) -> bytes:
        try:
            raw = base64.b64decode(sealed.encode("ascii"), validate=True)
        except (ValueError, UnicodeEncodeError):
            raise Unauthenticated("not base64") from None
        if len(raw) < 1 + NONCE + TAG or raw[0] != TEXT_VERSION:
            raise Unauthenticated("bad sealed header")
        return raw

    def open_text(self, tenant: str, kind: str, key: str, sealed: str) -> str:
        """The text, or Unauthenticated (wrong tenant, record, key, or tampered bytes)."""
        if self.keyring is None:
            raise Unauthenticated("store has no key")
        raw = self._unbase64(sealed)
        nonce, ct = raw[1:1 + NONCE], raw[1 + NONCE:]
        enc, _ = self.keyring.tenant(self._tenant(tenant))
        if not self.defences.authentication:
            plain = _ctr_decrypt(enc, nonce, ct)
        else:
            try:
                plain = AESGCM(enc).decrypt(nonce, ct, self._text_ad(tenant, kind, key))
            except InvalidTag:
                raise Unauthenticated("text failed authentication") from None
        try:
            return plain.decode("utf-8")
        except UnicodeDecodeError:
            raise Unauthenticated("text is not UTF-8") from None
