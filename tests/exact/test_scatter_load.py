"""The fast load path: stored blocks read straight into one preallocated K/V (scatter reads).

Expectations:
1. A clean load takes the fast path for every block and serves exactly the bytes the slow path
   serves (bit-identical K/V).
2. A damaged payload file, or an encrypted/compressed store, never takes it; the slow path then
   decides (the damaged block is a miss, recomputed with everything after it; the blocks before
   it are served), so nothing unverified is ever served.
3. Any payload dtype (bf16 too) takes it, and the K/V does not depend on the number of workers.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch

from tests.conftest import lorem


def _ingest(rt, tmp_path):
    doc = tmp_path / "doc.txt"
    doc.write_text(lorem(12, 5))
    rt.ingest([doc], layout="both", progress=False)  # the whole chain stored now: the loads are what is tested
    return doc.read_text()


@pytest.fixture(scope="module")
def plain_store(tmp_path_factory) -> tuple[Path, str]:
    """(store, text): a plain store with the document ingested, once per module."""
    from grm.runtime import Runtime

    work = tmp_path_factory.mktemp("plain")
    with Runtime.open(store=work / "store", model="tiny-random-llama", threads=2, device="cpu",
                      block_tokens=64) as rt:
        text = _ingest(rt, work)
    return work / "store", text


@pytest.fixture()
def plain(make_runtime, plain_store, tmp_path):
    """A runtime on this test's own copy of the plain store (it may damage it), and the text."""
    store, text = plain_store
    shutil.copytree(store, tmp_path / "store")
    return make_runtime(block_tokens=64), text


def test_clean_load_is_scattered_and_identical_to_the_slow_path(plain):
    rt, text = plain
    fast = rt.exact.load_prefix(text)
    assert rt.exact.counters["scatter_loads"] == len(fast.blocks) > 2
    store_read = rt.store.read_payload_into
    try:
        rt.store.read_payload_into = lambda rec, plan: False  # force the slow path
        slow = rt.exact.load_prefix(text)
    finally:
        rt.store.read_payload_into = store_read
    assert torch.equal(fast.kv.keys, slow.kv.keys) and torch.equal(fast.kv.values, slow.kv.values)
    assert fast.tokens == slow.tokens and [r.key for r in fast.blocks] == [r.key for r in slow.blocks]
    assert rt.exact.counters["scatter_loads"] == len(fast.blocks)  # the forced run did not use it


def test_a_damaged_file_falls_back_and_is_a_miss(plain):
    rt, text = plain
    first = rt.exact.load_prefix(text)
    victim = first.blocks[1]
    path = rt.store.payload_path(victim)
    data = bytearray(path.read_bytes())
    data[-7] ^= 0x01  # one bit of tensor data: only the SHA-256 over what was read can see it
    path.write_bytes(bytes(data))
    before, misses = rt.exact.counters["scatter_loads"], rt.exact.counters["block_misses"]
    again = rt.exact.load_prefix(text)
    # block 0 read in place; block 1 refused by the fast path, then a miss of the verified read;
    # nothing after it is served (it is recomputed after the miss)
    assert rt.exact.counters["scatter_loads"] == before + 1
    assert rt.exact.counters["block_misses"] == misses + 1
    assert [r.key for r in again.blocks] == [first.blocks[0].key] and again.misses == 1
    assert [list(b.ids) for b in again.pending][0] == list(first.blocks[1].meta["ids"])
    assert torch.equal(again.kv.keys, first.kv.keys[:, :, : again.tokens])
    assert torch.equal(again.kv.values, first.kv.values[:, :, : again.tokens])


def test_encrypted_or_compressed_stores_use_the_slow_path(make_runtime, tmp_path):
    rt = make_runtime(block_tokens=64, master_key=b"k" * 32, compress=True)
    text = _ingest(rt, tmp_path)
    prefix = rt.exact.load_prefix(text)
    assert prefix.blocks and rt.exact.counters["scatter_loads"] == 0


def test_bf16_blocks_load_in_place_on_any_number_of_workers(make_runtime, tmp_path):
    """16-bit payloads take the in-place path too, and the result does not depend on how many
    workers read or on the order they finish in: the same bytes as the verified-bytes path."""
    rt = make_runtime(block_tokens=64, dtype="bfloat16")
    text = _ingest(rt, tmp_path)
    loads = []
    for workers in (1, 4):
        rt.exact.workers = workers
        loads.append(rt.exact.load_prefix(text))
    assert rt.exact.counters["scatter_loads"] == 2 * len(loads[0].blocks) > 2
    store_read = rt.store.read_payload_into
    try:
        rt.store.read_payload_into = lambda rec, plan: False  # the verified-bytes path
        loads.append(rt.exact.load_prefix(text))
    finally:
        rt.store.read_payload_into = store_read
    first = loads[0]
    assert first.kv.keys.dtype == torch.bfloat16
    for other in loads[1:]:
        assert torch.equal(first.kv.keys, other.kv.keys) and torch.equal(first.kv.values, other.kv.values)
        assert [r.key for r in first.blocks] == [r.key for r in other.blocks]
