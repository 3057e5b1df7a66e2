"""The endpoint file: how `grm ask` and `grm ingest` find a `grm serve` holding their store.

A server on a local store keeps `<store>/SERVE.json` while it answers: written as loading once the
port listens (`"loading": true` with pid, host, port, tenant, sealed and token only: a command
waits for it), rewritten whole once the model is loaded and the store open; removed when it stops
(on SIGTERM before the store closes). One JSON object, version 1:

    {"format": "grm-serve", "version": 1,
     "pid": int, "host": str, "port": int,       where to connect (a wildcard host reads as loopback)
     "model": str,                              the model as the server was given it (a path made absolute)
     "model_name": str, "default_model": bool,  its name; whether it is GRM's default model
     "dtype": str, "device": str,               what it runs in ("float32", "cpu", ...)
     "tenant": str,                             the server's own tenant (--tenant; --no-auth requests)
     "sealed": bool,                            the store is encrypted (see the credential below)
     "token": str,                              32 random bytes, URL-safe base64
     "settings": {name: value}}                 RuntimeConfig/ServeConfig fields a request cannot change

Security. The file is written 0600 (temp file, fsync, rename) in the store folder, so only the
store's owner reads the token; a reader ignores a file another user owns or others may read. The
credential `Authorization: Bearer CRED` acts for the tenant named in `X-GRM-Tenant` (the owner
can read every tenant's files anyway). For an encrypted store CRED is HMAC-SHA256(master key,
token), so the token alone opens nothing the master key does not; otherwise CRED is the token.

Staleness. A file whose pid is not alive, or whose port refuses, is stale: readers ignore it and
remove it (`remove_if_same`: only while it still holds the token they read).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

ENDPOINT_NAME = "SERVE.json"
FORMAT, VERSION = "grm-serve", 1
TENANT_HEADER = "X-GRM-Tenant"  # the tenant a request made with the local credential acts for


def path_for(root: Path | str) -> Path:
    return Path(root) / ENDPOINT_NAME


def new_token() -> str:
    return secrets.token_urlsafe(32)


def credential(token: str, master_key: bytes | None) -> str:
    """What a client sends as its bearer key: the token, or for an encrypted store
    HMAC-SHA256(master key, token) in hex (the master key proves itself, never travels)."""
    if master_key is None:
        return token
    return hmac.new(master_key, b"grm-serve-local:" + token.encode(), hashlib.sha256).hexdigest()


def connect_host(host: str) -> str:
    """The address a local client dials for a server listening on `host`."""
    return {"0.0.0.0": "127.0.0.1", "": "127.0.0.1", "::": "::1"}.get(host, host)


def url(info: dict) -> str:
    host = connect_host(str(info["host"]))
    return f"http://{'[' + host + ']' if ':' in host else host}:{info['port']}"


def address(info: dict) -> str:
    """host:port as a person reads it (in messages)."""
    return url(info).removeprefix("http://")


def pid_alive(pid: object) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    return True


@dataclass
class Published:
    """A written endpoint file; `withdraw()` removes it (idempotent; only if still ours)."""

    path: Path
    token: str

    def withdraw(self) -> None:
        remove_if_same(self.path, self.token)


def publish(root: Path | str, info: dict) -> Published:
    """Write `<root>/SERVE.json` (0600, temp file + fsync + rename + directory fsync) with `info`
    (which holds the token)."""
    path = path_for(root)
    doc = {"format": FORMAT, "version": VERSION, **info}
    tmp = path.with_name(f".{path.name}.tmp.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(json.dumps(doc, sort_keys=True, separators=(",", ":")) + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    dfd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)
    return Published(path, str(info["token"]))


class Unsafe(Exception):
    """The endpoint file exists but may not be trusted (another owner, readable by others)."""


def read(root: Path | str) -> dict | None:
    """The endpoint file's object, or None when there is none or it is not one (a partial or
    foreign file). Raises Unsafe for a file another user owns or that others may read."""
    path = path_for(root)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as e:  # a symlink (ELOOP) or unreadable
        raise Unsafe(f"{path} cannot be read safely ({e.strerror or e})") from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if st.st_uid != os.getuid() or st.st_mode & 0o077:
            raise Unsafe(f"{path} is not private to this user (mode {st.st_mode & 0o777:o}, owner {st.st_uid})")
        raw = f.read(1 << 16)
    try:
        doc = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or doc.get("version") != VERSION:
        return None
    if not all(isinstance(doc.get(k), t) for k, t in (("pid", int), ("host", str), ("port", int), ("token", str))):
        return None
    return doc


def remove_if_same(path: Path, token: str) -> bool:
    """Remove `path` if it still holds `token` (a newer server's file is left alone)."""
    try:
        doc = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return False
    if not isinstance(doc, dict) or not hmac.compare_digest(str(doc.get("token", "")), token):
        return False
    try:
        path.unlink()
    except FileNotFoundError:
        return False
    return True
