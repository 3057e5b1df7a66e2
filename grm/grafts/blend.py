"""Composition repair by selective recomputation (CacheBlend's idea, Yao et al. 2024).

Grafts mounted side by side never attended to each other, so their K/V differ from what a joint
read of the same text would hold; the difference grows with depth and is concentrated in few
tokens. `blend` repairs an arena `[sinks | graft 1 | ... | graft n]` in place:
1. select: the mounted tokens are read jointly through the first `check_layer + 1` layers only
   (the model's layer count lowered for that one call), and each token's K/V at `check_layer` is
   compared with the mounted one (L2 distance of keys and values, each over its own mean norm);
   the `ratio` of tokens that deviate most are chosen (at least one per graft after the first:
   a graft's start is where it meets its predecessor);
2. recompute: the chosen tokens are read again at their own seats, across all layers, in one
   forward call with a 4-D mask: token at seat s attends to every arena seat before s (stale or
   not) except the chosen ones, whose fresh K/V from this same call it attends to instead (the
   chosen tokens at seats <= s). Their new K/V replace the mounted ones in every layer.
Cost: a (check_layer + 1) / layers share of a joint read for selection, plus `ratio` of one for the
recompute; at ratio 1 the result equals the joint read (tested). The first graft after the sinks
was read exactly there, so its tokens are never chosen.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers import DynamicCache

from grm.kv import cache_from_kv, kv_from_cache


@dataclass(frozen=True)
class BlendConfig:
    ratio: float = 0.15  # share of the mounted tokens (after the first graft) recomputed across all layers
    check_layer: int = 1  # the layer whose K/V deviation picks them (0 is position-only: no deviation)

    def __post_init__(self) -> None:
        if not 0 < self.ratio <= 1:
            raise ValueError("blend ratio must be in (0, 1]")
        if self.check_layer < 0:
            raise ValueError("check_layer must be >= 0")


def _layers_config(model: torch.nn.Module):
    cfg = model.config
    return getattr(cfg, "text_config", None) or cfg


def joint_kv_at(model: torch.nn.Module, cache: DynamicCache, start: int, ids: list[int], layer: int):
    """Keys and values at `layer` of `ids` read jointly at seats start.., after cache[:start]
    (the sinks), computing only layers 0..layer. [kv_heads, tokens, head_dim] each."""
    cfg = _layers_config(model)
    full = cfg.num_hidden_layers
    probe = cache_from_kv(kv_from_cache(cache, 0, start))
    cfg.num_hidden_layers = min(layer + 1, full)
    try:
        with torch.no_grad():
            model(input_ids=torch.tensor([ids], device=model.device),
                  position_ids=torch.arange(start, start + len(ids), device=model.device)[None],
                  cache=probe, use_cache=True, logits_to_keep=1)
    finally:
        cfg.num_hidden_layers = full
    entry = probe.layers[layer]
    return entry.keys[0, :, start:], entry.values[0, :, start:]


def select(model: torch.nn.Module, cache: DynamicCache, spans: list[tuple[int, int]], ids: list[int],
           config: BlendConfig) -> list[int]:
    """Seats to recompute: the most deviating `ratio` of the tokens after the first span, and
    the first token of every later span. `ids` are the tokens of all spans, in seat order."""
    start, end = spans[0][0], spans[-1][1]
    keys, values = joint_kv_at(model, cache, start, ids, config.check_layer)
    entry = cache.layers[config.check_layer]
    mk, mv = entry.keys[0, :, start:end], entry.values[0, :, start:end]
    dk = (keys.float() - mk.float()).norm(dim=(0, 2)) / mk.float().norm(dim=(0, 2)).mean()
    dv = (values.float() - mv.float()).norm(dim=(0, 2)) / mv.float().norm(dim=(0, 2)).mean()
    dev = dk + dv  # [tokens]
    first_end = spans[0][1] - start
    dev[:first_end] = -1.0  # the first graft was read right after the sinks: nothing to repair
    n = max(1, round(config.ratio * (end - start - first_end)))
    chosen = set((torch.topk(dev, min(n, end - start - first_end)).indices + start).tolist())
    chosen |= {a for a, _ in spans[1:]}
    return sorted(chosen)


def recompute(model: torch.nn.Module, cache: DynamicCache, seats: list[int], ids_at: dict[int, int]) -> None:
    """Read the tokens at `seats` again across all layers, attending to the arena as it is except
    for the other chosen seats (their fresh K/V instead), and write their K/V in place."""
    if hasattr(cache, "sync"):
        cache.sync()
    length = cache.get_seq_length()
    q = torch.tensor(seats)
    dtype = next(model.parameters()).dtype
    mask = _mask(q, length, None, dtype).to(model.device)
    cfg = _layers_config(model)
    if "sliding_attention" in (getattr(cfg, "layer_types", None) or ()):
        # a model with sliding-window layers takes one mask per layer type (Gemma 3)
        sliding = _mask(q, length, cfg.sliding_window, dtype).to(model.device)
        mask = {"full_attention": mask, "sliding_attention": sliding}
    with torch.no_grad():
        model(input_ids=torch.tensor([[ids_at[s] for s in seats]], device=model.device),
              position_ids=q[None].to(model.device), cache=cache, use_cache=True, logits_to_keep=1,
              attention_mask=mask)
    for entry in cache.layers:  # move the fresh K/V (appended at the end) to their seats
        keys, values = entry.keys[:, :, :length].clone(), entry.values[:, :, :length].clone()
        keys[:, :, q] = entry.keys[:, :, length:]
        values[:, :, q] = entry.values[:, :, length:]
        entry.keys, entry.values = keys, values  # new tensors: the mounted payloads are views, never written


def _mask(q: torch.Tensor, length: int, window: int | None, dtype: torch.dtype) -> torch.Tensor:
    """[1, 1, chosen, length + chosen] additive mask: an arena seat before the query's seat that is
    not itself recomputed, then the chosen tokens up to and including the query itself; within
    `window` seats of the query where the layer slides."""
    old = torch.arange(length)
    allow_old = (old[None, :] < q[:, None]) & ~torch.isin(old, q)[None, :]
    allow_new = q[None, :] <= q[:, None]
    if window is not None:
        allow_old &= q[:, None] - old[None, :] < window
        allow_new &= q[:, None] - q[None, :] < window
    allowed = torch.cat([allow_old, allow_new], dim=1)
    return torch.zeros(allowed.shape, dtype=dtype).masked_fill(~allowed, torch.finfo(dtype).min)[None, None]


def blend(model: torch.nn.Module, cache: DynamicCache, spans: list[tuple[int, int]], ids: list[int],
          config: BlendConfig = BlendConfig()) -> list[int]:
    """Repair an arena's mounted spans (seat order, contiguous, `ids` their tokens) in place;
    returns the seats recomputed. One span: nothing to repair."""
    if len(spans) < 2:
        return []
    if sum(b - a for a, b in spans) != len(ids):
        raise ValueError("blend needs the ids of every span")
    seats = select(model, cache, spans, ids, config)
    start = spans[0][0]
    recompute(model, cache, seats, {s: ids[s - start] for s in seats})
    return seats
