"""Mount or re-read (grm/grafts/reread.py) on a tiny random model.

Expectations:
1. The decision follows the cost lines: short grafts re-read, long ones mount, where the lines
   cross; composition risk moves the crossing toward re-reading.
2. Calibration measures positive costs and is stored once: a second call reads the file back
   (same values), another model's file is measured again.
3. An arena told to re-read a graft reads its text in place: the result equals reading the texts
   in context, the graft is named in `reread`, and its tokens count as computed.
"""

from __future__ import annotations

import torch

from grm.grafts import build
from grm.grafts.reread import Costs, load_or_calibrate
from grm.kv import kv_from_cache

from tests.grafts.test_blend import composed


def test_short_grafts_are_reread_long_ones_mounted_and_risk_favours_rereading():
    c = Costs("m", "x", prefill_fixed_s=0.0, prefill_per_token_s=0.001, mount_fixed_s=0.005,
              mount_per_token_s=0.0005)  # the lines cross at 10 tokens
    assert c.reread(1) and c.reread(9) and not c.reread(11) and not c.reread(500)
    # one other graft beside it at risk 0.5: the mount counts 1.5x, the lines cross at 30 tokens
    assert c.reread(25, side_by_side=2, risk=0.5) and not c.reread(35, side_by_side=2, risk=0.5)
    assert not c.reread(25, side_by_side=1, risk=0.5)  # alone, no composition risk


def test_calibration_is_measured_once_and_stored(make_runtime, tmp_path):
    rt = make_runtime()
    path = tmp_path / "costs.json"
    vocab = rt.lm.model.config.vocab_size
    a = load_or_calibrate(path, rt.lm.model, rt.dialect, rt.lm.identity, rt.exact.sinks(), vocab)
    assert path.exists() and a.prefill_per_token_s >= 0 and a.mount_per_token_s >= 0  # a slope may be 0 in noise
    assert a.read_s(256) > 0 and a.mount_s(256) > 0
    b = load_or_calibrate(path, rt.lm.model, rt.dialect, rt.lm.identity, rt.exact.sinks(), vocab)
    assert b == a
    c = load_or_calibrate(path, rt.lm.model, rt.dialect, "another-model", rt.exact.sinks(), vocab)
    assert c.identity == "another-model" and c.measured_at != a.measured_at


def test_a_reread_graft_is_read_in_place_and_counted_as_computed(make_runtime):
    rt = make_runtime()
    sinks = rt.exact.sinks()
    _, mounts, ids, joint = composed(rt)
    arena = build(rt.lm.model, rt.dialect, sinks, mounts, reread=lambda m, k: True)
    got = kv_from_cache(arena.cache)
    assert torch.allclose(got.keys, joint.keys, atol=1e-5) and torch.allclose(got.values, joint.values, atol=1e-5)
    assert arena.reread == ["g0", "g1", "g2"] and arena.computed == len(ids) and arena.from_memory == sinks.tokens
    only_last = build(rt.lm.model, rt.dialect, sinks, mounts, reread=lambda m, k: m.id == "g2")
    assert only_last.reread == ["g2"] and only_last.computed == len(mounts[2].ids)
