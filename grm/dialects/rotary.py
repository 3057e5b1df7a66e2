"""Rotary re-positioning of cached keys.

Keys in the cache are already rotated by their position p: k_p = s * R(p) k (HF's half-split
layout, `rotate_half`), where s is the rope's attention scaling. Since R(p + d) = R(d) R(p),
moving a key by d seats is ONE rotation by d, applied to the stored key; the scaling carries
through. Angles are computed in float64 (d * inv_freq can be ~1e4 rad: float32 would lose ~1e-3).
"""

from __future__ import annotations

import torch


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def rotate_keys(keys: torch.Tensor, inv_freq: torch.Tensor, delta: int) -> torch.Tensor:
    """keys [..., tokens, head_dim] rotated by `delta` positions; same dtype as keys."""
    angles = float(delta) * inv_freq.to(keys.device, torch.float64)  # [head_dim // 2]
    emb = torch.cat((angles, angles))  # [head_dim]
    cos, sin = emb.cos(), emb.sin()
    k64 = keys.to(torch.float64)
    return (k64 * cos + rotate_half(k64) * sin).to(keys.dtype)


def rotate_keys_at(keys: torch.Tensor, inv_freq: torch.Tensor, deltas: torch.Tensor) -> torch.Tensor:
    """keys [..., tokens, head_dim], token t rotated by deltas[t] positions (float64 angles)."""
    angles = deltas.to(keys.device, torch.float64)[:, None] * inv_freq.to(keys.device, torch.float64)[None, :]  # [tokens, head_dim // 2]
    emb = torch.cat((angles, angles), dim=-1)  # [tokens, head_dim]
    cos, sin = emb.cos(), emb.sin()
    k64 = keys.to(torch.float64)
    return (k64 * cos + rotate_half(k64) * sin).to(keys.dtype)
