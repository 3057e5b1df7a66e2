"""The graftability self-test, run when the runtime is built.

remountable: read a short probe at seats 0..n-1 and again at d..d+n-1; rotating the first run's
cached keys by d must reproduce the second run's keys (relative error <= tolerance) on every
layer, or the dialect is refused. same_position_only: the probe's keys must *change* when the
probe moves (else the position law is misdescribed), and re-seating must be refused.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from grm.dialects.base import REMOUNTABLE, SAME_POSITION_ONLY, Dialect
from grm.errors import DialectError

PROBE_TEXT = "GRM self-test: the quick brown fox jumps over 13 lazy dogs."
SHIFT = 37
TOLERANCE = 1e-4  # fp32
# 16-bit K/V carry 8 (bf16) or 11 (fp16) mantissa bits, and both probes' activations are rounded
# along the way: a one-rotation re-seat differs from a forward pass by a few ulps of the largest key.
TOLERANCES = {torch.float32: TOLERANCE, torch.float16: 1e-2, torch.bfloat16: 6e-2}


@dataclass(frozen=True)
class SelfTestResult:
    profile: str
    shift: int
    max_rel_error: float  # remountable: rotated vs forward at +shift; else the keys' relative change


@torch.no_grad()
def _probe_keys(model: torch.nn.Module, ids: list[int], start: int) -> list[torch.Tensor]:
    from transformers import DynamicCache

    input_ids = torch.tensor([ids], device=model.device)
    positions = torch.arange(start, start + len(ids), device=model.device)[None]
    out = model(input_ids=input_ids, position_ids=positions, cache=DynamicCache(), use_cache=True, logits_to_keep=1)
    return [layer.keys[0] for layer in out.cache.layers]


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).abs().max() / b.abs().max().clamp_min(1e-12))


def self_test(dialect: Dialect, model: torch.nn.Module, ids: list[int]) -> SelfTestResult:
    """Run the self-test on probe token ids; raise DialectError if the dialect misdescribes the model."""
    if len(ids) < 4:
        raise ValueError("the self-test probe needs at least 4 tokens")
    base = _probe_keys(model, ids, 0)
    moved = _probe_keys(model, ids, SHIFT)
    if len(base) != dialect.n_layers:
        raise DialectError(f"{dialect.family}: model has {len(base)} cache layers, dialect says {dialect.n_layers}")
    if dialect.profile == REMOUNTABLE:
        tolerance = TOLERANCES.get(base[0].dtype, TOLERANCE)
        worst = max(_rel(dialect.reseat(k, i, SHIFT), m) for i, (k, m) in enumerate(zip(base, moved)))
        if worst > tolerance:
            raise DialectError(
                f"{dialect.family}: rotary self-test failed (rotating cached keys by {SHIFT} differs from a "
                f"forward pass there by {worst:.2e} > {tolerance}); this model cannot be re-seated"
            )
        return SelfTestResult(dialect.profile, SHIFT, worst)
    if dialect.profile == SAME_POSITION_ONLY:
        change = max(_rel(k, m) for k, m in zip(base, moved))
        if change < 1e-3:
            raise DialectError(f"{dialect.family}: keys do not depend on position; the absolute law is wrong here")
        try:
            dialect.check_reseat(SHIFT)
        except DialectError:
            return SelfTestResult(dialect.profile, SHIFT, change)
        raise DialectError(f"{dialect.family}: an absolute-position dialect allowed a re-seat")
    return SelfTestResult(dialect.profile, SHIFT, 0.0)
