"""Where a loaded prefix's K/V lands: straight in its final place, in reused memory.

A prefix of stored blocks is loaded into one K/V of its full geometry, `[layers, kv_heads,
tokens, head_dim]` keys and values, on the model's device. A `Placement` owns that K/V for one
load. Lifecycle (grm/exact/load.py drives it):
1. `placement_for(device, shape, dtype, buffers, room)` allocates the final K/V once per load,
   with `room` seats after the prefix's (`full`): the arena mounted over the result reads the
   rest of the prompt into them in place (grm/kv/device.py `mount(..., full)`) instead of
   copying the whole prefix into a buffer of its own before its first token.
2. Per block, from any worker thread, `reserve(t0, t1)` hands out host buffers to read the block's
   tensor bytes into (file order: every (layer, head) run of keys, then of values), and the KV
   they form; the caller reads and verifies them (nothing is used before the whole file verifies).
3. Back on the loading thread, a verified block is made part of the result: `commit(t0, t1, kv)`
   for a reserved one, `put(t0, t1, kv)` for K/V verified elsewhere (the host tier, a payload read
   as bytes). `keep(kv)` gives a copy that outlives the load (what the host tier holds).
4. `result(tokens)` once: the K/V of the first `tokens` seats, ready for the model's stream.

`HostPlacement` (CPU, or any device without streams): the final K/V is host memory taken from a
`HostBuffers` pool and the reserved buffers are its own (layer, head) runs, so a read lands where
the model reads it and `commit` has nothing to do. `DevicePlacement` (CUDA): the final K/V is
device memory; each block is read into its own page-locked host buffer (torch's caching host
allocator hands freed ones out again once their copies have completed: no per-block pinning of
pageable memory, no fresh page-locked allocation once the pool is warm), and `commit` copies it
host->device on a side stream and scatters it into place on the device, while the workers go on
reading the next blocks; `result` makes the model's stream wait for those copies.

`HostBuffers` reuses host memory across loads: writing into fresh memory faults every page in
(2 GB/s on the 2-core CPU here, 11-12 GB/s into memory already touched), and new buffers come
from torch's allocator, without numpy's huge-page advice (`fresh`). A buffer is handed out
again only when no tensor views it any more (the pool holds a weak reference to the view it lent).
"""

from __future__ import annotations

import math
import threading
import weakref
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import torch

from grm.kv.device import is_accelerator, pinned
from grm.kv.payload import KV

MAX_POOLED = 4  # host buffers a pool keeps for reuse (in use or free)


def fresh(nbytes: int) -> np.ndarray:
    """`nbytes` of new host memory, as a uint8 array. Taken from torch's allocator, not numpy's:
    numpy advises the kernel to back large arrays with huge pages (MADV_HUGEPAGE), and where
    transparent huge pages are `madvise` (the default of many distributions) a fault on such
    memory may stall on compaction. A load writes its buffer in once, so that stall lands in the
    time to first token: Qwen2.5-1.5B at 8k tokens (473 MB loaded), new process, median of 6:
    3.94 s from numpy's allocator, 2.20 s from torch's (bench/results/host-buffers-qwen2.5-coder-1.5b-8k.md)."""
    return torch.empty(nbytes, dtype=torch.uint8).numpy()


class HostBuffers:
    """Reused host memory for loads (thread-safe). `take(nbytes)` returns a uint8 tensor of at
    least `nbytes`, reusing a free buffer of the pool at most twice that size, else a new one.

    A buffer is lent as a numpy view of it that the tensor's storage holds (torch.from_numpy keeps
    the array it was given alive); the pool keeps only a weak reference to that view, so the
    buffer is free again exactly when the last tensor or array over it is gone."""

    def __init__(self, keep: int = MAX_POOLED) -> None:
        self.keep = keep
        self._pool: list[tuple[np.ndarray, weakref.ref]] = []  # (buffer, its last loan), oldest first
        self._lock = threading.Lock()
        self.reuses = 0  # takes served by a buffer already touched
        self.allocations = 0

    def take(self, nbytes: int) -> torch.Tensor:
        with self._lock:
            free = [a for a, loan in self._pool
                    if loan() is None and nbytes <= a.nbytes <= 2 * max(nbytes, 1)]
            if free:
                array = min(free, key=lambda a: a.nbytes)
                self._pool = [(a, loan) for a, loan in self._pool if a is not array]
                self.reuses += 1
            else:
                array = fresh(max(nbytes, 1))
                self.allocations += 1
            view = array[:nbytes]
            self._pool.append((array, weakref.ref(view)))
            del self._pool[: max(0, len(self._pool) - self.keep)]  # the oldest are let go
            return torch.from_numpy(view)


@dataclass(frozen=True)
class Reserved:
    """Host buffers for one block's tensor bytes (file order) and the K/V they form once read."""

    buffers: list[memoryview]
    kv: KV  # [layers, kv_heads, t1 - t0, head_dim] each


