"""Position-free K/V: undo rotary per token, and harvest K/V from text for codebook training.

Keys in the cache are after rotary: token i at seat p_i holds k_i' = R(p_i) k_i (HF half-split
layout, see grm/dialects/rotary.py). The archive quantizes the position-free key k_i = R(-p_i) k_i'
so one codebook serves every seat; an archived key is rotated back to its seat with R(+p_i).
Values carry no position. Angles are computed in float64 (p * inv_freq reaches ~1e4 rad).
"""

from __future__ import annotations

import torch

from grm.dialects import Dialect
from grm.dialects.rotary import rotate_half
from grm.errors import DialectError
from grm.kv import KV, kv_from_cache, new_cache
from grm.kv.forward import prefill


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


def harvest(
    model: torch.nn.Module, dialect: Dialect, windows: list[list[int]], skip: int = 0,
    dtype: torch.dtype = torch.float16,
) -> KV:
    """Position-free K/V of every window read alone from seat 0 (exact forward), concatenated.

    The first `skip` tokens of each window (the sinks, never archived) are left out. Stored in
    `dtype` (float16 by default) to keep training sets small; k-means works in float32.
    Returns KV [layers, kv_heads, sum(len(w) - skip), head_dim].
    """
    parts_k, parts_v = [], []
    for ids in windows:
        if len(ids) <= skip:
            continue
        cache = new_cache()
        prefill(model, cache, ids, 0)
        kv = position_free(kv_from_cache(cache), dialect, torch.arange(len(ids)))
        parts_k.append(kv.keys[:, :, skip:].to(dtype))
        parts_v.append(kv.values[:, :, skip:].to(dtype))
        del cache, kv
    if not parts_k:
        raise ValueError("harvest needs at least one window longer than `skip`")
    return KV(torch.cat(parts_k, dim=2), torch.cat(parts_v, dim=2))
