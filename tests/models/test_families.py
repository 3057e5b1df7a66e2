"""Model families, random geometries, placement and the identity's numeric regime (no real model).

1. Tiny random qwen2, qwen3 (q/k norms before rotary) and mistral (sliding window) models pass
   the dialect self-test: rotating cached keys reproduces a forward pass at the new seats.
2. A family without a dialect is refused with one clear line, before any weights load.
3. random:llama-3-8b / qwen3-4b / gemma-3-4b carry the published numbers; @small builds in
   seconds, is deterministic, flagged not for answers, and passes the self-test.
4. Identity binds the dtype: float32 and bfloat16 of one model differ, and a store written
   under one is a miss (not an error) under the other.
5. --device / --dtype are validated; CUDA asked for where there is none is a ModelError.
"""

from __future__ import annotations

import json
import logging

import pytest
import torch

from grm.dialects import DIALECT_FAMILIES, dialect_for, self_test
from grm.dialects.selftest import PROBE_TEXT
from grm.errors import DialectError, ModelError, UserInputError
from grm.models import load_model
from grm.models.placement import check_names, numeric_regime, resolve_device, resolve_dtype
from grm.models.random import GEOMETRIES, random_config
from grm.models.tokenizer import ByteTokenizer
from tests.conftest import lorem

SMALL = dict(vocab_size=ByteTokenizer.vocab_size, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
             num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=4096)


def _tiny(config: object) -> torch.nn.Module:
    from transformers import AutoModelForCausalLM

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(7)
        return AutoModelForCausalLM.from_config(config, dtype=torch.float32).eval()


def _probe() -> list[int]:
    tok = ByteTokenizer()
    return list(tok.sink_ids) + tok.encode(PROBE_TEXT)


@pytest.mark.parametrize("family", ["qwen2", "qwen3", "mistral"])
def test_llama_like_families_pass_the_rotary_self_test(family):
    from transformers import MistralConfig, Qwen2Config, Qwen3Config

    cls = {"qwen2": Qwen2Config, "qwen3": Qwen3Config, "mistral": MistralConfig}[family]
    extra = {"sliding_window": 8} if family == "mistral" else {}
    model = _tiny(cls(**SMALL, **extra))
    dialect = dialect_for(model)
    assert dialect.family == family and dialect.kv_heads == 2 and dialect.head_dim == 16
    assert dialect.sliding_window == ((8, 8) if family == "mistral" else (None, None))
    result = self_test(dialect, model, _probe())
    assert result.max_rel_error < 1e-4
    if family == "qwen3":  # q/k norms really are there, and the self-test passes through them
        assert hasattr(model.model.layers[0].self_attn, "k_norm")


def test_qwen2_windows_follow_layer_types():
    from transformers import Qwen2Config

    cfg = Qwen2Config(**{**SMALL, "num_hidden_layers": 3}, use_sliding_window=True, sliding_window=32,
                      max_window_layers=1)
    dialect = dialect_for(_tiny(cfg))
    assert dialect.sliding_window == tuple(32 if t == "sliding_attention" else None for t in cfg.layer_types)
    assert None in dialect.sliding_window and 32 in dialect.sliding_window


def test_a_wrong_rotary_map_fails_the_self_test():
    """The self-test can fail: a dialect whose frequencies are off is refused."""
    from dataclasses import replace

    from transformers import Qwen3Config

    model = _tiny(Qwen3Config(**SMALL))
    dialect = dialect_for(model)
    wrong = replace(dialect, inv_freq=tuple(f * 1.5 for f in dialect.inv_freq))
    with pytest.raises(DialectError, match="rotary self-test failed"):
        self_test(wrong, model, _probe())


def test_a_family_without_a_dialect_is_refused_before_loading(tmp_path):
    folder = tmp_path / "phi3-model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "phi3"}))  # no weights needed
    assert "phi3" not in DIALECT_FAMILIES
    with pytest.raises(DialectError, match=r"'phi3' has no GRM dialect \(supported: .*llama.*qwen3"):
        load_model(str(folder), tmp_path / "cache")


def test_an_unknown_model_name_says_what_is_accepted(tmp_path):
    with pytest.raises(UserInputError, match=r"\.gguf file or to an HF model folder"):
        load_model(str(tmp_path / "nope.gguf"), tmp_path)
    with pytest.raises(UserInputError, match="random:llama-3-8b"):
        load_model("random:llama-9000", tmp_path)


