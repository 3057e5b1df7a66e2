"""Glue between payloads and transformers caches (`cache.layers[i].keys/values`).

All caches GRM builds are `DeviceCache`s (plain `DynamicCache`s of full layers, one batch row,
that can move host K/V to an accelerator layer by layer: grm/kv/device.py): sliding-window
layers keep every token too, and the model's own mask hides what lies outside the window. That
keeps a span's K/V the same object whatever layer type it came from.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from transformers import DynamicCache

from grm.kv.device import DeviceCache, mount
from grm.kv.payload import KV

if TYPE_CHECKING:
    from grm.dialects import Dialect


def new_cache() -> DynamicCache:
    return DeviceCache()


def cache_length(cache: DynamicCache) -> int:
    return cache.get_seq_length()


def kv_from_cache(cache: DynamicCache, start: int = 0, end: int | None = None) -> KV:
    """Copy tokens [start, end) of every layer out of a cache (batch row 0), into host memory:
    K/V GRM keeps (sinks, blocks, grafts) lives on the host and is mounted onto the device."""
    if isinstance(cache, DeviceCache):
        cache.sync()
    keys = torch.stack([layer.keys[0, :, start:end].to("cpu") for layer in cache.layers])
    values = torch.stack([layer.values[0, :, start:end].to("cpu") for layer in cache.layers])
    return KV(keys, values)


def cache_from_kv(kv: KV, full: KV | None = None) -> DynamicCache:
    """A fresh cache over `kv` without copying it: each layer starts as a view of kv's tensors
    (moved to the model's device when the model first writes to it). Safe because an ArenaLayer
    never writes into tensors set from outside; it copies them into a buffer of its own first.
    `full`: the buffer `kv` is the first seats of, lent to this cache to grow into in place
    (grm/kv/device.py `mount`)."""
    return mount(kv, kv.keys.device, full=full)


def crop(cache: DynamicCache, length: int) -> None:
    """Drop every token at or after `length` (in place)."""
    extra = cache.get_seq_length() - length
    if extra > 0:
        cache.crop(-extra)


def reseat_kv(kv: KV, dialect: "Dialect", delta: int) -> KV:
    """`kv` moved by `delta` seats: keys rotated per layer (one rotation; none at 0), values as is."""
    if delta == 0:
        return kv
    keys = torch.stack([dialect.reseat(kv.keys[i], i, delta) for i in range(kv.keys.shape[0])])
    return KV(keys, kv.values)
