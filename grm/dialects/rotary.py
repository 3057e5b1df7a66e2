"""Rotary re-positioning of cached keys.

Keys in the cache are already rotated by their position p: k_p = s * R(p) k (HF's half-split
layout, `rotate_half`), where s is the rope's attention scaling. Since R(p + d) = R(d) R(p),
moving a key by d seats is ONE rotation by d, applied to the stored key; the scaling carries
through. Angles are computed in float64 (d * inv_freq can be ~1e4 rad: float32 would lose ~1e-3);
the rotation itself in float64 for fp32 keys and in fp32 for 16-bit keys, rounded once to the key's
dtype (`work_dtype`).
"""

from __future__ import annotations

import torch


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def work_dtype(dtype: torch.dtype) -> torch.dtype:
    """What a rotation of `dtype` keys is computed in before its one rounding back: float64 for
    fp32 keys; fp32 for 16-bit keys (exact for their values, and its rounding, 2^-24, is far below
    the 2^-9 or 2^-12 of the one rounding back to the key's dtype)."""
    return torch.float64 if dtype in (torch.float32, torch.float64) else torch.float32


def _rotate(keys: torch.Tensor, angles: torch.Tensor) -> torch.Tensor:
    """keys rotated by float64 `angles` [..., head_dim // 2], computed in `work_dtype`, rounded once."""
    emb = torch.cat((angles, angles), dim=-1)  # [..., head_dim]
    work = work_dtype(keys.dtype)
    cos, sin = emb.cos().to(work), emb.sin().to(work)
    k = keys.to(work)
    return (k * cos + rotate_half(k) * sin).to(keys.dtype)


def rotate_keys(keys: torch.Tensor, inv_freq: torch.Tensor, delta: int) -> torch.Tensor:
    """keys [..., tokens, head_dim] rotated by `delta` positions; same dtype as keys."""
    return _rotate(keys, float(delta) * inv_freq.to(keys.device, torch.float64))  # angles [head_dim // 2]


def rotate_keys_at(keys: torch.Tensor, inv_freq: torch.Tensor, deltas: torch.Tensor) -> torch.Tensor:
    """keys [..., tokens, head_dim], token t rotated by deltas[t] positions (float64 angles)."""
    angles = deltas.to(keys.device, torch.float64)[:, None] * inv_freq.to(keys.device, torch.float64)[None, :]  # [tokens, head_dim // 2]
    return _rotate(keys, angles)
