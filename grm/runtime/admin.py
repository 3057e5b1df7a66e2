"""What a face does with a store and no model: open it for one command, tell whose lock holds it,
and the housekeeping commands (`grm stats`, `grm fsck`, `grm gc`, the store's budget).

The faces (grm/cli, grm/serve) take every store operation from here or from a `Runtime`; they never
import grm.store (tests/test_architecture.py). This module and grm/runtime/runtime.py are the only
ones above the store that name a concrete store class: they open one.

Imports nothing heavy (no torch, no numpy): `grm stats`, `fsck`, `gc`, `memory` and `documents`
run without a model, and a command sent to a running server stays fast.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Callable

from grm.errors import UserInputError
from grm.store import Store, StoreConfig, load_master_key
from grm.store.backend import StoreBackend
from grm.store.config import DURABILITY_MODES
from grm.store.fs import LocalFS
from grm.store.gc import DEFAULT_RETAIN_WRITES, GcReport, collect
from grm.store.kinds import BLOCK
from grm.store.layout import MARKER_NAME, Layout
from grm.store.opener import disk_bytes, is_redis, open_backend  # noqa: F401  (disk_bytes: grm ingest's report)
from grm.store.record import Record
from grm.store.root import lock_holder
from grm.store.salvage import salvage as salvage_store
from grm.store.tenant import TENANT_RE, check_tenant
from grm.store.tiering import inventory, parse_size, save_budget, stored_budget

# Names the faces take from here as they are (the store's own rules, stated once there).
__all__ = ["DEFAULT_RETAIN_WRITES", "DURABILITY_MODES", "StoreBackend", "check_tenant", "fsck",
           "gc", "graft_bytes", "load_master_key", "lock_pid", "open_store", "parse_size", "payload_bytes",
           "remember_budget", "require_store", "salvage", "store_folder", "tenant_ok", "tenant_stats"]

# ----- where a store is, and who holds it -----------------------------------------------------------
def store_folder(location: Path | str) -> Path | None:
    """The folder of a local store; None for a redis:// location (it has no folder to share)."""
    return None if is_redis(location) else Path(location)


def tenant_ok(name: str) -> bool:
    """Whether `name` is a tenant name (check_tenant's rule, as a test: an HTTP header is checked
    with it and answered 400 rather than raised)."""
    return isinstance(name, str) and TENANT_RE.fullmatch(name) is not None


def require_store(location: Path | str) -> None:
    """Reading commands never create a store: UserInputError if the folder at `location` holds
    none (a Redis namespace always exists: an empty one reads as an empty store)."""
    folder = store_folder(location)
    if folder is not None and not (folder / MARKER_NAME).exists():
        raise UserInputError(f"no GRM store at {location} (run `grm ingest` or give --store DIR)")


def lock_pid(location: Path | str) -> str | None:
    """The pid holding the writer lock of the local store at `location`, or None (not held, no
    store there yet, or a Redis location, which takes no lock)."""
    folder = store_folder(location)
    return None if folder is None else lock_holder(LocalFS(), Layout(str(folder)))


def _local_config(location: Path | str, durability: str, master_key: bytes | None, compress: bool,
                  read_only: bool = False) -> StoreConfig:
    if store_folder(location) is None:
        raise UserInputError(f"this needs a local store folder, not {location}")
    extra = {"read_only": True} if read_only and "read_only" in StoreConfig.__dataclass_fields__ else {}
    return StoreConfig(root=location, durability=durability, master_key=master_key, compress=compress, **extra)


def open_store(location: Path | str, tenant: str, *, durability: str = "normal", master_key: bytes | None = None,
               compress: bool = False, create: bool = False, read_only: bool = False,
               before_lock: Callable[[Path], None] | None = None) -> StoreBackend:
    """The store a model-free command works on (a folder or redis://HOST:PORT/NS). The tenant name
    is checked first. Without `create` a missing local store is a UserInputError and nothing is
    created; `read_only` (ignored with `create`) opens a local store as a reader, which takes no
    lock. `before_lock(folder)`: called just before a writer takes a local store's lock (the CLI
    names a running server that holds it there)."""
    check_tenant(tenant)
    if is_redis(location):
        return open_backend(location, master_key=master_key, durability=durability, compress=compress)
    config = _local_config(location, durability, master_key, compress, read_only=read_only and not create)
    if not create:
        require_store(config.root)
    if config.read_only:
        return Store.open(config)
    if before_lock is not None:
        before_lock(Path(config.root))
    return Store.open(config)


# ----- what is stored --------------------------------------------------------------------------------
def payload_bytes(store: StoreBackend, tenant: str) -> int:
    """Payload bytes the tenant's records hold, a payload shared within a kind counted once (what
    `grm ingest` reports the growth of)."""
    kinds = store.stats().get("tenants", {}).get(tenant, {})
    return sum(k.get("payload_bytes", 0) for k in kinds.values())


def graft_bytes(store: StoreBackend, tenant: str, record: Record) -> int:
    """Payload bytes behind a graft's row (a document graft shares its block's payload)."""
    if record.payload_size:
        return record.payload_size
    block = store.get(tenant, BLOCK, record.meta.get("block") or "")
    return block.payload_size if block is not None else 0


def tenant_stats(store: StoreBackend, tenant: str) -> dict:
    """`grm stats`: the store-wide settings and log figures, only `tenant`'s records per kind (no
    other tenant's name or sizes), and `tiers`: the store's footprint (every tenant's, what the
    budget counts), this tenant's K/V spans by tier, and the budget the store remembers."""
    stats = store.stats()
    kinds = stats.get("tenants", {}).get(tenant, {})
    out = {k: v for k, v in stats.items() if k not in ("tenants", "records")}
    st = {"tenant": tenant, "records": sum(s["records"] for s in kinds.values()), **out, "kinds": kinds}
    st["tiers"] = {**inventory(store).to_json(tenant), "budget": stored_budget(store)}
    return st


# ----- housekeeping ----------------------------------------------------------------------------------
def fsck(store: StoreBackend, repair: bool = False) -> dict:
    """Every field of the store's fsck report."""
    report = store.fsck(repair=repair)
    if hasattr(report, "to_json"):
        return report.to_json()
    return dataclasses.asdict(report)  # type: ignore[call-overload]


def salvage(location: Path | str, *, durability: str = "normal", master_key: bytes | None = None,
            compress: bool = False) -> dict:
    """A local store whose log is damaged: keep every intact record, set the damaged bytes aside,
    name the records lost (grm/store/salvage.py). The report's fields."""
    require_store(location)
    return salvage_store(_local_config(location, durability, master_key, compress)).to_json()


def gc(store: StoreBackend, *, retain_writes: int | None = DEFAULT_RETAIN_WRITES, dry_run: bool = False,
       compact: bool = True) -> GcReport:
    """`grm gc` (grm/store/gc.py says what goes and why it is crash-safe)."""
    return collect(store, retain_writes=retain_writes, dry_run=dry_run, compact=compact)


def remember_budget(store: StoreBackend, budget: int) -> None:
    """The store keeps `budget` (bytes): later writes keep to it without it being given again."""
    save_budget(store, budget)
