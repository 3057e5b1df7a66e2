"""Dialects: geometry, re-seat numerics (invariant 3), graftability profiles and self-tests."""

from __future__ import annotations

import pytest
import torch

from grm.dialects import REMOUNTABLE, SAME_POSITION_ONLY, dialect_for, self_test
from grm.dialects.rotary import rotate_keys
from grm.dialects.selftest import PROBE_TEXT
from grm.errors import DialectError
from grm.kv import kv_from_cache, new_cache
from grm.kv.forward import prefill


def _keys_at(lm, ids, start):
    cache = new_cache()
    prefill(lm.model, cache, ids, start)
    return kv_from_cache(cache).keys  # [layers, kv_heads, tokens, head_dim]


def test_geometry_is_described_correctly(tiny_models):
    llama = dialect_for(tiny_models["llama"].model)
    assert (llama.n_layers, llama.q_heads, llama.kv_heads, llama.head_dim) == (2, 4, 2, 16)
    assert llama.profile == REMOUNTABLE and llama.sliding_window == (None, None)
    gemma = dialect_for(tiny_models["gemma3"].model)
    assert gemma.sliding_window == (16, 16, None)
    # two rotary bases: local (10k) on sliding layers, global (1M) on the full layer
    assert not torch.equal(gemma.inv_freq[0], gemma.inv_freq[2])
    assert torch.equal(gemma.inv_freq[0], gemma.inv_freq[1])
    gpt2 = dialect_for(tiny_models["gpt2"].model)
    assert gpt2.profile == SAME_POSITION_ONLY and gpt2.position_law == "absolute"


@pytest.mark.parametrize("family", ["llama", "gemma3", "gpt2"])
def test_self_test_passes_on_tiny_models(tiny_models, family):
    lm = tiny_models[family]
    d = dialect_for(lm.model)
    result = self_test(d, lm.model, list(lm.tokenizer.sink_ids) + lm.tokenizer.encode(PROBE_TEXT))
    if d.profile == REMOUNTABLE:
        assert result.max_rel_error <= 1e-4
    else:
        assert result.max_rel_error > 1e-3  # keys really move with position: absolute law


def test_reseat_by_zero_is_the_identity_object(tiny_models):
    lm = tiny_models["llama"]
    d = dialect_for(lm.model)
    keys = _keys_at(lm, lm.tokenizer.encode("hello world"), 0)[0]
    assert d.reseat(keys, 0, 0) is keys  # not even a round trip through float64


@pytest.mark.parametrize("family", ["llama", "gemma3"])
@pytest.mark.parametrize("delta", [1, 17, 300, 1000])
def test_reseat_matches_forward_pass_at_the_new_seats(tiny_models, family, delta):
    # Far seats (d ~ 2e4) differ by ~5e-4 because the *model's* forward pass computes its angles in
    # fp32 (position * inv_freq); the float64 rotation is the more exact of the two there.
    lm = tiny_models[family]
    d = dialect_for(lm.model)
    ids = list(lm.tokenizer.sink_ids) + lm.tokenizer.encode("Re-seat me somewhere else, please.")
    base, moved = _keys_at(lm, ids, 0), _keys_at(lm, ids, delta)
    for layer in range(d.n_layers):
        got = d.reseat(base[layer], layer, delta)
        assert (got - moved[layer]).abs().max() <= 1e-4 * moved[layer].abs().max()


def test_rotation_composes_and_inverts():
    torch.manual_seed(0)
    k = torch.randn(2, 5, 16)
    inv = 1.0 / (10000 ** (torch.arange(0, 16, 2, dtype=torch.float64) / 16))
    there_and_back = rotate_keys(rotate_keys(k, inv, 300), inv, -300)
    assert torch.allclose(there_and_back, k, atol=1e-5)
    assert not torch.allclose(rotate_keys(k, inv, 300), k, atol=1e-3)


def test_gpt2_reseat_is_refused_with_a_clear_error(tiny_models):
    d = dialect_for(tiny_models["gpt2"].model)
    keys = torch.zeros(d.kv_heads, 3, d.head_dim)
    assert d.reseat(keys, 0, 0) is keys  # same-position restore is fine
    with pytest.raises(DialectError, match="absolute positions.*cannot be re-seated"):
        d.reseat(keys, 0, 5)


def test_unknown_family_is_refused():
    class Fake(torch.nn.Module):
        class config:  # noqa: N801
            model_type = "mamba"

    with pytest.raises(DialectError, match="no dialect for model family 'mamba'"):
        dialect_for(Fake())


def test_a_dialect_that_misdescribes_rotary_is_refused(tiny_models):
    import dataclasses

    lm = tiny_models["llama"]
    good = dialect_for(lm.model)
    wrong = dataclasses.replace(good, inv_freq=tuple(f * 1.5 for f in good.inv_freq))
    with pytest.raises(DialectError, match="rotary self-test failed"):
        self_test(wrong, lm.model, list(lm.tokenizer.sink_ids) + lm.tokenizer.encode(PROBE_TEXT))


