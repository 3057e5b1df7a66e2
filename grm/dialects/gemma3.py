"""Gemma-3: multi-query attention, a sliding window on most layers, two rotary bases.

Sliding layers use the local base (10,000) and see only the last `sliding_window` tokens; full
layers use the global base (1,000,000, possibly linearly scaled). Both rotate keys before the
cache, so spans re-seat, each layer with its own frequencies.
"""

from __future__ import annotations

import torch

from grm.dialects.base import REMOUNTABLE, Dialect
from grm.dialects.llama import check_static_rope, rope_inv_freq

FAMILIES = ("gemma3_text", "gemma3")


def build(model: torch.nn.Module) -> Dialect:
    cfg = model.config
    rotary = model.model.rotary_emb
    per_type = {}
    for layer_type, params in (cfg.rope_parameters or {}).items():
        if params is not None:
            check_static_rope(str(params.get("rope_type", "default")))
            per_type[layer_type] = rope_inv_freq(rotary, prefix=f"{layer_type}_")
    types = list(cfg.layer_types)
    return Dialect(
        family=cfg.model_type, n_layers=cfg.num_hidden_layers, q_heads=cfg.num_attention_heads,
        kv_heads=cfg.num_key_value_heads, head_dim=cfg.head_dim,
        max_positions=cfg.max_position_embeddings, profile=REMOUNTABLE, position_law="rope",
        inv_freq=tuple(per_type[t] for t in types),
        sliding_window=tuple(cfg.sliding_window if t == "sliding_attention" else None for t in types),
    )
