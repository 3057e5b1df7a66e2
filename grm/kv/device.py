"""The device plane: which device and dtype a model runs in, and moving K/V onto it layer by layer.

Lifecycle: the model is placed by grm.models.placement (`--device`, `--dtype`, the numeric
regime in the identity). At ask time every cache GRM builds is a `DeviceCache`: layers may start
as host tensors (verified payloads from the store, or pinned buffers of the host plane) and move
to the accelerator one layer at a time, through a `Copier` (`StreamCopier` on CUDA). `mount(kv, device)` starts those copies at once: each layer's keys and values
are copied host->device on a side stream (from pinned memory, so the copy is asynchronous) and an
event is recorded per layer; the model's attention for layer i waits only for layer i's event,
so layer i+1's copy overlaps layer i's work (the layer-wise pipelining LMCache uses). A cache
that was not mounted ahead moves each layer when the model first writes to it, prefetching the
next `lookahead` layers on the side stream.

On a CPU-only machine (or a CPU device) none of this happens: no pinning, no streams, the layers
are the host tensors themselves, and results are bit-identical to a plain DynamicCache.
"""

from __future__ import annotations

import time
from typing import Protocol

import torch
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer

from grm.kv.payload import KV

LOOKAHEAD = 2  # layers prefetched ahead of the one the model is writing (lazy path)
ROOM_MIN = 256  # tokens of room an arena layer's buffer keeps past its end (at least)
ROOM_SHARE = 4  # ... and at least 1/ROOM_SHARE of its length: a decode of n tokens copies the layer O(log n) times


