"""The default `seen` layout: one layout's K/V bytes at ingest, the chain stored when first read.

Expectations:
1. Ingest stores the sections (the same records the `sections` layout stores) and the chain's
   first block only; the document row names the whole planned chain.
2. The first prompt that starts with the document loads the first block, reads the rest block by
   block and stores each: afterwards the store holds exactly the chain blocks a `both` ingest
   stores (same keys, same payload digests: the same bound bytes).
3. Its logits, and those of the next prompt (which hits every block), are bit-identical to the
   cold two-stage reading; the next prompt computes only the question.
4. A prompt that leaves the document part-way stores only the blocks it read in full; one that
   starts with other text stores nothing.
5. Stored payload bytes are the sections' plus at most one block, below a `both` ingest's.
"""

from __future__ import annotations

import torch

from grm.exact import split_blocks
from grm.kv import new_cache
from grm.kv.forward import prefill
from grm.store.kinds import BLOCK, DOCUMENT
from tests.conftest import lorem

DOC = lorem(3, seed=11)
QUESTION = "\n\nQuestion: what is the first word?\nAnswer:"


def cold_logits(rt, prompt: str) -> torch.Tensor:
    tok = rt.lm.tokenizer
    cache, seat = new_cache(), 0
    prefill(rt.lm.model, cache, list(tok.sink_ids), seat)
    seat += len(tok.sink_ids)
    for block in split_blocks(DOC, tok, rt.config.block_tokens):
        prefill(rt.lm.model, cache, list(block.ids), seat)
        seat += len(block.ids)
    return prefill(rt.lm.model, cache, tok.encode(prompt[len(DOC):]), seat)


def blocks(rt) -> dict[str, tuple[str, int]]:
    return {r.key: (r.payload, r.payload_size) for r in rt.store.records(rt.config.tenant, BLOCK)}


def chain_blocks(rt) -> dict[str, str]:
    return {r.key: r.payload for r in rt.store.records(rt.config.tenant, BLOCK) if r.meta.get("layout") == "chain"}


def test_seen_stores_one_layout_then_the_chain_when_a_prompt_reads_it(make_runtime, tmp_path):
    both = make_runtime(store=tmp_path / "both", block_tokens=48, section_tokens=48)
    both.ingest_text(DOC, "doc", layout="both")
    sections = make_runtime(store=tmp_path / "sections", block_tokens=48, section_tokens=48)
    sections.ingest_text(DOC, "doc", layout="sections")
    rt = make_runtime(store=tmp_path / "seen", block_tokens=48, section_tokens=48)
    res = rt.ingest_text(DOC, "doc")  # the default layout
    planned = split_blocks(DOC, rt.lm.tokenizer, 48)
    assert len(planned) >= 4

    seen, wanted_chain = blocks(rt), chain_blocks(both)
    section_keys = set(blocks(sections))
    assert section_keys <= set(seen) and len(set(seen) - section_keys) <= 1  # + the first block where it differs
    assert res.keys == sorted(section_keys, key=res.keys.index)
    doc = next(rt.store.records(rt.config.tenant, DOCUMENT))
    assert doc.meta["layout"] == "seen" and doc.meta["blocks"] == both.exact.match(DOC)[1]
    assert len(rt.exact.match(DOC)[1]) == 1  # only the first chain block is stored
    assert sum(s for _, s in seen.values()) < 0.75 * sum(s for _, s in blocks(both).values())

    prompt = DOC + QUESTION
    sink = len(rt.lm.tokenizer.sink_ids)
    first = rt.ask(prompt, mode="auto", max_new_tokens=1)
    assert first.mode == "exact" and first.tokens_from_memory == sink + len(planned[0].ids)
    stored = {k: p for k, (p, _) in blocks(rt).items()}
    assert {k: stored.get(k) for k in wanted_chain} == wanted_chain  # the very blocks (and bytes) `both` stores

    logits, prefix = rt.exact_context(prompt)[1], rt.exact_context(prompt)[4]
    assert len(prefix.blocks) == len(planned)
    assert torch.equal(logits, cold_logits(rt, prompt))
    second = rt.ask(prompt, mode="auto", max_new_tokens=1)
    assert second.tokens_from_memory == sink + sum(len(b.ids) for b in planned)
    assert second.answer == first.answer


def test_first_read_logits_equal_the_cold_reading(make_runtime):
    rt = make_runtime(block_tokens=48, section_tokens=48)
    rt.ingest_text(DOC, "doc")
    prompt = DOC + QUESTION
    ready = rt._plan(prompt, "exact", 1, False, True)
    assert ready.blocks_to_store  # the document's unstored blocks are read and stored
    cache, seat = ready.arena.cache, ready.arena.seat
    for ids in ready.read:
        logits = prefill(rt.lm.model, cache, ids, seat)
        seat += len(ids)
    assert torch.equal(logits, cold_logits(rt, prompt))


def test_a_prompt_leaving_the_document_stores_only_whole_blocks_it_read(make_runtime):
    rt = make_runtime(block_tokens=48, section_tokens=48)
    rt.ingest_text(DOC, "doc")
    planned = split_blocks(DOC, rt.lm.tokenizer, 48)
    cut = len(planned[0].text) + len(planned[1].text) + len(planned[2].text) // 2
    rt.ask(DOC[:cut] + QUESTION, mode="exact", max_new_tokens=1)
    assert len(rt.exact.match(DOC)[1]) == 2  # blocks 0 and 1: block 2 was left part-way
    before = set(blocks(rt))
    rt.ask("Something else entirely." + QUESTION, mode="exact", max_new_tokens=1)
    assert set(blocks(rt)) == before


def test_a_section_tied_with_the_first_chain_block_does_not_stop_the_chain(make_runtime):
    """A BPE tokenizer can read a section alone with other ids than the whole document gives its
    first chain block: two stored records of the same text under the sinks, a tie for `match`. An
    older such record (here a decoy with the ids reversed) must not keep the chain from loading
    and being stored."""
    from grm.kv import cache_from_kv, kv_from_cache

    rt = make_runtime(block_tokens=48, section_tokens=48)
    ex = rt.exact
    first = split_blocks(DOC, rt.lm.tokenizer, 48)[0]
    ids = list(reversed(first.ids))
    assert ids != list(first.ids)
    sinks = ex.sinks()
    cache = cache_from_kv(sinks)
    prefill(rt.lm.model, cache, ids, sinks.tokens)
    decoy = ex.chain_fingerprint(ex.sink_fp, first.text, ids)
    ex.put_block(kv_from_cache(cache, sinks.tokens, sinks.tokens + len(ids)), decoy, ex.sink_fp, sinks.tokens,
                 first.text, ids, {"layout": "sections"})
    rt.ingest_text(DOC, "doc")
    assert ex.match(DOC + QUESTION)[1] == [decoy]  # the older record wins the tie in the catalog walk
    ready = rt._plan(DOC + QUESTION, "exact", 1, False, True)
    assert ready.prefix.blocks[0].key != decoy and ready.blocks_to_store
