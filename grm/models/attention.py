"""The attention kernel GRM's models run: transformers' SDPA, except where it copies K/V.

A model with fewer K/V heads than query heads (grouped-query attention: Qwen2.5-1.5B has 12
query heads over 2 K/V heads, SmolLM2-135M 9 over 3) reads several tokens after a cache with a
mask: every prefill chunk after the first, and a question read after mounted K/V. On a CPU,
transformers' SDPA then copies every cached K/V head once per query head that shares it
(`repeat_kv`) before calling the kernel, per layer and per forward call, because it trusts
`enable_gqa` only where no mask is given. Torch's CPU kernel takes `enable_gqa` with a mask,
so here, and only there, the kernel is called with it and nothing is copied. Every other case
(no mask, one query token, an accelerator, softcapping or a position bias) is transformers' own.

Measured: the same outputs to the bit (logits and every K/V of a chunked read, fp32 and bf16;
tests/models/test_attention.py), so exactness and the records already stored are untouched; a
22-token question after a 2,048 / 8,192 / 16,384-token cache on Qwen2.5-1.5B in fp32 on one
core reads 1.07x / 2.36x / 2.98x faster (bench/attention.py,
bench/results/attention-qwen2.5-coder-1.5b.md).
"""

from __future__ import annotations

import torch

NAME = "grm_sdpa"


def _forward(module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
             attention_mask: torch.Tensor | None, dropout: float = 0.0, scaling: float | None = None,
             is_causal: bool | None = None, **kwargs) -> tuple[torch.Tensor, None]:
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    grouped = getattr(module, "num_key_value_groups", 1) > 1
    if (not grouped or query.device.type != "cpu" or attention_mask is None or query.shape[2] == 1
            or kwargs.get("position_bias") is not None or kwargs.get("softcap") is not None):
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                      is_causal=is_causal, **kwargs)
    out = torch.nn.functional.scaled_dot_product_attention(query, key, value, attn_mask=attention_mask,
                                                           dropout_p=dropout, scale=scaling, enable_gqa=True)
    return out.transpose(1, 2).contiguous(), None


def use_grouped_attention(model: torch.nn.Module) -> None:
    """Run `model`'s attention through this module's kernel if it runs transformers' SDPA now
    (another choice, e.g. eager or flash attention, is left as it is)."""
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, sdpa_mask

    if getattr(getattr(model, "config", None), "_attn_implementation", None) != "sdpa":
        return
    AttentionInterface.register(NAME, _forward)
    ALL_MASK_ATTENTION_FUNCTIONS.register(NAME, sdpa_mask)  # the masks SDPA gets, unchanged
    model.set_attn_implementation(NAME)
