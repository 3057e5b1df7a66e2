"""Which backend a store location names: `--store DIR` is a local `Store`, `--store
redis://HOST:PORT/NS` a `RedisStore` in namespace NS (DESIGN's public contract). The faces' store
openers (grm/cli/common.py, `Runtime.open`) call `open_backend`; nothing else opens stores.

A Redis store has no local durability modes (the server's appendonly/appendfsync decide); a
master key encrypts a Redis namespace at rest as it does a folder (grm.store.redis_rows).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from grm.errors import UserInputError, redact
from grm.store.backend import StoreBackend

log = logging.getLogger("grm.store")
REDIS_SCHEMES = ("redis", "rediss")
DEFAULT_NAMESPACE = "grm"


def is_redis(location: str | os.PathLike) -> bool:
    return isinstance(location, str) and location.split("://", 1)[0] in REDIS_SCHEMES and "://" in location


def redis_config(location: str, **fields: Any):
    """`redis[s]://[user:pass@]HOST[:PORT][/NS]` -> RedisConfig(url of database 0, namespace NS)."""
    from grm.store.redis_backend import RedisConfig

    parts = urlsplit(location)
    if not parts.hostname:
        raise UserInputError(f"bad Redis store {redact(location)!r}: want redis://HOST:PORT/NAMESPACE")
    namespace = parts.path.strip("/") or DEFAULT_NAMESPACE
    if parts.query or parts.fragment:
        raise UserInputError(f"bad Redis store {redact(location)!r}: no query or fragment, "
                             "only redis://HOST:PORT/NAMESPACE")
    url = urlunsplit((parts.scheme, parts.netloc, "/0", "", ""))
    return RedisConfig(url, namespace=namespace, **fields)


def open_backend(location: str | os.PathLike, *, master_key: bytes | None = None, **local: Any) -> StoreBackend:
    """Open the store at `location`: a Redis URL, else a local folder (`StoreConfig(root=location,
    master_key=..., **local)`, e.g. durability, compress, read_only)."""
    if is_redis(location):
        ignored = sorted(k for k, v in local.items() if v not in (None, False, "normal"))
        if ignored:
            log.warning("Redis store %s: %s set by the Redis server, not here", location, ", ".join(ignored))
        from grm.store.redis_backend import RedisStore

        return RedisStore.open(redis_config(location), master_key=master_key)
    from grm.store.config import StoreConfig
    from grm.store.store import Store

    return Store.open(StoreConfig(root=Path(location), master_key=master_key, **local))


def disk_bytes(location: str | os.PathLike) -> int | None:
    """Bytes of every file under a local store's folder (0 if it does not exist yet): payload files
    as written (compressed, encrypted), log, checkpoints, catalog. Read with the store closed, it
    is what a write left on disk; None for a Redis location (its bytes live in the server)."""
    if is_redis(location):
        return None
    total = 0
    for folder, _dirs, files in os.walk(Path(location)):
        for name in files:
            try:
                total += os.lstat(os.path.join(folder, name)).st_size
            except OSError:  # removed while walking
                pass
    return total
