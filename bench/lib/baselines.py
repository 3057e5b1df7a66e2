"""KIVI-style per-group integer quantization (int8, int4): the baselines the RVQ archive must beat.

KIVI (Liu et al., 2024) quantizes keys per channel and values per token, asymmetric (min/max) with
a scale and a zero point per group:

- keys: for every (head, channel), the `group` tokens [g0, g0 + group) with g0 a multiple of
  `group` from the window's first seat share one scale and zero point (outlier channels of keys
  stay in their own groups);
- values: for every (head, token), each run of `group` consecutive channels shares one scale and
  zero point (the last run of a head is shorter when head_dim is not a multiple of `group`).

Codes: q = clamp(round((x - zero) / scale), 0, 2**bits - 1), x' = q * scale + zero with
zero = min, scale = (max - min) / (2**bits - 1). Scale and zero are stored as float16 and the
round trip uses the float16-rounded numbers, exactly as a reader of the stored codes would.
Here the keys are position-free (before rotary), like every other archived key in GRM; KIVI's
paper quantizes post-rotary keys.

Bytes per token per head (bits b, group G, head_dim D): keys D*b/8 + D*4/G (2 float16 per
channel per G tokens), values D*b/8 + ceil(D/G)*4.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class KiviConfig:
    bits: int  # code width: 8 (int8) or 4 (int4); 2..8 allowed
    group: int = 32  # keys: tokens per per-channel group; values: channels per per-token group

    def __post_init__(self) -> None:
        if not isinstance(self.bits, int) or not 2 <= self.bits <= 8:
            raise ValueError(f"bits must be an integer in [2, 8], got {self.bits!r}")
        if not isinstance(self.group, int) or self.group < 1:
            raise ValueError(f"group must be a positive integer, got {self.group!r}")


def _fake_quant_runs(x: torch.Tensor, levels: int) -> torch.Tensor:
    """Quantize-dequantize x [..., runs, run_len] with one (scale, zero) per run (the last axis)."""
    lo = x.amin(dim=-1, keepdim=True)
    hi = x.amax(dim=-1, keepdim=True)
    zero = lo.to(torch.float16).to(x.dtype)
    scale = ((hi - lo) / levels).to(torch.float16).to(x.dtype)
    safe = torch.where(scale > 0, scale, torch.ones_like(scale))
    q = torch.clamp(torch.round((x - zero) / safe), 0, levels)
    return torch.where(scale > 0, q * scale + zero, zero)


def fake_quant(x: torch.Tensor, dim: int, group: int, bits: int) -> torch.Tensor:
    """Quantize-dequantize x in runs of `group` along `dim`, one (scale, zero) per run and per other index.

    x (float, any shape); the last run along `dim` may be shorter. Returns x's shape and dtype.
    """
    levels = 2**bits - 1
    work = torch.float64 if x.dtype == torch.float64 else torch.float32  # float64 evaluations stay float64
    moved = x.to(work).movedim(dim, -1)  # [..., n]
    n = moved.shape[-1]
    full = n - n % group
    parts = []
    if full:
        runs = moved[..., :full].reshape(*moved.shape[:-1], full // group, group)
        parts.append(_fake_quant_runs(runs, levels).reshape(*moved.shape[:-1], full))
    if full < n:
        parts.append(_fake_quant_runs(moved[..., full:][..., None, :], levels)[..., 0, :])
    return torch.cat(parts, dim=-1).movedim(-1, dim).to(x.dtype)


class KiviQuantizer:
    """A KVQuantizer (grm/archive/quantizer.py): keys per channel over token groups, values per token."""

    def __init__(self, config: KiviConfig) -> None:
        self.config = config

    @property
    def name(self) -> str:
        return f"int{self.config.bits} g{self.config.group}"

    @property
    def group(self) -> int:
        return self.config.group  # key groups span tokens

    def roundtrip(self, layer: int, keys: torch.Tensor, values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """keys, values [kv_heads, tokens, head_dim]; token 0 starts a key group."""
        b, g = self.config.bits, self.config.group
        return fake_quant(keys, dim=1, group=g, bits=b), fake_quant(values, dim=2, group=g, bits=b)

    def archive_bytes_per_token(self, n_layers: int, kv_heads: int, head_dim: int) -> float:
        b, g = self.config.bits, self.config.group
        keys = head_dim * b / 8 + head_dim * 4 / g
        values = head_dim * b / 8 + math.ceil(head_dim / g) * 4
        return n_layers * kv_heads * (keys + values)