def test_a_passing_self_test_is_kept_and_bound_to_what_it_checked(tiny_models, tmp_path, monkeypatch):
    import dataclasses

    from grm.dialects import selftest

    lm = tiny_models["llama"]
    good = dialect_for(lm.model)
    ids = list(lm.tokenizer.sink_ids) + lm.tokenizer.encode(PROBE_TEXT)
    runs: list[int] = []
    real = selftest.measure
    monkeypatch.setattr(selftest, "measure", lambda *a: runs.append(1) or real(*a))
    first = selftest.kept_self_test(good, lm.model, ids, lm.identity, tmp_path)
    assert selftest.kept_self_test(good, lm.model, ids, lm.identity, tmp_path) == first and len(runs) == 1
    selftest.kept_self_test(good, lm.model, ids, "another identity", tmp_path)  # another model: tested
    selftest.kept_self_test(good, lm.model, ids[:-1], lm.identity, tmp_path)  # another probe: tested
    selftest.kept_self_test(good, lm.model, ids, lm.identity, None)  # no cache: tested
    assert len(runs) == 4
    for kept in (tmp_path / "selftest").glob("*.json"):  # a damaged file is no result: tested again
        kept.write_text("{not json")
    assert selftest.kept_self_test(good, lm.model, ids, lm.identity, tmp_path) == first and len(runs) == 5
    monkeypatch.setattr(selftest, "_code_digest", lambda: "other dialect code")  # the dialects changed
    selftest.kept_self_test(good, lm.model, ids, lm.identity, tmp_path)
    assert len(runs) == 6
    wrong = dataclasses.replace(good, inv_freq=tuple(f * 1.5 for f in good.inv_freq))
    for _ in range(2):  # a failure is never kept
        with pytest.raises(DialectError, match="rotary self-test failed"):
            selftest.kept_self_test(wrong, lm.model, ids, "wrong", tmp_path)
    assert len(runs) == 8


def test_16_bit_keys_rotate_in_fp32_and_round_once():
    """A bf16 re-seat is the float64 rotation rounded once, up to ties of that one rounding."""
    from grm.dialects.rotary import rotate_half, work_dtype

    torch.manual_seed(0)
    keys = (torch.randn(2, 200, 64) * 3).to(torch.bfloat16)
    inv = 1.0 / (10000 ** (torch.arange(0, 64, 2, dtype=torch.float64) / 64))
    angles = 1234.0 * inv
    emb = torch.cat((angles, angles))
    k64 = keys.to(torch.float64)
    exact = k64 * emb.cos() + rotate_half(k64) * emb.sin()
    got = rotate_keys(keys, inv, 1234)
    assert got.dtype == torch.bfloat16 and work_dtype(torch.bfloat16) == torch.float32
    assert work_dtype(torch.float32) == torch.float64
    ulp = torch.finfo(torch.bfloat16).eps * exact.abs().clamp_min(1e-30)
    assert bool(((got.double() - exact).abs() <= ulp).all())  # within one rounding (half an ulp, 2^-8 relative)
    assert float((got != exact.to(torch.bfloat16)).float().mean()) < 1e-3


def test_the_self_test_separates_the_models_noise_from_the_reseat(tiny_models):
    """measure() reports the raw error, the values' own drift (floor) and the excess over it, and
    never raises for a numeric failure; self_test() raises on one."""
    import dataclasses

    from grm.dialects import measure_selftest

    lm = tiny_models["llama"]
    ids = list(lm.tokenizer.sink_ids) + lm.tokenizer.encode(PROBE_TEXT * 4)
    good = dialect_for(lm.model)
    r = measure_selftest(good, lm.model, ids)
    assert r.passed and r.floor < 1e-5 and r.excess <= r.max_rel_error < 1e-4  # fp32: no noise to speak of
    wrong = dataclasses.replace(good, inv_freq=tuple(f * 1.5 for f in good.inv_freq))
    bad = measure_selftest(wrong, lm.model, ids)
    assert not bad.passed and bad.excess > 0.1 and bad.tokens == len(ids)
    with pytest.raises(DialectError, match="beyond the model's own position noise"):
        self_test(wrong, lm.model, ids)


def test_bf16_self_test_passes_where_the_forward_pass_itself_drifts(tmp_path):
    """In bf16 the forward pass moves the values (which no rotation touches) between two starting
    seats; the gate holds only what the re-seat adds beyond that, and a wrong map still fails."""
    import dataclasses

    from grm.dialects import measure_selftest
    from grm.models import load_model

    lm = load_model("random:gemma-3-4b@small", tmp_path, dtype="bfloat16")
    d = dialect_for(lm.model)
    ids = list(lm.tokenizer.sink_ids) + lm.tokenizer.encode(PROBE_TEXT * 5)
    r = measure_selftest(d, lm.model, ids)
    assert r.floor > 1e-3 and r.passed and r.tolerance == 6e-2
    wrong = dataclasses.replace(d, inv_freq=tuple(f * 1.5 if i % 6 == 5 else f for i, f in enumerate(d.inv_freq)))
    assert not measure_selftest(wrong, lm.model, ids).passed  # only the full-attention layer misdescribed
