"""Left-padded batches of caches (grm/kv/batch.py PaddedBatch).

Expectations:
1. After rows are added (shorter, then longer than the batch) and some kept, every row holds its
   own K/V right-aligned, its pads are zeros, and padding every row shares is dropped.
2. A step reads one token per row at that row's seat: each row's logits are those of the same
   token read alone after that row's own cache, up to rounding (not bit-identical: masked
   columns and several rows per matrix product), with the same top token; a batch of one row is
   bit-identical to the lone step.
"""

from __future__ import annotations

import torch

from grm.kv import KV, new_cache
from grm.kv.batch import PaddedBatch
from grm.kv.device import mount
from grm.kv.forward import prefill, step


def _kv(tokens: int, seed: int) -> KV:
    g = torch.Generator().manual_seed(seed)
    shape = (3, 2, tokens, 4)  # [layers, kv_heads, tokens, head_dim]
    return KV(torch.randn(shape, generator=g), torch.randn(shape, generator=g))


def _row(batch: PaddedBatch, r: int) -> KV:
    pad = batch.pads[r]
    keys = torch.stack([layer.keys[r, :, pad:] for layer in batch.cache.layers])
    values = torch.stack([layer.values[r, :, pad:] for layer in batch.cache.layers])
    assert all(float(layer.keys[r, :, :pad].abs().sum()) == 0 for layer in batch.cache.layers)
    return KV(keys, values)


def test_rows_keep_their_own_kv_right_aligned_through_adds_and_keeps():
    kvs = [_kv(5, 0), _kv(9, 1), _kv(3, 2), _kv(12, 3)]
    batch = PaddedBatch()
    for kv in kvs:
        batch.add(mount(kv, "cpu"))
    assert batch.rows == 4 and batch.length == 12 and batch.pads == [7, 3, 9, 0]
    for r, kv in enumerate(kvs):
        got = _row(batch, r)
        assert torch.equal(got.keys, kv.keys) and torch.equal(got.values, kv.values)
    batch.keep([2, 0])  # the longest row left: its padding goes
    assert batch.pads == [2, 0] and batch.length == 5
    for r, kv in zip(range(2), (kvs[2], kvs[0])):
        got = _row(batch, r)
        assert torch.equal(got.keys, kv.keys) and torch.equal(got.values, kv.values)
    batch.keep([])
    assert batch.rows == 0 and batch.cache is None


def test_a_step_reads_each_row_as_alone(tiny_models):
    model = tiny_models["llama"].model
    prompts = [[5, 9, 13, 2, 7], [8, 3, 11, 4, 6, 10, 12, 1, 14, 15, 16], [21, 22, 23]]
    alone, caches = [], []
    for ids in prompts:
        for keep in (alone, caches):
            cache = new_cache()
            prefill(model, cache, ids, 0)
            keep.append(cache)
    batch = PaddedBatch()
    for cache in caches:
        batch.add(cache)
    tokens, seats = [31, 32, 33], [len(ids) for ids in prompts]
    for _ in range(3):  # three steps, the batch's cache growing in place
        got = batch.step(model, tokens, seats)
        want = torch.stack([step(model, c, t, s) for c, t, s in zip(alone, tokens, seats)])
        assert torch.allclose(got, want, atol=1e-5, rtol=1e-5)
        assert torch.equal(got.argmax(-1), want.argmax(-1))
        tokens, seats = [int(t) for t in want.argmax(-1)], [s + 1 for s in seats]


def test_a_batch_of_one_row_steps_bit_identically_to_alone(tiny_models):
    model = tiny_models["llama"].model
    alone, row = new_cache(), new_cache()
    for cache in (alone, row):
        prefill(model, cache, [5, 9, 13, 2, 7], 0)
    batch = PaddedBatch()
    batch.add(row)
    for i in range(3):
        want = step(model, alone, 40 + i, 5 + i)
        assert torch.equal(batch.step(model, [40 + i], [5 + i])[0], want)
