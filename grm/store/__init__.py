"""GRM's durable plane: an append-only event log (the authority), checkpoints, content-addressed
payload files and a derived SQLite catalog, all behind `Store` (and `RedisStore`, the shared
backend with the same interface). See `grm.store.store` for the
lifecycle and each module's docstring for its on-disk format."""

from grm.store.config import DURABILITY_MODES, DURABILITY_PROMISES, StoreConfig
from grm.store.crypt import load_master_key
from grm.store.defences import Defences
from grm.store.fs import FileSystem, LocalFS, OsPaths, WritableFile
from grm.store.fsck import FsckReport
from grm.store.memfs import MemoryFS
from grm.store.record import STATES, Record
from grm.store.redis_backend import RedisConfig, RedisStore
from grm.store.store import Store
from grm.store.txn import Txn

__all__ = ["DURABILITY_MODES", "DURABILITY_PROMISES", "STATES", "Defences", "FileSystem", "FsckReport",
           "LocalFS", "MemoryFS", "OsPaths", "Record", "RedisConfig", "RedisStore", "Store", "StoreConfig",
           "Txn", "WritableFile", "load_master_key"]
