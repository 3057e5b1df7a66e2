"""Position-free K/V: undo rotary per token, and harvest K/V from text for codebook training.

Keys in the cache are after rotary: token i at seat p_i holds k_i' = R(p_i) k_i (HF half-split
layout, see grm/dialects/rotary.py). The archive quantizes the position-free key k_i = R(-p_i) k_i'
so one codebook serves every seat; an archived key is rotated back to its seat with R(+p_i).
Values carry no position. Angles are computed in float64 (p * inv_freq reaches ~1e4 rad).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from grm.dialects import Dialect
from grm.dialects.rotary import rotate_half
from grm.errors import DialectError
from grm.kv import KV, kv_from_cache, new_cache


def rotate_per_token(keys: torch.Tensor, inv_freq: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """keys [..., tokens, head_dim] with token i rotated by positions[i] (any sign); keeps the dtype.

    positions [tokens] (integers; negative undoes a rotation). One rotation per token, float64.
    """
    angles = positions.to(torch.float64)[:, None] * inv_freq.to(torch.float64)[None, :]  # [tokens, head_dim/2]
    emb = torch.cat((angles, angles), dim=-1)  # [tokens, head_dim]
    k64 = keys.to(torch.float64)
    return (k64 * emb.cos() + rotate_half(k64) * emb.sin()).to(keys.dtype)


def layer_inv_freq(dialect: Dialect, layer: int) -> torch.Tensor:
    """The rotary inverse frequencies of `layer`; DialectError if the layer has no rotary map."""
    inv = dialect.inv_freq[layer]
    if inv is None:
        raise DialectError(f"layer {layer} of {dialect.family} has no rotary map: keys are not position-free")
    return inv


def position_free(kv: KV, dialect: Dialect, positions: torch.Tensor) -> KV:
    """kv (keys after rotary at `positions` [tokens]) with every key rotated back to seat 0."""
    keys = torch.stack([
        rotate_per_token(kv.keys[layer], layer_inv_freq(dialect, layer), -positions)
        for layer in range(kv.keys.shape[0])
    ])
    return KV(keys, kv.values)


@dataclass(frozen=True)
class Harvest:
    kv: KV  # position-free K/V [layers, kv_heads, tokens, head_dim]
    # [layers, kv_heads, head_dim] mean squared query per channel over the kv head's query heads,
    # averaged over each rotary pair (c, c + head_dim/2): invariant to the rotation, so it is the
    # query energy any relative seat sees. What bench/lib/metric.py weighs key errors by.
    query_energy: torch.Tensor


def _query_module(layer: torch.nn.Module) -> torch.nn.Module:
    attn = layer.self_attn
    norm = getattr(attn, "q_norm", None)  # gemma3 / qwen3 normalize queries after the projection
    return attn.q_proj if norm is None else norm  # the last step before rotary


def harvest(
    model: torch.nn.Module, dialect: Dialect, windows: list[list[int]], skip: int = 0,
    dtype: torch.dtype = torch.float16,
) -> Harvest:
    """Position-free K/V (and query energy) of every window read alone from seat 0 (exact forward).

    The first `skip` tokens of each window (the sinks, never archived) are left out of both. K/V
    are stored in `dtype` (float16 by default) to keep training sets small; k-means works in
    float32. K/V: [layers, kv_heads, sum(len(w) - skip), head_dim].
    """
    heads, dim = dialect.q_heads, dialect.head_dim
    energy = torch.zeros(dialect.n_layers, heads, dim, dtype=torch.float64)
    counted = 0

    def hook(index: int):
        def fn(_module, _inputs, output):
            q = output.detach().reshape(-1, heads, dim)[skip:]  # [tokens, q_heads, head_dim]
            energy[index] += q.double().pow(2).sum(0)
        return fn

    layers = model.model.layers
    handles = [_query_module(layers[i]).register_forward_hook(hook(i)) for i in range(dialect.n_layers)]
    parts_k, parts_v = [], []
    try:
        for ids in windows:
            if len(ids) <= skip:
                continue
            cache = new_cache()
            _read_window(model, cache, ids)
            counted += len(ids) - skip
            kv = position_free(kv_from_cache(cache), dialect, torch.arange(len(ids)))
            parts_k.append(kv.keys[:, :, skip:].to(dtype))
            parts_v.append(kv.values[:, :, skip:].to(dtype))
            del cache, kv
    finally:
        for h in handles:
            h.remove()
    if not parts_k:
        raise ValueError("harvest needs at least one window longer than `skip`")
    group = heads // dialect.kv_heads
    e = (energy / counted).reshape(dialect.n_layers, dialect.kv_heads, group, dim).mean(2)
    half = dim // 2
    pair = (e[..., :half] + e[..., half:]) / 2
    return Harvest(KV(torch.cat(parts_k, dim=2), torch.cat(parts_v, dim=2)),
                   torch.cat((pair, pair), dim=-1).to(torch.float32))


def _read_window(model: torch.nn.Module, cache: object, ids: list[int]) -> None:
    """Read a window in one forward pass at seats 0.. (the query hook sees each token once, in order)."""
    device = next(model.parameters()).device
    model(input_ids=torch.tensor([ids], device=device), position_ids=torch.arange(len(ids), device=device)[None],
          cache=cache, use_cache=True, logits_to_keep=1)
