"""Big geometries without weights: published architectures with seeded random weights.

`random:llama-3-8b`, `random:qwen3-4b` and `random:gemma-3-4b` are those models' published
configs (numbers written below, no download) with weights drawn from a fixed seed, built directly
on the target device in the target dtype, and a byte tokenizer. They measure speed and memory at
real sizes with GRM's own code; their answers are noise (`for_answers=False`).

`random:NAME@small` is the same family shrunk (few layers, narrow) so tests and `--quick`
benchmarks run on a CPU in seconds. Identity: the weights are a function of (config, seed, init
law, dtype, device kind), so the identity hashes those instead of 16 GB of tensors.
"""

from __future__ import annotations

import torch

from grm.errors import UserInputError
from grm.models.tokenizer import ByteTokenizer

PREFIX = "random:"
SEED = 4321
INIT_LAW = "hf-init-normal-0.02-v1"  # transformers' own _init_weights under SEED (part of the identity)
_BYTE = ByteTokenizer

# Published configs (hidden, layers, heads, kv heads, head_dim, intermediate, vocab, rope, window).
GEOMETRIES: dict[str, dict] = {
    # Llama-3.1-8B (the Llama-3-8B geometry with its 128k-position llama3 rope scaling).
    "llama-3-8b": dict(
        family="llama", hidden_size=4096, num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=8,
        head_dim=128, intermediate_size=14336, vocab_size=128256, max_position_embeddings=131072,
        rms_norm_eps=1e-5, tie_word_embeddings=False,
        rope_parameters={"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
                         "high_freq_factor": 4.0, "original_max_position_embeddings": 8192},
    ),
    # Qwen3-4B: q/k RMS norms before rotary, tied embeddings, no sliding window.
    "qwen3-4b": dict(
        family="qwen3", hidden_size=2560, num_hidden_layers=36, num_attention_heads=32, num_key_value_heads=8,
        head_dim=128, intermediate_size=9728, vocab_size=151936, max_position_embeddings=40960,
        rms_norm_eps=1e-6, tie_word_embeddings=True, use_sliding_window=False,
        rope_parameters={"rope_type": "default", "rope_theta": 1000000.0},
    ),
    # Gemma-3-4B (text tower): 5 sliding (1024, base 1e4) : 1 full (base 1e6, linear x8) layers.
    "gemma-3-4b": dict(
        family="gemma3_text", hidden_size=2560, num_hidden_layers=34, num_attention_heads=8, num_key_value_heads=4,
        head_dim=256, intermediate_size=10240, vocab_size=262208, max_position_embeddings=131072,
        rms_norm_eps=1e-6, sliding_window=1024, query_pre_attn_scalar=256,
        rope_parameters={"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                         "full_attention": {"rope_type": "linear", "rope_theta": 1000000.0, "factor": 8.0}},
    ),
}

# The "@small" shrink: same family and position law, a CPU-sized body.
SMALL = dict(hidden_size=128, num_attention_heads=4, head_dim=32, intermediate_size=256, vocab_size=512)
SMALL_LAYERS = {"llama": 2, "qwen3": 2, "gemma3_text": 6}  # gemma: 6 keeps one full-attention layer
SMALL_WINDOW = 64


def parse(name: str) -> tuple[str, bool]:
    """(geometry, small) of a `random:` model name; UserInputError if unknown."""
    body = name[len(PREFIX):]
    base, _, variant = body.partition("@")
    if base not in GEOMETRIES or variant not in ("", "small"):
        known = ", ".join(f"{PREFIX}{g}" for g in GEOMETRIES)
        raise UserInputError(f"unknown random model {name!r}: use one of {known} (optionally @small)")
    return base, variant == "small"


def random_config(name: str) -> object:
    """The transformers config of a `random:` model (published numbers, or the @small shrink)."""
    from transformers import Gemma3TextConfig, LlamaConfig, Qwen3Config

    base, small = parse(name)
    fields = dict(GEOMETRIES[base])
    family = fields.pop("family")
    if small:
        ratio = fields["num_attention_heads"] // fields["num_key_value_heads"]
        fields.update(SMALL, num_hidden_layers=SMALL_LAYERS[family],
                      num_key_value_heads=max(1, SMALL["num_attention_heads"] // ratio))
        if family == "gemma3_text":
            fields.update(sliding_window=SMALL_WINDOW, query_pre_attn_scalar=SMALL["head_dim"])
    n = fields["num_hidden_layers"]
    cls = {"llama": LlamaConfig, "qwen3": Qwen3Config, "gemma3_text": Gemma3TextConfig}[family]
    if family == "gemma3_text":
        fields["layer_types"] = ["full_attention" if (i + 1) % 6 == 0 else "sliding_attention" for i in range(n)]
    return cls(**fields, bos_token_id=_BYTE.bos_id, eos_token_id=_BYTE.eos_id, pad_token_id=_BYTE.eos_id)


def build_random(name: str, device: torch.device, dtype: torch.dtype) -> tuple[torch.nn.Module, ByteTokenizer]:
    """Build a `random:` model on `device` in `dtype` with seeded weights (no weight files)."""
    from transformers import AutoModelForCausalLM

    config = random_config(name)
    devices = [device.index or 0] if device.type == "cuda" else []
    # A private RNG state: building must not disturb the caller's, and the same seed gives the
    # same weights on the same device kind (the identity names the device kind).
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(SEED)
        with torch.device(device):  # parameters are created (and initialized) on the target device
            model = AutoModelForCausalLM.from_config(config, dtype=dtype)
    model.eval()
    return model, ByteTokenizer()