def room(tokens: int) -> int:
    """Seats an arena layer of `tokens` keeps free after them (ROOM_MIN, ROOM_SHARE)."""
    return max(ROOM_MIN, tokens // ROOM_SHARE)


def is_accelerator(device: torch.device | str) -> bool:
    return torch.device(device).type == "cuda"


def host_empty(shape: tuple[int, ...], dtype: torch.dtype, device: torch.device | str) -> torch.Tensor:
    """An uninitialized host tensor to read payloads into for a model on `device`: page-locked
    when `device` is CUDA (the reads land where an asynchronous copy can start from), plain else."""
    return torch.empty(shape, dtype=dtype, pin_memory=is_accelerator(device) and torch.cuda.is_available())


def pinned(kv: KV) -> KV:
    """`kv` in page-locked host memory (what an asynchronous host->device copy needs); on a
    machine without CUDA there is nothing to pin and `kv` comes back as it is."""
    if not torch.cuda.is_available() or kv.keys.device.type != "cpu":
        return kv
    if kv.keys.is_pinned() and kv.values.is_pinned():
        return kv
    return KV(kv.keys.pin_memory(), kv.values.pin_memory())


class Copier(Protocol):
    """Moves one layer's K/V from the host to a device. `start` returns the destination tensors
    (not to be read yet) and a handle; `wait(handle)` makes them readable on the device's current
    stream. The DeviceCache decides when each layer starts and when it is waited for."""

    def start(self, keys: torch.Tensor, values: torch.Tensor,
              device: torch.device) -> tuple[torch.Tensor, torch.Tensor, object]: ...

    def wait(self, handle: object, device: torch.device) -> None: ...


class StreamCopier:
    """CUDA: copies from pinned host memory on one side stream, an event recorded per layer."""

    def __init__(self, device: torch.device) -> None:
        self.stream = torch.cuda.Stream(device)

    def start(self, keys: torch.Tensor, values: torch.Tensor,
              device: torch.device) -> tuple[torch.Tensor, torch.Tensor, object]:
        if not keys.is_pinned():
            keys, values = keys.pin_memory(), values.pin_memory()  # pageable memory cannot copy asynchronously
        dst_k = torch.empty(keys.shape, dtype=keys.dtype, device=device)
        dst_v = torch.empty(values.shape, dtype=values.dtype, device=device)
        self.stream.wait_stream(torch.cuda.current_stream(device))  # the destination is free on the main stream first
        event = torch.cuda.Event()
        with torch.cuda.stream(self.stream):
            dst_k.copy_(keys, non_blocking=True)
            dst_v.copy_(values, non_blocking=True)
            event.record(self.stream)
        # A cache dropped before a layer is waited for must not hand its memory to the main stream
        # while the side stream still writes it.
        dst_k.record_stream(self.stream)
        dst_v.record_stream(self.stream)
        return dst_k, dst_v, (event, keys, values)  # the sources stay referenced until waited for

    def wait(self, handle: object, device: torch.device) -> None:
        torch.cuda.current_stream(device).wait_event(handle[0])


class BlockingCopier:
    """Any other device: a plain synchronous copy (nothing to overlap, nothing to wait for)."""

    def start(self, keys: torch.Tensor, values: torch.Tensor,
              device: torch.device) -> tuple[torch.Tensor, torch.Tensor, object]:
        return keys.to(device), values.to(device), None

    def wait(self, handle: object, device: torch.device) -> None:
        return None


class ArenaLayer(DynamicLayer):
    """A cache layer that grows in place. `keys`/`values` are views of the first tokens of a buffer
    with room after them (ROOM_MIN, ROOM_SHARE), so reading a token writes it there instead of
    concatenating the whole layer into a new tensor (DynamicLayer: O(tokens) copied per decoded
    token, ~340 MB a token for Qwen2.5-1.5B's 6k-token arena in fp32).

    Invariant: the buffer is this layer's alone. Keys set from outside (a mount's views of stored
    K/V, a copy moved to the device, blend's recomputed tensors) are not views of it, so the next
    update copies them into a new buffer: stored K/V are never written. `crop` keeps the buffer
    (the next tokens overwrite the dropped ones): a view taken before a crop must be copied first,
    as `kv_from_cache` does."""

    _buf: tuple[torch.Tensor, torch.Tensor] | None = None

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        n, add = self.get_seq_length(), key_states.shape[-2]
        if add == 0 and n == 0:
            return self.keys, self.values
        buf = self._buf
        if (buf is None or n + add > buf[0].shape[-2] or buf[0].device != key_states.device
                or (n and self.keys.data_ptr() != buf[0].data_ptr()) or self.keys.dtype != buf[0].dtype):
            cap = n + add + room(n + add)
            shape = (*key_states.shape[:-2], cap, key_states.shape[-1])
            keys = torch.empty(shape, dtype=key_states.dtype, device=key_states.device)
            values = torch.empty((*shape[:-1], value_states.shape[-1]), dtype=value_states.dtype,
                                 device=value_states.device)
            if n:
                keys[..., :n, :].copy_(self.keys)
                values[..., :n, :].copy_(self.values)
            self._buf = buf = (keys, values)
        buf[0][..., n:n + add, :].copy_(key_states)
        buf[1][..., n:n + add, :].copy_(value_states)
        self.keys, self.values = buf[0][..., :n + add, :], buf[1][..., :n + add, :]
        return self.keys, self.values

    def hold(self, keys: torch.Tensor, values: torch.Tensor, length: int) -> None:
        """Take `keys`/`values` [..., capacity, head_dim] as this layer's buffer (its own alone),
        their first `length` tokens filled (a batch assembled elsewhere: grm/kv/batch.py)."""
        self._buf = (keys, values)
        self.keys, self.values = keys[..., :length, :], values[..., :length, :]

    def reset(self) -> None:
        self._buf = None
        super().reset()


class DeviceCache(DynamicCache):
    """A DynamicCache whose layers may live on the host until the model needs them on its device.

    Invariant: a layer whose copy is in flight has an entry in `_pending`; nothing reads its
    tensors on the device before `update` or `sync` has waited for it. A layer moves at most once."""

    def __init__(self, lookahead: int = LOOKAHEAD, copier: Copier | None = None) -> None:
        super().__init__()
        self.layer_class_to_replicate = ArenaLayer  # layers grow in place (ArenaLayer)
        self.lookahead = lookahead
        self._copier = copier
        self._pending: dict[int, object] = {}  # layer -> the copier's handle of its copy in flight
        self.moved_bytes = 0  # bytes copied host->device by this cache

    def prefetch(self, layer: int, device: torch.device) -> None:
        """Start moving `layer` to `device` (no-op if it is there, in flight, or `device` is the host)."""
        if layer >= len(self.layers) or layer in self._pending or device.type == "cpu":
            return
        entry = self.layers[layer]
        if not entry.is_initialized or entry.keys.device == device:
            return
        if self._copier is None:
            self._copier = StreamCopier(device) if device.type == "cuda" else BlockingCopier()
        nbytes = entry.keys.nbytes + entry.values.nbytes
        entry.keys, entry.values, self._pending[layer] = self._copier.start(entry.keys, entry.values, device)
        entry.device = device
        self.moved_bytes += nbytes

    def prefetch_all(self, device: torch.device) -> None:
        for layer in range(len(self.layers)):
            self.prefetch(layer, device)

    def _wait(self, layer: int) -> None:
        if layer in self._pending:
            self._copier.wait(self._pending.pop(layer), self.layers[layer].keys.device)

    def sync(self) -> None:
        """Make every in-flight layer readable on the current stream (before reading the cache
        outside the model: export, crop)."""
        for layer in list(self._pending):
            self._wait(layer)

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, layer_idx: int, *args, **kwargs):
        device = key_states.device
        if layer_idx < len(self.layers) and self.layers[layer_idx].is_initialized:
            here = self.layers[layer_idx].keys.device
            if device.type != "cpu" and here != device:
                # The model writes layer i on the device: move it, and start the next layers' copies.
                for ahead in range(layer_idx, layer_idx + 1 + self.lookahead):
                    self.prefetch(ahead, device)
            elif device != here:
                # Host K/V spliced into a layer already on the device (a mount after the sinks).
                key_states, value_states = key_states.to(here), value_states.to(here)
            self._wait(layer_idx)
        return super().update(key_states, value_states, layer_idx, *args, **kwargs)

    def crop(self, max_length: int) -> None:
        self.sync()
        super().crop(max_length)


