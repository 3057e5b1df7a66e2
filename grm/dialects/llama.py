"""Llama-like families: rotary positions on every layer, grouped-query attention (GQA/MQA).

SmolLM2, Llama, Mistral, Qwen2/3 share this law: keys are rotated by the full-attention rotary map
before they enter the cache, so spans can be re-seated anywhere (remountable). What differs:
Qwen3 normalizes q and k per head (RMS norm) *before* the rotation, so the cached keys are
still plain rotated vectors and re-seat the same way; Mistral attends within `sliding_window`
on every layer when that is set; Qwen2/3 name a window per layer in `layer_types` (only with
`use_sliding_window`). The self-test checks each family on the model itself.
"""

from __future__ import annotations

import torch

from grm.dialects.base import REMOUNTABLE, Dialect
from grm.errors import DialectError

FAMILIES = ("llama", "mistral", "qwen2", "qwen3")


def rope_inv_freq(rotary_module: torch.nn.Module, prefix: str = "") -> torch.Tensor:
    """The inverse frequencies the model itself uses, as float64 (the angles are float64 later)."""
    inv = getattr(rotary_module, f"{prefix}inv_freq", None)
    if inv is None:
        raise DialectError("the model's rotary embedding exposes no inverse frequencies")
    return inv.detach().to("cpu", torch.float64).clone()


def check_static_rope(rope_type: str) -> None:
    if "dynamic" in rope_type:
        raise DialectError(f"rope type {rope_type!r} changes frequencies with length: cannot re-seat exactly")


def build(model: torch.nn.Module) -> Dialect:
    cfg = model.config
    rope = getattr(cfg, "rope_parameters", None) or {}
    check_static_rope(str(rope.get("rope_type", "default")))
    inv = rope_inv_freq(model.model.rotary_emb)
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    return Dialect(
        family=cfg.model_type, n_layers=cfg.num_hidden_layers, q_heads=cfg.num_attention_heads,
        kv_heads=cfg.num_key_value_heads, head_dim=head_dim,
        max_positions=cfg.max_position_embeddings, profile=REMOUNTABLE, position_law="rope",
        inv_freq=(inv,) * cfg.num_hidden_layers, sliding_window=_windows(cfg),
    )


def _windows(cfg: object) -> tuple[int | None, ...]:
    """Per layer: the attention window in tokens, or None (full attention)."""
    n, window = cfg.num_hidden_layers, getattr(cfg, "sliding_window", None)
    if cfg.model_type == "mistral":  # transformers masks every layer to the window when it is set
        return (window,) * n
    if not getattr(cfg, "use_sliding_window", False) or window is None:
        return (None,) * n
    types = getattr(cfg, "layer_types", None) or ["sliding_attention"] * n
    return tuple(window if t == "sliding_attention" else None for t in types)
