"""Exact block memory end to end on a tiny model.

Expectations:
1. A warm answer's logits are bit-identical to the cold two-stage computation (blocks computed in
   chain, then the rest), in the same process and in a fresh process; the rest is read into the
   load's own buffer, after the prefix (no copy of the prefix), and the prefix's seats are kept.
2. Fail closed: a flipped payload byte, a payload bound to another tenant, a payload bound to
   another model identity: each is a miss, the block is recomputed, the answer equals the cold one.
3. tokens_from_memory + tokens_computed == prompt_tokens, and memory covers the document.
4. Ingest is idempotent and resumes after a failure part-way.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from grm.exact import split_blocks
from grm.kv import new_cache
from grm.kv.forward import prefill
from tests.conftest import ROOT, lorem

DOC = lorem(12, seed=7)
PROMPT = DOC + "\n\nQuestion: what is the first word?\nAnswer:"


def cold_two_stage_logits(rt, prompt: str) -> torch.Tensor:
    """Stage 1: sinks then each block after the previous; stage 2: the rest. No memory used."""
    tok = rt.lm.tokenizer
    cache = new_cache()
    seat = 0
    prefill(rt.lm.model, cache, list(tok.sink_ids), seat)
    seat += len(tok.sink_ids)
    for block in split_blocks(DOC, tok, rt.config.block_tokens):
        prefill(rt.lm.model, cache, list(block.ids), seat)
        seat += len(block.ids)
    rest = tok.encode(prompt[len(DOC):])
    return prefill(rt.lm.model, cache, rest, seat)


def warm_logits(rt, prompt: str) -> tuple[torch.Tensor, object]:
    _cache, logits, _seat, _from_memory, prefix = rt.exact_context(prompt)
    return logits, prefix


@pytest.fixture()
def ingested_here(make_runtime, tmp_path):
    """A runtime that ingested DOC itself (what it wrote is read back by the same store instance)."""
    doc = tmp_path / "doc.txt"
    doc.write_text(DOC, encoding="utf-8")
    rt = make_runtime(block_tokens=64)
    rt.ingest([doc], layout="chain", progress=False)
    return rt, doc


@pytest.fixture(scope="module")
def golden(tmp_path_factory) -> tuple[Path, Path]:
    """(store, document): DOC ingested once per module, as `ingested_here` does, by a runtime
    since closed. Ingesting it takes seconds; copying the store, milliseconds."""
    from grm.runtime import Runtime

    work = tmp_path_factory.mktemp("golden")
    doc = work / "doc.txt"
    doc.write_text(DOC, encoding="utf-8")
    with Runtime.open(store=work / "store", model="tiny-random-llama", threads=2, device="cpu",
                      block_tokens=64) as rt:
        rt.ingest([doc], layout="chain", progress=False)
    return work / "store", doc


@pytest.fixture()
def ingested(make_runtime, golden, tmp_path):
    """A runtime on this test's own copy of the golden store (it may damage it), and the document
    (the golden one, read only: a re-ingest names the same file)."""
    store, doc = golden
    shutil.copytree(store, tmp_path / "store")
    return make_runtime(block_tokens=64), doc


def test_warm_logits_are_bit_identical_in_the_same_process(ingested_here):
    rt, _ = ingested_here
    cold = cold_two_stage_logits(rt, PROMPT)
    cache, warm, seat, _from_memory, prefix = rt.exact_context(PROMPT)
    assert len(prefix.blocks) == len(split_blocks(DOC, rt.lm.tokenizer, 64)) > 3
    assert torch.equal(cold, warm)
    full, n = prefix.full, prefix.kv.tokens
    assert full is not None and full.tokens > seat > n
    for i, layer in enumerate(cache.layers):  # the rest was read in place, after the loaded seats
        assert layer.keys.data_ptr() == full.keys[i].data_ptr() and layer.keys.shape[2] == seat
    again = warm_logits(rt, PROMPT)[0]  # a second load: the same bits
    assert torch.equal(cold, again)


def test_warm_logits_are_bit_identical_after_a_process_restart(ingested, tmp_path):
    rt, _ = ingested
    cold = cold_two_stage_logits(rt, PROMPT)
    store = rt.config.store
    rt.close()
    script = (
        "import sys, torch\n"
        "from grm.runtime import Runtime\n"
        "from tests.runtime.test_exact_ask import PROMPT, warm_logits\n"
        f"rt = Runtime.open(store={str(store)!r}, model='tiny-random-llama', threads=2, block_tokens=64)\n"
        "logits, prefix = warm_logits(rt, PROMPT)\n"
        f"torch.save({{'logits': logits, 'blocks': len(prefix.blocks)}}, {str(tmp_path / 'warm.pt')!r})\n"
    )
    subprocess.run([sys.executable, "-c", script], cwd=ROOT, check=True)
    got = torch.load(tmp_path / "warm.pt")
    assert got["blocks"] > 3
    assert torch.equal(cold, got["logits"])


def test_ask_reports_memory_honestly(ingested):
    rt, _ = ingested
    a = rt.ask(PROMPT, mode="exact", max_new_tokens=4)
    doc_tokens = len(rt.lm.tokenizer.encode(DOC))
    sinks = len(rt.lm.tokenizer.sink_ids)
    assert a.tokens_from_memory + a.tokens_computed == a.prompt_tokens
    assert a.tokens_from_memory - sinks >= 0.99 * doc_tokens
    assert a.tokens_computed == len(rt.lm.tokenizer.encode(PROMPT[len(DOC):]))
    assert a.mode == "exact" and a.mounted and a.ttft_s <= a.total_s


def test_auto_mode_uses_exact_when_the_prompt_starts_with_a_stored_block(ingested):
    rt, _ = ingested
    a = rt.ask(PROMPT, max_new_tokens=2)
    assert a.mode == "exact" and a.tokens_from_memory > len(rt.lm.tokenizer.sink_ids)


def test_whole_prompt_stored_recomputes_only_the_last_token(ingested):
    rt, _ = ingested
    a = rt.ask(DOC, mode="exact", max_new_tokens=2)
    assert a.tokens_computed == 1
    assert a.prompt_tokens == len(rt.lm.tokenizer.sink_ids) + len(rt.lm.tokenizer.encode(DOC))


def _payload_files(rt):
    return [rt.store.payload_path(r) for r in rt.store.records(rt.config.tenant, "block")]


def flip_a_byte_of_block(rt, index: int) -> list:
    """Flip one bit in the middle of chain block `index`'s payload file; the blocks, in order."""
    blocks = sorted(rt.store.records(rt.config.tenant, "block"), key=lambda r: r.meta["index"])
    victim = rt.store.payload_path(blocks[index])
    data = bytearray(victim.read_bytes())
    data[len(data) // 2] ^= 0x01
    victim.chmod(0o644)
    victim.write_bytes(bytes(data))
    return blocks


def test_a_flipped_payload_byte_is_a_miss_and_the_answer_is_still_right(ingested):
    rt, _ = ingested
    cold = cold_two_stage_logits(rt, PROMPT)
    blocks = flip_a_byte_of_block(rt, 2)
    warm, prefix = warm_logits(rt, PROMPT)
    assert len(prefix.blocks) == 2  # served up to the damaged block, recomputed from there
    assert torch.equal(warm, cold)
    assert rt.exact.counters["block_misses"] >= 1


def test_a_payload_bound_to_another_tenant_is_a_miss(make_runtime, tmp_path):
    """Tenant bob's valid payload placed under alice's key: the digest passes, the binding fails."""
    doc = tmp_path / "doc.txt"
    doc.write_text(DOC, encoding="utf-8")
    store = tmp_path / "shared"
    bob = make_runtime(tenant="bob", store=store, block_tokens=64)
    bob.ingest([doc], progress=False)
    first_bob = min(bob.store.records("bob", "block"), key=lambda r: r.meta["index"])
    bob_bytes = bob.store.read_payload(first_bob)
    bob.close()
    alice = make_runtime(tenant="alice", store=store, block_tokens=64)
    cold = cold_two_stage_logits(alice, PROMPT)
    first = split_blocks(DOC, alice.lm.tokenizer, 64)[0]
    from grm.exact import fingerprint

    fp = fingerprint(alice.lm.identity, "alice", alice.exact.sink_fp, first.text.encode(), list(first.ids))
    alice.store.put("alice", "block", fp, parent=alice.exact.sink_fp, text=first.text, payload=bob_bytes,
                    meta={"seat": 4, "tokens": len(first.ids), "ids": list(first.ids), "doc": "x", "index": 0,
                          "layout": "chain"})
    warm, prefix = warm_logits(alice, PROMPT)
    assert prefix.blocks == [] and alice.exact.counters["block_misses"] == 1
    # Alice has no other blocks, so the rest is read in prefill chunks rather than block by block:
    # the same answer, equal up to float summation order.
    assert torch.allclose(warm, cold, atol=1e-5) and int(warm.argmax()) == int(cold.argmax())


def test_records_of_another_model_are_a_miss_not_an_error(make_runtime, tmp_path):
    doc = tmp_path / "doc.txt"
    doc.write_text(DOC, encoding="utf-8")
    store = tmp_path / "store"
    llama = make_runtime(store=store, block_tokens=64)
    llama.ingest([doc], progress=False)
    llama.close()
    gemma = make_runtime(model="tiny-random-gemma3", store=store, block_tokens=64)
    a = gemma.ask(PROMPT, mode="exact", max_new_tokens=2)
    assert a.tokens_from_memory == len(gemma.lm.tokenizer.sink_ids)  # only its own sinks
    assert a.tokens_computed == a.prompt_tokens - a.tokens_from_memory


def test_ingest_is_idempotent(ingested):
    rt, doc = ingested
    again = rt.ingest([doc], layout="chain", progress=False)
    assert again[0].computed == 0 and again[0].blocks > 3


def test_ingest_resumes_after_a_failure_part_way(make_runtime, tmp_path, monkeypatch):
    doc = tmp_path / "doc.txt"
    doc.write_text(DOC, encoding="utf-8")
    rt = make_runtime(block_tokens=64)
    real_put = rt.store.put
    calls = {"n": 0}

    def dying_put(tenant, kind, key, **kw):
        if kind == "block":
            calls["n"] += 1
            if calls["n"] == 4:
                raise KeyboardInterrupt("killed")
        return real_put(tenant, kind, key, **kw)

    monkeypatch.setattr(rt.store, "put", dying_put)
    with pytest.raises(KeyboardInterrupt):
        rt.ingest([doc], layout="chain", progress=False)
    monkeypatch.setattr(rt.store, "put", real_put)
    res = rt.ingest([doc], layout="chain", progress=False)[0]
    assert res.computed == res.blocks - 3
    cold = cold_two_stage_logits(rt, PROMPT)
    warm, prefix = warm_logits(rt, PROMPT)
    assert len(prefix.blocks) == res.blocks and torch.equal(cold, warm)


def test_gemma3_and_gpt2_exact_restore_is_bit_identical(make_runtime, tmp_path):
    doc = tmp_path / "doc.txt"
    doc.write_text(DOC, encoding="utf-8")
    for model in ("tiny-random-gemma3", "tiny-random-gpt2"):
        rt = make_runtime(model=model, store=tmp_path / model, block_tokens=64)
        rt.ingest([doc], layout="chain", progress=False)
        cold = cold_two_stage_logits(rt, PROMPT)
        warm, prefix = warm_logits(rt, PROMPT)
        assert len(prefix.blocks) > 3
        assert torch.equal(cold, warm), model


def test_reingest_recomputes_a_block_repair_marked_damaged_and_heals_it(ingested):
    """fsck --repair marks a flipped block damaged; re-ingesting the document recomputes it (only
    that block) and every later ask loads the whole chain again, bit-identically."""
    rt, doc = ingested
    cold = cold_two_stage_logits(rt, PROMPT)
    blocks = flip_a_byte_of_block(rt, 2)
    rt.store.fsck(repair=True)
    assert rt.store.is_damaged(rt.store.get(rt.config.tenant, "block", blocks[2].key))
    again = rt.ingest([doc], layout="chain", progress=False)[0]
    assert again.computed >= 1
    healed = rt.store.get(rt.config.tenant, "block", blocks[2].key)
    assert not rt.store.is_damaged(healed)
    warm, prefix = warm_logits(rt, PROMPT)
    assert len(prefix.blocks) == again.blocks and torch.equal(warm, cold)