class Placement(Protocol):
    """One load's destination: `reserve` (any thread), then `commit` or `put` per verified block
    and `keep` for the host tier (the loading thread), then `result` once (module docstring).
    `full`: the K/V `result` is the first seats of, `room` seats longer than the prefix."""

    full: KV

    def reserve(self, t0: int, t1: int) -> Reserved: ...

    def commit(self, t0: int, t1: int, kv: KV) -> None: ...

    def put(self, t0: int, t1: int, kv: KV) -> None: ...

    def keep(self, kv: KV) -> KV: ...

    def result(self, tokens: int) -> KV: ...


def _pair(flat: torch.Tensor, shape: tuple[int, int, int, int], dtype: torch.dtype) -> KV:
    """Keys then values laid out back to back in the uint8 tensor `flat`."""
    n = math.prod(shape) * dtype.itemsize
    return KV(flat[:n].view(dtype).view(shape), flat[n: 2 * n].view(dtype).view(shape))


def _with_room(shape: tuple[int, int, int, int], room: int) -> tuple[int, int, int, int]:
    layers, heads, tokens, dim = shape
    return layers, heads, tokens + max(0, room), dim


class HostPlacement:
    """The final K/V in host memory from `buffers`; blocks are read straight into it."""

    def __init__(self, shape: tuple[int, int, int, int], dtype: torch.dtype, buffers: HostBuffers,
                 room: int = 0) -> None:
        self.shape, self.dtype = _with_room(shape, room), dtype
        self._flat = buffers.take(2 * math.prod(self.shape) * dtype.itemsize)
        self._bytes = self._flat.numpy()
        self.full = _pair(self._flat, self.shape, dtype)

    def reserve(self, t0: int, t1: int) -> Reserved:
        layers, heads, capacity, dim = self.shape
        row = dim * self.dtype.itemsize  # bytes of one token of one head
        half = layers * heads * capacity * row
        runs = []
        for base in (0, half):  # keys, then values: each (layer, head) run of t1 - t0 tokens
            for lh in range(layers * heads):
                start = base + (lh * capacity + t0) * row
                runs.append(memoryview(self._bytes[start: start + (t1 - t0) * row]))
        return Reserved(runs, self.full.slice(t0, t1))

    def commit(self, t0: int, t1: int, kv: KV) -> None:
        return None  # read in place

    def put(self, t0: int, t1: int, kv: KV) -> None:
        self.full.keys[:, :, t0:t1].copy_(kv.keys)
        self.full.values[:, :, t0:t1].copy_(kv.values)

    def keep(self, kv: KV) -> KV:
        return KV(kv.keys.clone(memory_format=torch.contiguous_format),
                  kv.values.clone(memory_format=torch.contiguous_format))

    def result(self, tokens: int) -> KV:
        return self.full.slice(0, tokens)


class DevicePlacement:
    """The final K/V on a CUDA device; each block staged in page-locked memory and copied on a
    side stream (host->device as one run, then scattered into its seats on the device)."""

    def __init__(self, shape: tuple[int, int, int, int], dtype: torch.dtype, device: torch.device,
                 room: int = 0) -> None:
        self.shape, self.dtype, self.device = _with_room(shape, room), dtype, device
        self.full = KV(torch.empty(self.shape, dtype=dtype, device=device),
                       torch.empty(self.shape, dtype=dtype, device=device))
        self.stream = torch.cuda.Stream(device)
        self.stream.wait_stream(torch.cuda.current_stream(device))  # the new memory is free on the main stream first
        for t in (self.full.keys, self.full.values):
            t.record_stream(self.stream)  # dropped before `result` (an error): not reused under the copies

    def reserve(self, t0: int, t1: int) -> Reserved:
        layers, heads, _tokens, dim = self.shape
        block = (layers, heads, t1 - t0, dim)
        flat = torch.empty(2 * math.prod(block) * self.dtype.itemsize, dtype=torch.uint8, pin_memory=True)
        return Reserved([memoryview(flat.numpy())], _pair(flat, block, self.dtype))

    def commit(self, t0: int, t1: int, kv: KV) -> None:
        self.put(t0, t1, kv)

    def put(self, t0: int, t1: int, kv: KV) -> None:
        with torch.cuda.stream(self.stream):
            # From page-locked memory the copy is asynchronous (and torch's host allocator keeps
            # the buffer from reuse until it completes); from pageable memory it is staged.
            keys = kv.keys.to(self.device, non_blocking=True)
            values = kv.values.to(self.device, non_blocking=True)
            self.full.keys[:, :, t0:t1].copy_(keys)
            self.full.values[:, :, t0:t1].copy_(values)

    def keep(self, kv: KV) -> KV:
        return pinned(KV(kv.keys.contiguous(), kv.values.contiguous()))

    def result(self, tokens: int) -> KV:
        torch.cuda.current_stream(self.device).wait_stream(self.stream)
        return self.full.slice(0, tokens)


def placement_for(device: torch.device | str, shape: tuple[int, int, int, int], dtype: torch.dtype,
                  buffers: HostBuffers, room: int = 0) -> Placement:
    """The placement of a prefix of `shape` for a model on `device`, `room` seats left after it."""
    device = torch.device(device)
    if is_accelerator(device) and torch.cuda.is_available():
        return DevicePlacement(shape, dtype, device, room)
    return HostPlacement(shape, dtype, buffers, room)
