"""Composition repair by selective recomputation (grm/grafts/blend.py), on tiny random models.

Expectations:
1. Recomputing every token after the first graft gives the joint read's K/V (the same text read
   in context), layer for layer: the mask and the write-back are right.
2. At the default ratio, the arena moves closer to the joint read than with no repair, and the
   graft payloads it was built from are never written (the arena holds views of them).
3. The selection always includes each later graft's first token and never the first graft's.
"""

from __future__ import annotations

import pytest
import torch

from grm.grafts import Mount, build
from grm.grafts.blend import BlendConfig, blend, select
from grm.kv import cache_from_kv, kv_from_cache
from grm.kv.forward import prefill

from tests.grafts.test_grafts import TEXTS, read_alone


def composed(rt):
    sinks = rt.exact.sinks()
    mounts, ids = [], []
    for i, text in enumerate(TEXTS):
        kv, t_ids, seat = read_alone(rt, text)
        mounts.append(Mount(f"g{i}", t_ids, seat, kv))
        ids += t_ids
    arena = build(rt.lm.model, rt.dialect, sinks, mounts)
    joint = cache_from_kv(sinks)
    prefill(rt.lm.model, joint, ids, sinks.tokens)
    return arena, mounts, ids, kv_from_cache(joint)


def distance(arena, joint) -> float:
    kv = kv_from_cache(arena.cache)
    return float((kv.keys - joint.keys).abs().max() + (kv.values - joint.values).abs().max())


@pytest.mark.parametrize("model", ["tiny-random-llama", "tiny-random-gemma3"])
def test_recomputing_every_token_equals_the_joint_read(make_runtime, model):
    rt = make_runtime(model)
    arena, mounts, ids, joint = composed(rt)
    assert distance(arena, joint) > 1e-3  # composed apart: there is something to repair
    spans = [arena.spans[m.id] for m in mounts]
    seats = blend(rt.lm.model, arena.cache, spans, ids, BlendConfig(ratio=1.0))
    assert len(seats) == len(ids) - len(mounts[0].ids)
    assert distance(arena, joint) < 1e-4


def test_partial_blend_moves_toward_the_joint_read_and_leaves_payloads_alone(make_runtime):
    rt = make_runtime()
    arena, mounts, ids, joint = composed(rt)
    before = distance(arena, joint)
    payloads = [m.kv.keys.clone() for m in mounts]
    spans = [arena.spans[m.id] for m in mounts]
    seats = select(rt.lm.model, arena.cache, spans, ids, BlendConfig(ratio=0.3))
    assert {a for a, _ in spans[1:]} <= set(seats)
    assert not set(range(*spans[0])) & set(seats)
    blend(rt.lm.model, arena.cache, spans, ids, BlendConfig(ratio=0.3))
    kv, j = kv_from_cache(arena.cache), joint
    err_after = float((kv.keys - j.keys).norm() + (kv.values - j.values).norm())
    arena0, *_ = composed(rt)
    kv0 = kv_from_cache(arena0.cache)
    err_before = float((kv0.keys - j.keys).norm() + (kv0.values - j.values).norm())
    assert before > 0 and err_after < err_before
    assert all(torch.equal(p, m.kv.keys) for p, m in zip(payloads, mounts))


def test_an_arena_built_with_blend_counts_recomputed_tokens_as_computed(make_runtime):
    rt = make_runtime()
    _, mounts, ids, joint = composed(rt)
    arena = build(rt.lm.model, rt.dialect, rt.exact.sinks(), mounts, blend=BlendConfig(ratio=1.0))
    sinks = rt.exact.sinks().tokens
    assert arena.computed == len(ids) - len(mounts[0].ids)
    assert arena.from_memory == sinks + len(mounts[0].ids)
    assert distance(arena, joint) < 1e-4
