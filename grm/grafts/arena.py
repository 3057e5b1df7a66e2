"""The arena: the live cache the model attends over, `[sinks | mounted grafts | live tail]`.

Each mounted graft is re-seated to the seats it takes (one rotation by the seat delta, none when
it sits where it was read) and spliced in per layer, in the order given: callers put the most
relevant graft last, nearest the question. Grafts harvested apart never attended to each other;
`repair` recomputes the first `repair` tokens of each graft in context (EPIC's idea): those
tokens are read by the model after everything mounted before them, and the rest of the graft is
spliced in after them. `blend` (grm/grafts/blend.py) instead recomputes the share of tokens whose
K/V deviate most from a joint read, across all layers, once every graft is in place.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import torch
from transformers import DynamicCache

from grm.dialects import Dialect
from grm.grafts.blend import BlendConfig, blend as blend_spans
from grm.kv import KV, cache_from_kv, reseat_kv
from grm.kv.forward import prefill


@dataclass
class Mount:
    """One graft to place: its K/V as stored (keys at their origin seat) and its token ids.
    `kv` None = no verified payload: its text is read instead (counted as computed)."""

    id: str
    ids: list[int]
    origin_seat: int
    kv: KV | None
    score: float = 0.0


@dataclass
class Arena:
    cache: DynamicCache
    seat: int  # the next free seat
    spans: dict[str, tuple[int, int]] = field(default_factory=dict)  # graft id -> [start, end) seats
    from_memory: int = 0  # tokens spliced in from stored K/V (sinks included)
    computed: int = 0  # tokens the model read to build it (repairs, misses and re-reads)
    reread: list[str] = field(default_factory=list)  # grafts read as text by choice (grm/grafts/reread.py)


def append(cache: DynamicCache, kv: KV) -> None:
    """Splice `kv` onto the end of every layer of `cache`."""
    for layer in range(kv.keys.shape[0]):
        cache.update(kv.keys[layer][None], kv.values[layer][None], layer)


def build(model: torch.nn.Module, dialect: Dialect, sinks: KV, mounts: list[Mount], repair: int = 0,
          blend: BlendConfig | None = None, reread: Callable[[Mount, int], bool] | None = None) -> Arena:
    """`[sinks | mounts...]` in the order given; the tail is the caller's to read at `arena.seat`.
    With `blend`, two or more mounts are then repaired by selective recomputation; the tokens it
    recomputed count as computed, not from memory. `reread(mount, mounts)` True: that graft's text
    is read in place instead of its K/V mounted (a cost decision: grm/grafts/reread.py)."""
    if repair < 0:
        raise ValueError("repair must be >= 0 tokens")
    arena = Arena(cache_from_kv(sinks), sinks.tokens, from_memory=sinks.tokens)
    for m in mounts:
        start = arena.seat
        n = len(m.ids)
        if m.kv is None or (reread is not None and reread(m, len(mounts))):
            prefill(model, arena.cache, m.ids, start)
            arena.computed += n
            if m.kv is not None:
                arena.reread.append(m.id)
        else:
            k = min(repair, n)
            if k:
                prefill(model, arena.cache, m.ids[:k], start)
                arena.computed += k
            if k < n:
                rest = m.kv.slice(k, n) if k else m.kv
                append(arena.cache, reseat_kv(rest, dialect, start - m.origin_seat))
                arena.from_memory += n - k
        arena.seat += n
        arena.spans[m.id] = (start, arena.seat)
    if blend is not None and len(mounts) > 1:
        spans = [arena.spans[m.id] for m in mounts]
        seats = blend_spans(model, arena.cache, spans, [t for m in mounts for t in m.ids], blend)
        stored = [arena.spans[m.id] for m in mounts if m.kv is not None and m.id not in arena.reread]
        fixed = sum(any(a <= s < b for a, b in stored) for s in seats)  # read as text already: computed
        arena.from_memory -= fixed
        arena.computed += fixed
    return arena