def test_random_geometries_carry_the_published_numbers():
    llama, qwen, gemma = (random_config(f"random:{g}") for g in ("llama-3-8b", "qwen3-4b", "gemma-3-4b"))
    assert (llama.hidden_size, llama.num_hidden_layers, llama.num_attention_heads, llama.num_key_value_heads,
            llama.intermediate_size, llama.vocab_size) == (4096, 32, 32, 8, 14336, 128256)
    assert llama.rope_parameters["rope_theta"] == 500000.0
    assert (qwen.model_type, qwen.hidden_size, qwen.num_hidden_layers, qwen.head_dim) == ("qwen3", 2560, 36, 128)
    assert (gemma.hidden_size, gemma.num_hidden_layers, gemma.head_dim, gemma.sliding_window) == (2560, 34, 256, 1024)
    assert gemma.layer_types.count("full_attention") == 5  # 5 sliding : 1 full over 34 layers
    assert set(GEOMETRIES) == {"llama-3-8b", "qwen3-4b", "gemma-3-4b"}


@pytest.mark.parametrize("name", ["random:llama-3-8b@small", "random:qwen3-4b@small", "random:gemma-3-4b@small"])
def test_small_random_models_build_fast_deterministic_and_flagged(name, tmp_path):
    a = load_model(name, tmp_path)
    b = load_model(name, tmp_path)
    assert not a.for_answers and a.identity == b.identity
    assert all(torch.equal(x, y) for x, y in zip(a.model.state_dict().values(), b.model.state_dict().values()))
    dialect = dialect_for(a.model)
    assert self_test(dialect, a.model, _probe()).max_rel_error < 1e-4
    big = random_config(name.split("@")[0])
    assert a.model.config.model_type == big.model_type
    assert a.model.config.num_hidden_layers < big.num_hidden_layers


def test_identity_binds_dtype_and_a_store_of_one_is_a_miss_under_the_other(make_runtime, tmp_path):
    f32 = load_model("tiny-random-llama", tmp_path)
    bf16 = load_model("tiny-random-llama", tmp_path, dtype="bfloat16")
    assert f32.identity != bf16.identity and bf16.model.dtype == torch.bfloat16
    assert load_model("tiny-random-llama", tmp_path, dtype="float32").identity == f32.identity
    doc = tmp_path / "doc.txt"
    doc.write_text(lorem(6, seed=3))
    store = tmp_path / "store"
    text = doc.read_text()
    for written, read in (("float32", "bfloat16"), ("bfloat16", "float32")):
        where = store / written
        rt = make_runtime(store=where, device="cpu", dtype=written)
        rt.ingest([doc], progress=False)
        assert rt.exact.load_prefix(text).block_tokens > 0  # served under the dtype that wrote it
        rt.close()
        other = make_runtime(store=where, device="cpu", dtype=read)
        prefix = other.exact.load_prefix(text)
        assert prefix.block_tokens == 0 and not prefix.blocks  # a miss, not an error
        answer = other.ask(text, mode="exact", max_new_tokens=2)
        assert answer.tokens_computed > 0 and other.lm.model.dtype == {"float32": torch.float32,
                                                                        "bfloat16": torch.bfloat16}[read]
        other.close()


def test_device_and_dtype_names_are_validated(make_runtime):
    check_names("cuda:1", "bfloat16")
    for device, dtype in (("gpu", "auto"), ("cuda:x", "auto"), ("cpu", "fp8"), ("cpu", "float64")):
        with pytest.raises(UserInputError, match="bad (device|dtype)"):
            check_names(device, dtype)
    with pytest.raises(UserInputError, match="bad device 'tpu'"):
        make_runtime(device="tpu")
    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_dtype("auto", torch.device("cpu")) == torch.float32  # the CPU regime stays fp32
    assert resolve_dtype("auto", torch.device("cuda", 0)) == torch.bfloat16
    assert numeric_regime(torch.device("cpu")) == "cpu"


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on a machine without CUDA")
def test_cuda_without_cuda_is_a_clear_model_error(tmp_path):
    with pytest.raises(ModelError, match="CUDA is not available here.*use --device cpu"):
        load_model("tiny-random-llama", tmp_path, device="cuda")
    assert resolve_device("auto") == torch.device("cpu")


def test_a_runtime_on_random_weights_warns_that_answers_are_noise(make_runtime, caplog):
    with caplog.at_level(logging.WARNING, logger="grm"):
        rt = make_runtime(model="random:qwen3-4b@small", device="cpu")
    assert not rt.lm.for_answers and rt.dialect.family == "qwen3"
    assert "random weights: its answers are meaningless" in caplog.text
