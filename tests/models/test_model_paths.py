"""Models given by path (marked `model`; runs in CI): a local .gguf file and a local HF folder.

1. The packaged SmolLM2 and Gemma-3 GGUF files, found through importlib.metadata as the
   registry finds them, load BY PATH: materialized once under the cache, keyed by the file's
   SHA-256 (a second load reuses the folder), then ingest and answer from memory.
2. The materialized HF folder of the registry model loads by path too, with the same identity
   as the registry name (same files, same dtype, same device kind), and answers from memory.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from grm.models import load_model
from grm.models.install import ensure_installed, locate_gguf
from grm.models.registry import MODELS

pytestmark = pytest.mark.model
CACHE = Path(os.environ.get("GRM_CACHE", Path.home() / ".cache" / "grm"))


def _packaged_gguf(name: str, work: Path) -> Path:
    spec = MODELS[name]
    ensure_installed(spec)
    return locate_gguf(spec, work)


def _ingest_and_ask(model: str, tmp_path: Path) -> None:
    from grm.demo.corpus import DOCUMENTS, QUESTIONS
    from grm.runtime import Runtime
    from grm.runtime.runtime import question_text

    doc_name, question, _expected = QUESTIONS[0]
    doc = DOCUMENTS[doc_name]
    (tmp_path / doc_name).write_text(doc, encoding="utf-8")
    prompt = doc + question_text(question)
    with Runtime.open(store=tmp_path / "store", model=model, threads=2, block_tokens=64, cache_dir=CACHE,
                      device="cpu", dtype="float32") as rt:  # the fp32 regime: its self-test bound
        assert rt.selftest.max_rel_error <= 1e-4
        rt.ingest([tmp_path / doc_name], layout="both", progress=False)  # the whole chain stored at ingest
        answer = rt.ask(prompt, mode="exact", max_new_tokens=8)
        doc_tokens = len(rt.lm.tokenizer.encode(doc))
        assert answer.tokens_from_memory >= doc_tokens  # the document came from memory, not re-read
        assert answer.answer.strip()


@pytest.mark.parametrize("name", ["smollm2-135m", "gemma3-270m"])
def test_a_packaged_gguf_loads_by_path_and_answers(name, tmp_path):
    gguf = _packaged_gguf(name, tmp_path / "assembled")
    assert gguf.suffix == ".gguf" and gguf.is_file()
    first = load_model(str(gguf), CACHE)
    folders = sorted((CACHE / "models").glob("gguf-*"))
    assert any((f / "grm-source.json").exists() and f.name.startswith("gguf-") for f in folders)
    again = load_model(str(gguf), CACHE)  # reuses the materialized folder
    assert again.identity == first.identity
    assert first.family.startswith(MODELS[name].family)  # llama; gemma3 loads as gemma3 / gemma3_text
    _ingest_and_ask(str(gguf), tmp_path)


def test_an_hf_folder_loads_by_path_and_answers(tmp_path):
    by_name = load_model("smollm2-135m", CACHE, dtype="float32")  # the folder `auto` would not pick on a bf16 CPU
    folder = CACHE / "models" / "smollm2-135m"
    by_path = load_model(str(folder), CACHE, dtype="float32")
    assert by_path.identity == by_name.identity
    _ingest_and_ask(str(folder), tmp_path)
