"""Payload type and mechanics on transformers caches (slice, splice, re-seat, export)."""

from grm.kv.cache import cache_from_kv, cache_length, crop, kv_from_cache, new_cache, reseat_kv
from grm.kv.payload import KV

__all__ = ["KV", "cache_from_kv", "cache_length", "crop", "kv_from_cache", "new_cache", "reseat_kv"]