def mount(kv: KV, device: torch.device | str, copier: Copier | None = None, full: KV | None = None) -> DeviceCache:
    """A cache over `kv` for a model on `device`. On CUDA every layer's copy starts now, in layer
    order on a side stream (pinned sources); the model waits per layer. On CPU: views of `kv`.

    `full`: K/V on `device` whose first seats `kv` is (a load's placement, grm/kv/place.py), lent
    to this cache alone: its layers grow into the seats after `kv` in place (ArenaLayer.hold), so
    the first token read does not copy the whole prefix into a new buffer. The buffer is this
    cache's from then on: nothing else may read `full`, or `kv`, once the cache is written to (its
    seats past `kv` are written, and any seat after a crop below it)."""
    device = torch.device(device)
    cache = DeviceCache(copier=copier)
    lend = (full is not None and full.keys.device == device and full.tokens >= kv.tokens
            and kv.keys.data_ptr() == full.keys.data_ptr() and kv.values.data_ptr() == full.values.data_ptr()
            and kv.keys.stride() == full.keys.stride() and kv.values.stride() == full.values.stride())
    for i in range(kv.keys.shape[0]):
        keys, values = kv.keys[i][None], kv.values[i][None]  # [1, kv_heads, tokens, head_dim]
        cache.update(keys[:, :, :0], values[:, :, :0], i)  # creates layer i, empty, on kv's device
        layer = cache.layers[i]
        if lend:
            layer.hold(full.keys[i][None], full.values[i][None], kv.tokens)
        else:
            layer.keys, layer.values = keys, values
    if device.type != "cpu" and kv.keys.device != device:
        cache.prefetch_all(device)
    return cache


def host_to_device_bandwidth(nbytes: int, device: torch.device, repeats: int = 3) -> float:
    """Raw pinned host->device copy rate in bytes/s (best of `repeats`), for comparing mounts to."""
    if not is_accelerator(device):
        raise ValueError("host->device bandwidth is measured on an accelerator only")
    src = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)
    dst = torch.empty(nbytes, dtype=torch.uint8, device=device)
    best = float("inf")
    for _ in range(repeats):
        torch.cuda.synchronize(device)
        t = time.perf_counter()
        dst.copy_(src, non_blocking=True)
        torch.cuda.synchronize(device)
        best = min(best, time.perf_counter() - t)
    return nbytes / best
