"""The Dialect interface: what GRM knows about one model family.

Lifecycle: `dialect_for(model)` builds the dialect from the model's config when the runtime is
built; the runtime then calls `self_test(model, tokenizer)` once (a dialect that fails is refused
with DialectError; a passing result is kept per model identity and dialect source,
`kept_self_test`) and afterwards `reseat(keys, layer, delta)` for every mounted span and
`check_reseat(delta)` before any mount at a seat other than the original one. Dialects know
nothing of storage.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from grm.dialects.rotary import rotate_keys
from grm.errors import DialectError

REMOUNTABLE = "remountable"  # rotary / relative position law: re-seat anywhere
SAME_POSITION_ONLY = "same_position_only"  # learned / absolute positions: restore at original seats
SINGLE_PREFIX_ONLY = "single_prefix_only"  # recurrent state
PROFILES = (REMOUNTABLE, SAME_POSITION_ONLY, SINGLE_PREFIX_ONLY)


@dataclass(frozen=True)
class Dialect:
    family: str  # transformers model_type
    n_layers: int
    q_heads: int
    kv_heads: int
    head_dim: int
    max_positions: int
    profile: str  # one of PROFILES
    position_law: str  # e.g. "rope", "absolute"; part of the model identity
    # Per layer: rotary inverse frequencies [head_dim // 2] (float64), or None (no rotary).
    inv_freq: tuple[torch.Tensor | None, ...]
    # Per layer: sliding window in tokens, or None for full attention.
    sliding_window: tuple[int | None, ...]

    def __post_init__(self) -> None:
        if self.profile not in PROFILES:
            raise ValueError(f"unknown graftability profile {self.profile!r}")
        if len(self.inv_freq) != self.n_layers or len(self.sliding_window) != self.n_layers:
            raise ValueError("per-layer facts must cover every layer")
        if self.q_heads % self.kv_heads:
            raise ValueError("q_heads must be a multiple of kv_heads")

    @property
    def bytes_per_token(self) -> int:
        """K+V bytes per token in fp32 over all layers."""
        return self.n_layers * 2 * self.kv_heads * self.head_dim * 4

    def check_reseat(self, delta: int) -> None:
        """Raise DialectError if moving a span by `delta` seats is not allowed by the position law."""
        if delta != 0 and self.profile != REMOUNTABLE:
            raise DialectError(
                f"{self.family} uses {self.position_law} positions ({self.profile}): its cache cannot be "
                f"re-seated (asked to move by {delta}); restore only at the original seats"
            )

    def reseat(self, keys: torch.Tensor, layer: int, delta: int) -> torch.Tensor:
        """Keys of `layer` [kv_heads, tokens, head_dim] moved by `delta` seats: one rotation, none at 0."""
        self.check_reseat(delta)
        if delta == 0:
            return keys  # invariant 3: a graft at its own seat is not rotated at all
        inv_freq = self.inv_freq[layer]
        if inv_freq is None:
            raise DialectError(f"layer {layer} of {self.family} has no rotary map to re-seat with")
        return rotate_keys(keys, inv_freq, delta)
