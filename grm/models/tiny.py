"""Tiny random models built in code: fast, exact, no download. For unit and contract tests only.

Each is a real transformers model of its family (llama, gemma3_text, gpt2) with a small config,
weights drawn from a fixed seed, a byte-level tokenizer and >= 32,768 positions so test prompts
fit. They know nothing and recall nothing: they exist to test mechanics, not answers.
"""

from __future__ import annotations

import torch

from grm.models.template import ChatTemplate
from grm.models.tokenizer import ByteTokenizer

TINY_POSITIONS = 32768
TINY_SEED = 1234


def tiny_config(family: str) -> object:
    """The config of a tiny random model of `family` ('llama', 'gemma3', 'gpt2')."""
    from transformers import GPT2Config, Gemma3TextConfig, LlamaConfig

    vocab = ByteTokenizer.vocab_size
    if family == "llama":
        return LlamaConfig(
            vocab_size=vocab, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, head_dim=16,
            max_position_embeddings=TINY_POSITIONS, rope_theta=10000.0,
            bos_token_id=ByteTokenizer.bos_id, eos_token_id=ByteTokenizer.eos_id,
            pad_token_id=ByteTokenizer.eos_id, tie_word_embeddings=False,
        )
    if family == "gemma3":
        return Gemma3TextConfig(
            vocab_size=vocab, hidden_size=64, intermediate_size=128, num_hidden_layers=3,
            num_attention_heads=4, num_key_value_heads=1, head_dim=16, sliding_window=16,
            layer_types=["sliding_attention", "sliding_attention", "full_attention"],
            max_position_embeddings=TINY_POSITIONS,
            bos_token_id=ByteTokenizer.bos_id, eos_token_id=ByteTokenizer.eos_id,
            pad_token_id=ByteTokenizer.eos_id,
        )
    if family == "gpt2":
        return GPT2Config(
            vocab_size=vocab, n_embd=64, n_layer=2, n_head=4, n_positions=TINY_POSITIONS,
            bos_token_id=ByteTokenizer.bos_id, eos_token_id=ByteTokenizer.eos_id,
        )
    raise ValueError(f"no tiny model for family {family!r}")


def build_tiny(family: str, template: ChatTemplate | None = None) -> tuple[torch.nn.Module, ByteTokenizer]:
    """Build the tiny random model of `family` deterministically (same seed, same weights), its
    byte tokenizer asking through `template` if one is given."""
    from transformers import AutoModelForCausalLM

    config = tiny_config(family)
    # Seed a private generator state: building a tiny model must not disturb the caller's RNG.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(TINY_SEED)
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.eval()
    return model, ByteTokenizer(template)
