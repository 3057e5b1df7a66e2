"""Reading tokens into a cache: the one place GRM calls the model's forward pass.

Chunked prefill bounds the transient attention memory on long inputs; the chunking is a fixed
function of the input length, so the same tokens after the same cache always take the same
arithmetic path (the exactness invariant depends on it).
"""

from __future__ import annotations

import torch
from transformers import DynamicCache

from grm.kv.cache import cache_from_kv, kv_from_cache
from grm.kv.payload import KV

PREFILL_CHUNK = 512  # tokens per forward call during prefill


def prefill(model: torch.nn.Module, cache: DynamicCache, ids: list[int], start: int) -> torch.Tensor:
    """Read `ids` at seats start.. into `cache`; return the last position's logits [vocab] (fp32)."""
    if not ids:
        raise ValueError("prefill needs at least one token")
    logits = None
    for a in range(0, len(ids), PREFILL_CHUNK):
        chunk = ids[a : a + PREFILL_CHUNK]
        input_ids = torch.tensor([chunk], device=model.device)
        positions = torch.arange(start + a, start + a + len(chunk), device=model.device)[None]
        out = model(input_ids=input_ids, position_ids=positions, cache=cache, use_cache=True, logits_to_keep=1)
        logits = out.logits[0, -1]
    return logits.float()


def read_after_sinks(model: torch.nn.Module, sinks: KV, ids: list[int]) -> KV:
    """`ids` read alone right after the sinks (nothing else before them): their K/V, seated at
    sinks.tokens.. . How every span is read that is stored to be mounted anywhere (a section, a
    graft) or routed to by its keys (a query's dense key)."""
    cache = cache_from_kv(sinks)
    prefill(model, cache, ids, sinks.tokens)
    return kv_from_cache(cache, sinks.tokens)


def step(model: torch.nn.Module, cache: DynamicCache, token: int, seat: int) -> torch.Tensor:
    """Read one token at `seat`; return its logits [vocab]."""
    out = model(
        input_ids=torch.tensor([[token]], device=model.device), position_ids=torch.tensor([[seat]], device=model.device),
        cache=cache,
        use_cache=True, logits_to_keep=1,
    )
    return out.logits[0, -1].float()
