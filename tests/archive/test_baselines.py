"""KIVI-style int8/int4 baselines: per-channel keys, per-token values, group locality, byte counts."""

from __future__ import annotations

import pytest
import torch

from bench.lib.baselines import KiviConfig, KiviQuantizer, fake_quant
from grm.archive.quantizer import KVQuantizer


def _kv(tokens: int = 96, heads: int = 2, dim: int = 64, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(heads, tokens, dim, generator=gen), torch.randn(heads, tokens, dim, generator=gen)


@pytest.mark.parametrize("bits", [8, 4])
def test_error_is_at_most_one_step_of_each_group(bits):
    keys, values = _kv()
    kq, vq = KiviQuantizer(KiviConfig(bits, 32)).roundtrip(0, keys, values)
    levels = 2**bits - 1
    # keys: groups of 32 tokens per (head, channel)
    kg = keys.reshape(2, 3, 32, 64)
    kstep = (kg.amax(2, keepdim=True) - kg.amin(2, keepdim=True)) / levels
    assert ((kq.reshape(2, 3, 32, 64) - kg).abs() <= kstep * 0.5 + 1e-3 * kstep + 1e-3).all()
    # values: groups of 32 channels per (head, token)
    vg = values.reshape(2, 96, 2, 32)
    vstep = (vg.amax(3, keepdim=True) - vg.amin(3, keepdim=True)) / levels
    assert ((vq.reshape(2, 96, 2, 32) - vg).abs() <= vstep * 0.5 + 1e-3 * vstep + 1e-3).all()
    assert kq.shape == keys.shape and vq.dtype == values.dtype


def test_int4_uses_at_most_16_levels_per_group():
    keys, values = _kv()
    kq, vq = KiviQuantizer(KiviConfig(4, 32)).roundtrip(0, keys, values)
    for h in range(2):
        for c in range(0, 64, 7):
            assert kq[h, :32, c].unique().numel() <= 16
        for t in range(0, 96, 11):
            assert vq[h, t, :32].unique().numel() <= 16


def test_keys_are_per_channel_so_an_outlier_channel_stays_in_its_own_groups():
    keys, values = _kv()
    keys[:, :, 5] *= 100.0  # an outlier channel, as real keys have
    kq, _ = KiviQuantizer(KiviConfig(8, 32)).roundtrip(0, keys, values)
    others = [c for c in range(64) if c != 5]
    assert (kq[:, :, others] - keys[:, :, others]).abs().max() < 0.02
    # The same tensor quantized per token (groups along channels) is ruined by the outlier.
    per_token = fake_quant(keys, dim=2, group=32, bits=8)
    assert (per_token[:, :, others] - keys[:, :, others]).abs().max() > 0.1


def test_values_are_per_token_so_an_outlier_token_stays_in_its_own_groups():
    keys, values = _kv()
    values[:, 40] *= 100.0
    _, vq = KiviQuantizer(KiviConfig(8, 32)).roundtrip(0, keys, values)
    rest = [t for t in range(96) if t != 40]
    assert (vq[:, rest] - values[:, rest]).abs().max() < 0.02


def test_key_groups_are_local_and_a_partial_last_group_is_its_own():
    keys, values = _kv(tokens=80)  # groups [0,32), [32,64), [64,80)
    q = KiviQuantizer(KiviConfig(4, 32))
    kq, vq = q.roundtrip(0, keys, values)
    changed = keys.clone()
    changed[:, 40] += 50.0  # a token of the second group
    kq2, _ = q.roundtrip(0, changed, values)
    assert torch.equal(kq2[:, :32], kq[:, :32]) and torch.equal(kq2[:, 64:], kq[:, 64:])
    assert not torch.equal(kq2[:, 32:64], kq[:, 32:64])
    # Quantizing one group alone gives the same numbers as quantizing the window (locality contract).
    alone, _ = q.roundtrip(0, keys[:, 32:64], values[:, 32:64])
    assert torch.equal(alone, kq[:, 32:64])
    tail, _ = q.roundtrip(0, keys[:, 64:], values[:, 64:])
    assert torch.equal(tail, kq[:, 64:])


def test_constant_groups_come_back_exactly_without_nans():
    keys = torch.full((1, 32, 64), 0.375)
    kq, vq = KiviQuantizer(KiviConfig(4, 32)).roundtrip(0, keys, keys.clone())
    assert torch.isfinite(kq).all() and torch.equal(kq, keys) and torch.equal(vq, keys)


def test_bytes_per_token_on_smollm2_geometry():
    # 30 layers x 3 heads; per head keys 64*b/8 + 64*4/32, values 64*b/8 + 2*4.
    assert KiviQuantizer(KiviConfig(4, 32)).archive_bytes_per_token(30, 3, 64) == pytest.approx(7200.0)
    assert KiviQuantizer(KiviConfig(8, 32)).archive_bytes_per_token(30, 3, 64) == pytest.approx(12960.0)


def test_is_a_kv_quantizer_and_validates_its_config():
    assert isinstance(KiviQuantizer(KiviConfig(4)), KVQuantizer)
    assert KiviQuantizer(KiviConfig(4)).group == 32
    for bad in ({"bits": 1}, {"bits": 9}, {"bits": 4, "group": 0}, {"bits": 4.0}):
        with pytest.raises(ValueError):
            KiviConfig(**bad)
