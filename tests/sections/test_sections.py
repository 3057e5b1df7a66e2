"""Sections layout and selection on a tiny model.

1. Documents stay byte-exact; each section is stored once, read alone after the sinks.
2. Selection on the CPU finds the section holding the question's identifiers.
3. exact-section (stored K/V) is bit-identical to rag-text (the same section re-read).
4. grafts composes several sections, re-seated, and counts what came from memory.
"""

from __future__ import annotations

import hashlib

import pytest
import torch

from grm.kv import KV, cache_from_kv
from grm.kv.forward import prefill
from grm.runtime.runtime import question_text

PARAS = [
    "The lighthouse keeper of Carrow Point logs the fog every night. The code of the north door is 4471.",
    "Orchards near Elstrand grow late apples. The Copper Wren variety ripens after the first frost.",
    "The robot club meets in room 14. Its rover Pebble finished third at the regional contest.",
    "Ferries leave Portheven twice a week. The Marigold carries supplies to Harbor Station.",
]
DOC = "\n\n".join(p * 3 for p in PARAS) + "\n"


@pytest.fixture()
def rt(make_runtime, tmp_path):
    (tmp_path / "doc.txt").write_text(DOC, encoding="utf-8")
    rt = make_runtime(section_tokens=320)
    res = rt.ingest([tmp_path / "doc.txt"], layout="sections", progress=False)[0]
    assert res.blocks >= 3 and res.computed == res.blocks
    return rt


def test_document_is_kept_byte_exact_and_sections_read_alone(rt):
    doc = next(rt.store.records("default", "document"))
    data = rt.store.read_payload(doc)
    assert data == DOC.encode() and doc.key == hashlib.sha256(data).hexdigest()
    sections = [r for r in rt.store.records("default", "block") if r.meta["layout"] == "sections"]
    assert all(r.parent == rt.exact.sink_fp and r.meta["seat"] == 4 for r in sections)
    assert "".join(r.text for r in sorted(sections, key=lambda r: r.meta["index"])) == DOC


def test_ingest_of_sections_is_idempotent(rt, tmp_path):
    again = rt.ingest([tmp_path / "doc.txt"], layout="sections", progress=False)[0]
    assert again.computed == 0


@pytest.mark.parametrize("question,needle", [
    ("What is the code of the north door at Carrow Point?", "4471"),
    ("Which variety ripens after the first frost?", "Copper Wren"),
    ("What does the Marigold carry?", "Marigold"),
])
def test_selection_finds_the_section_with_the_answer(rt, question, needle):
    hits = rt.sections.select(question, k=1)
    assert hits and needle in hits[0].record.text


def test_exact_section_is_bit_identical_to_reading_the_section(rt):
    question = "What is the code of the north door at Carrow Point?"
    hit = rt.sections.select(question)[0]
    kv, ids = rt.sections.load(hit.record)
    assert kv is not None and kv.tokens == len(ids)
    q_ids = rt.lm.tokenizer.encode(question_text(question))
    sinks = rt.exact.sinks()
    warm_cache = cache_from_kv(KV.cat([sinks, kv]))
    warm = prefill(rt.lm.model, warm_cache, q_ids, sinks.tokens + kv.tokens)
    cold_cache = cache_from_kv(sinks)
    prefill(rt.lm.model, cold_cache, ids, sinks.tokens)
    cold = prefill(rt.lm.model, cold_cache, q_ids, sinks.tokens + len(ids))
    assert torch.equal(warm, cold)
    a = rt.ask(question, mode="exact-section", max_new_tokens=6)
    b = rt.ask(question, mode="rag-text", max_new_tokens=6)
    assert a.answer == b.answer and a.prompt_tokens == b.prompt_tokens
    assert a.tokens_from_memory == 4 + len(ids) and b.tokens_from_memory == 4
    assert a.mounted[0]["id"] == hit.record.key


def test_auto_mode_selects_a_section_when_the_prompt_is_not_a_stored_prefix(rt):
    a = rt.ask("Which variety ripens after the first frost?", max_new_tokens=3)
    assert a.mode == "exact-section" and a.tokens_from_memory > 4


def test_grafts_mode_composes_sections_at_new_seats(rt):
    a = rt.ask("What is the code of the north door, and what does the Marigold carry?", mode="grafts",
               max_new_tokens=3)
    assert a.mode == "grafts" and len(a.mounted) >= 2
    assert a.tokens_from_memory + a.tokens_computed == a.prompt_tokens
    question = "What is the code of the north door, and what does the Marigold carry?"
    assert a.tokens_computed == len(rt.lm.tokenizer.encode(question_text(question)))
    assert a.lossy


def test_a_damaged_section_is_recomputed(rt):
    question = "What is the code of the north door at Carrow Point?"
    hit = rt.sections.select(question)[0]
    path = rt.store.payload_path(hit.record)
    data = bytearray(path.read_bytes())
    data[-10] ^= 0xFF
    path.write_bytes(bytes(data))
    good = rt.ask(question, mode="rag-text", max_new_tokens=6)
    a = rt.ask(question, mode="exact-section", max_new_tokens=6)
    assert a.answer == good.answer and a.tokens_from_memory == 4


def test_every_channel_selects_and_explains(rt):
    question = "Which variety ripens after the first frost?"
    for channel in ("lexical", "dense", "combined"):
        hits = rt.sections.select(question, k=2, channel=channel)
        # lexical needs a content word in common (function words are not evidence); dense ranks all
        assert len(hits) == (1 if channel == "lexical" else 2) and hits[0].score >= hits[-1].score
    combined = rt.sections.select(question, k=1)[0]
    assert "Copper Wren" in combined.record.text and combined.bm25 > 0 and -1.0 <= combined.dense <= 1.0
    with pytest.raises(ValueError):
        rt.sections.select(question, channel="psychic")


def test_dense_routing_keys_are_position_free(tiny_models):
    """The same span read at two seats gets the same routing key (rotary undone per token)."""
    from grm.dialects import dialect_for
    from grm.kv import kv_from_cache, new_cache
    from grm.route.dense import DenseConfig, routing_key

    lm = tiny_models["llama"]
    d = dialect_for(lm.model)
    ids = lm.tokenizer.encode("position free keys for routing")
    keys = []
    for start in (4, 900):
        cache = new_cache()
        prefill(lm.model, cache, ids, start)
        keys.append(routing_key(kv_from_cache(cache), d, start, DenseConfig(layer_stride=1)))
    assert torch.allclose(keys[0], keys[1], atol=1e-4)
