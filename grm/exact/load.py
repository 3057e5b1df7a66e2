"""Loading a run of stored blocks at the machine's bandwidth, fail-closed.

`load_blocks` fills one K/V of the sinks plus a run of chain blocks (grm/kv/place.py says where
it lives: host memory on a CPU, device memory on CUDA). A pool of worker threads sized to the
machine takes the blocks; for each block a worker
1. asks the host tier (grm/exact/tier.py) for it: a hit is K/V verified when it was read;
2. else reads it straight into the placement's buffers (`ScatterReads.read_payload_into`): the
   header is parsed and its bound fields (identity, tenant, fingerprint, parent, seat, text, ids),
   dtype and geometry checked before a byte of tensor data is read, and the size and SHA-256 of
   everything read checked before the block counts as read;
3. else (an encrypted or compressed store, a backend without scatter reads, or a file the fast
   path refused) reads it as verified bytes (`read_payload`: authenticated and re-hashed by the
   store) and checks the same fields.
File reads and SHA-256 release the GIL, so reads and hashing of different blocks run on all cores.
The loading thread commits each verified block to the placement as it completes (on CUDA: its
host->device copy starts while the workers read on), and at the end keeps newly read blocks in
the tier. Nothing of a block is used before its whole file verified; a block that fails is a
miss and ends the run there (the caller recomputes it and everything after it).
"""

from __future__ import annotations

import json
import os
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Callable

import torch

from grm.exact.tier import HostTier, TierKey
from grm.kv import KV
from grm.kv.payload import parse_header
from grm.kv.place import Placement
from grm.store import Record
from grm.store.backend import ScatterReads, StoreBackend

TIER, READ, BYTES, MISS = "tier", "read", "bytes", "miss"  # how a block was served (or not)


def read_workers(threads: int | None = None) -> int:
    """Worker threads for loads: `threads` if given, else every core this process may use."""
    if threads:
        return threads
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


@dataclass(frozen=True)
class BlockRead:
    """One block to load: its row, the fields its payload must be bound to, its seats."""

    record: Record
    want: dict[str, str]  # bound metadata the payload header must carry (ExactMemory.bind)
    t0: int  # first seat of the block in the prefix
    t1: int  # one past its last seat


@dataclass
class Loaded:
    kv: KV  # the sinks and the first `served` blocks, on the placement's device
    served: int  # blocks served, from the first on
    failure: tuple[int, str] | None = None  # (index, why) of the block that ended the run
    ways: dict[str, int] = field(default_factory=dict)  # served blocks by how: tier, read, bytes
    # wall seconds: "fetch" (the parallel read + verify + place), of it "commit" (the loading thread
    # placing verified blocks), "keep" (copies into the host tier)
    seconds: dict[str, float] = field(default_factory=dict)
    full: KV | None = None  # the placement's K/V `kv` is the first seats of (room after it)


def check(meta: dict, shape: tuple[int, ...], dtype: torch.dtype, want: dict[str, str],
          geometry: tuple[int, int, int, int], model_dtype: torch.dtype) -> str | None:
    """Why a payload's header does not fit the block it is loaded as, or None if it does."""
    for key, value in want.items():
        if meta.get(key) != value:
            return f"bound {key} does not match"
    if tuple(shape) != geometry or dtype != model_dtype:
        return f"geometry {tuple(shape)} {dtype} does not fit the model"
    return None


def parse_checked(data: bytes, want: dict[str, str], geometry: tuple[int, int, int, int],
                  model_dtype: torch.dtype) -> tuple[KV | None, str]:
    """(K/V, "") of verified payload bytes that fit the block, else (None, why not)."""
    try:
        kv, meta = KV.from_bytes(data)
    except (ValueError, KeyError, json.JSONDecodeError) as exc:
        return None, f"unreadable payload: {exc}"
    why = check(meta, kv.keys.shape, kv.keys.dtype, want, geometry, model_dtype)
    return (None, why) if why else (kv, "")


def load_blocks(store: StoreBackend, reads: list[BlockRead], sinks: KV, placement: Placement,
                tier: HostTier | None, tier_key: Callable[[BlockRead], TierKey],
                geometry: Callable[[BlockRead], tuple[int, int, int, int]], model_dtype: torch.dtype,
                workers: int) -> Loaded:
    """Load `reads` (consecutive blocks after the sinks) into `placement`. `tier_key(read)` names
    a block in the tier; `geometry(read)` is its expected [layers, kv_heads, tokens, head_dim]."""
    t_start = time.perf_counter()
    placement.put(0, sinks.tokens, sinks)

    def cached(read: BlockRead) -> bool:  # only a live row's payload is looked up or kept
        return tier is not None and read.record.state == "active" and read.record.payload is not None

    def fetch(read: BlockRead) -> tuple[str, KV | str]:
        if cached(read):
            kv = tier.get(tier_key(read))
            if kv is not None:
                return TIER, kv
        shape = geometry(read)
        if isinstance(store, ScatterReads):
            reserved = placement.reserve(read.t0, read.t1)

            def plan(header: bytes) -> list[memoryview] | None:
                try:
                    h = parse_header(header)
                except ValueError:
                    return None
                why = check(h.meta, h.shape, h.torch_dtype, read.want, shape, model_dtype)
                return reserved.buffers if why is None else None

            if store.read_payload_into(read.record, plan):
                return READ, reserved.kv
        data = store.read_payload(read.record)
        if data is None:
            return MISS, "payload missing or digest mismatch"
        kv, why = parse_checked(data, read.want, shape, model_dtype)
        return (BYTES, kv) if kv is not None else (MISS, why)

    results: list[tuple[str, KV | str | None] | None] = [None] * len(reads)
    end = len(reads)  # blocks at or after the first failure are not needed
    committed = 0.0  # seconds the loading thread spent placing blocks (on CUDA: starting their copies)
    with ThreadPoolExecutor(max_workers=max(1, min(workers, len(reads)))) as pool:
        pending = {pool.submit(fetch, r): i for i, r in enumerate(reads)}
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for fut in done:
                i = pending.pop(fut)
                how, got = results[i] = fut.result()
                if how == MISS:
                    end = min(end, i)
                    for later, j in list(pending.items()):
                        if j > i and later.cancel():
                            del pending[later]
                elif i < end:
                    read, t = reads[i], time.perf_counter()
                    (placement.commit if how == READ else placement.put)(read.t0, read.t1, got)
                    committed += time.perf_counter() - t
                    if how == TIER or not cached(read):
                        results[i] = (how, None)  # a staging buffer goes back to its pool now
    t_fetch = time.perf_counter()
    served = next((i for i, r in enumerate(results) if r is None or r[0] == MISS), len(reads))
    ways = {TIER: 0, READ: 0, BYTES: 0}
    for how, _got in results[:served]:
        ways[how] += 1
    if tier is not None:
        for read, (how, got) in zip(reads[:served], results[:served]):
            if got is not None:  # read now (a tier hit is already there)
                tier.put(tier_key(read), placement.keep(got))
    failure = (served, results[served][1]) if served < len(reads) and results[served] is not None else None
    tokens = reads[served - 1].t1 if served else sinks.tokens
    return Loaded(placement.result(tokens), served, failure, ways,
                  {"fetch": t_fetch - t_start, "commit": committed, "keep": time.perf_counter() - t_fetch},
                  full=placement.full)
