"""Keys for encryption at rest: the master key, per-tenant keys, and the key check.

Key hierarchy (all HKDF-SHA256, 32-byte outputs, salt = the store's random 16-byte `kdf_salt`
kept in its marker, so two stores under one master key share no derived key):

    check key  = HKDF(master, info=b"grm key check v1")             -> marker "check" verifier
    tenant enc = HKDF(master, info=b"grm tenant enc v1\\0" + tenant) -> AES-256-GCM key
    tenant name= HKDF(master, info=b"grm tenant name v1\\0" + tenant)-> HMAC key for file names

The marker stores HMAC-SHA256(check key, b"grm-store key check v1") as hex: opening with another
master key fails that comparison and is refused with a clear StoreError before any byte is read,
so a wrong key is never garbage. `Defences.tenant_binding` (tests only) derives every tenant's
keys with the empty tenant name, which is what the attack tests switch off.
"""

from __future__ import annotations

import hmac
import os
import threading
from hashlib import sha256
from pathlib import Path

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from grm.errors import StoreError, UserInputError

KEY_BYTES = 32
_CHECK_MSG = b"grm-store key check v1"


def load_master_key(path: str | Path | None, env_value: str | None) -> bytes | None:
    """The master key from a key file (32 raw bytes, or 64 hex characters with optional
    whitespace) or else from an environment value (64 hex characters); None if neither is
    given. A key of the wrong length or spelling is a UserInputError naming where it came from."""
    if path is not None:
        try:
            raw = Path(path).read_bytes()
        except OSError as e:
            raise UserInputError(f"cannot read key file {path}: {e.strerror or e}") from None
        if len(raw) == KEY_BYTES:
            return raw
        return _hex_key(raw.strip(), f"key file {path}", len(raw))
    if env_value is not None and env_value.strip():
        return _hex_key(env_value.strip().encode("utf-8", "replace"), "GRM_MASTER_KEY", len(env_value))
    return None


def _hex_key(text: bytes, where: str, n: int) -> bytes:
    if len(text) == 2 * KEY_BYTES:
        try:
            return bytes.fromhex(text.decode("ascii"))
        except (UnicodeDecodeError, ValueError):
            pass
    raise UserInputError(f"{where} must hold a {KEY_BYTES}-byte master key: {KEY_BYTES} raw bytes or "
                         f"{2 * KEY_BYTES} hex characters (it holds {n} bytes)")


def new_kdf_salt() -> bytes:
    return os.urandom(16)


def _hkdf(master: bytes, salt: bytes, info: bytes) -> bytes:
    return HKDF(algorithm=hashes.SHA256(), length=KEY_BYTES, salt=salt, info=info).derive(master)


def key_check(master: bytes, salt: bytes) -> str:
    """The verifier kept in the marker (reveals nothing usable about the key)."""
    return hmac.new(_hkdf(master, salt, b"grm key check v1"), _CHECK_MSG, sha256).hexdigest()


class Keyring:
    """Derived keys of one store, cached per tenant. Thread-safe."""

    def __init__(self, master: bytes, salt: bytes) -> None:
        self._master = master
        self._salt = salt
        self._cache: dict[str, tuple[bytes, bytes]] = {}
        self._mutex = threading.Lock()

    def matches(self, check: str) -> bool:
        return hmac.compare_digest(key_check(self._master, self._salt), check)

    def tenant(self, tenant: str) -> tuple[bytes, bytes]:
        """(encryption key, name key) of `tenant`."""
        with self._mutex:
            keys = self._cache.get(tenant)
            if keys is None:
                t = tenant.encode("utf-8")
                keys = (_hkdf(self._master, self._salt, b"grm tenant enc v1\0" + t),
                        _hkdf(self._master, self._salt, b"grm tenant name v1\0" + t))
                self._cache[tenant] = keys
            return keys


def keyring_for(section: tuple[bytes, str] | None, master_key: bytes | None, what: str) -> Keyring | None:
    """The keyring of a store whose marker holds `section` ((salt, check) of an encrypted store,
    None for a plain one), or a StoreError naming `what` ("store DIR", "Redis store URL"): a plain
    store opened with a key, an encrypted one without, or a wrong key."""
    if section is None:
        if master_key is not None:
            raise StoreError(f"{what} was created without encryption; open it without a master key")
        return None
    if master_key is None:
        raise StoreError(f"{what} is encrypted: give its master key (--key-file PATH or GRM_MASTER_KEY)")
    keyring = Keyring(master_key, section[0])
    if not keyring.matches(section[1]):
        raise StoreError(f"wrong master key for {what}")
    return keyring
