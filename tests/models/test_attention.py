"""GRM's attention kernel (grm/models/attention.py): grouped-query attention with a mask on the
CPU reads the cached K/V heads as they are instead of copying them per query head.

1. A model loaded by GRM runs it where it ran transformers' SDPA; a model set to another
   implementation keeps that one.
2. A chunked read (a masked chunk after the first) and a question read after it give the same
   K/V and logits to the bit as transformers' SDPA, on the tiny llama (4 query / 2 K/V heads),
   gemma3 (one K/V head, a sliding window) and a qwen2 geometry, in fp32 and bf16.
3. On that read the grouped kernel is what runs: transformers' K/V copy (`repeat_kv`) is never
   called, where under plain SDPA it is.
"""

from __future__ import annotations

import pytest
import torch
from transformers import DynamicCache

from grm.kv.cache import kv_from_cache
from grm.kv.forward import PREFILL_CHUNK, prefill
from grm.models.attention import NAME, use_grouped_attention


def _read(model: torch.nn.Module, ids: list[int], question: list[int]) -> tuple:
    cache = DynamicCache()
    after = prefill(model, cache, ids, 0)
    kv = kv_from_cache(cache, 0)
    return kv.keys, kv.values, after, prefill(model, cache, question, len(ids))


def _grm(model: torch.nn.Module) -> None:
    """Back to what GRM loads: transformers' SDPA, then GRM's kernel over it."""
    model.set_attn_implementation("sdpa")
    use_grouped_attention(model)


def _ids(n: int, seed: int) -> list[int]:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(3, 250, (n,), generator=g).tolist()


def test_a_model_loaded_by_grm_runs_the_grouped_kernel_and_another_choice_is_kept(tiny_models):
    assert tiny_models["llama"].model.config._attn_implementation == NAME
    model = tiny_models["gemma3"].model
    model.set_attn_implementation("eager")
    try:
        use_grouped_attention(model)
        assert model.config._attn_implementation == "eager"
    finally:
        _grm(model)
    assert model.config._attn_implementation == NAME


def _qwen2(dtype: torch.dtype) -> torch.nn.Module:
    from transformers import AutoModelForCausalLM, Qwen2Config

    config = Qwen2Config(vocab_size=256, hidden_size=96, intermediate_size=192, num_hidden_layers=2,
                         num_attention_heads=6, num_key_value_heads=2, head_dim=16, max_position_embeddings=4096)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(11)
        return AutoModelForCausalLM.from_config(config, dtype=dtype).eval()


@pytest.mark.parametrize("which", ["llama", "gemma3", "qwen2-fp32", "qwen2-bf16"])
def test_a_chunked_read_and_a_question_after_it_are_bit_identical_to_sdpa(tiny_models, which, monkeypatch):
    import transformers.integrations.sdpa_attention as sdpa

    if which.startswith("qwen2"):
        model = _qwen2(torch.bfloat16 if which.endswith("bf16") else torch.float32)
    else:
        model = tiny_models[which].model
    ids, question = _ids(PREFILL_CHUNK + 90, 1), _ids(13, 2)  # the second chunk and the question read with a mask
    copies = []
    real_repeat = sdpa.repeat_kv
    monkeypatch.setattr(sdpa, "repeat_kv", lambda h, n: copies.append(n) or real_repeat(h, n))
    try:
        model.set_attn_implementation("sdpa")
        plain = _read(model, ids, question)
        assert copies, "transformers' SDPA copies the K/V heads on this read (else this test shows nothing)"
        copies.clear()
        use_grouped_attention(model)
        assert model.config._attn_implementation == NAME
        grouped = _read(model, ids, question)
    finally:
        _grm(model)
    assert copies == []
    for a, b in zip(plain, grouped):
        assert a.dtype == b.dtype and torch.equal(a, b)
