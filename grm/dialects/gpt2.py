"""GPT-2: learned absolute position embeddings added to the input.

Position is mixed into every hidden state before the first layer, so a cached span is only valid
at the seats it was computed at: same-position restore works, re-seating is refused.
"""

from __future__ import annotations

import torch

from grm.dialects.base import SAME_POSITION_ONLY, Dialect

FAMILIES = ("gpt2",)


def build(model: torch.nn.Module) -> Dialect:
    cfg = model.config
    return Dialect(
        family=cfg.model_type, n_layers=cfg.n_layer, q_heads=cfg.n_head, kv_heads=cfg.n_head,
        head_dim=cfg.n_embd // cfg.n_head, max_positions=cfg.n_positions,
        profile=SAME_POSITION_ONLY, position_law="absolute",
        inv_freq=(None,) * cfg.n_layer, sliding_window=(None,) * cfg.n_layer,
    )
