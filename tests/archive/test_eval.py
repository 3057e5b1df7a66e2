"""Perplexity windows and seeded bootstrap intervals."""

from __future__ import annotations

import math

import pytest
import torch

from bench.lib.eval import EvalConfig, perplexity, ratio_ci, scored, token_windows


def test_windows_are_non_overlapping_full_and_start_with_the_sinks():
    cfg = EvalConfig(window_tokens=16)
    ids = list(range(100, 150))
    wins = token_windows(ids, [1, 1, 1, 1], cfg)
    assert len(wins) == 4 and all(len(w) == 16 and w[:4] == [1, 1, 1, 1] for w in wins)
    bodies = [t for w in wins for t in w[4:]]
    assert bodies == ids[:48]  # consecutive, no overlap, the 2-token tail dropped
    assert len(token_windows(ids, [1] * 4, cfg, limit=2)) == 2


def test_scored_drops_the_predictions_of_sink_tokens():
    nll = torch.arange(15.0)  # predictions of targets at seats 1..15
    assert scored(nll, 4).tolist() == list(range(3, 15))


def test_perplexity_interval_is_seeded_and_brackets_the_estimate():
    gen = torch.Generator().manual_seed(0)
    nlls = [torch.rand(100, generator=gen) * 2 + i * 0.1 for i in range(8)]
    cfg = EvalConfig(bootstrap=500, seed=3)
    p = perplexity(nlls, cfg)
    assert p.ppl == pytest.approx(math.exp(float(torch.cat(nlls).mean())))
    assert p.lo < p.ppl < p.hi and p.windows == 8 and p.tokens == 800
    assert perplexity(nlls, cfg) == p
    assert perplexity(nlls, EvalConfig(bootstrap=500, seed=4)) != p


def test_paired_ratio_of_a_constant_shift_has_no_width():
    base = [torch.rand(50) for _ in range(6)]
    shifted = [x + 0.1 for x in base]
    r, lo, hi = ratio_ci(base, shifted, EvalConfig(bootstrap=200))
    assert r == pytest.approx(math.exp(0.1)) and lo == pytest.approx(r) and hi == pytest.approx(r)
    with pytest.raises(ValueError):
        ratio_ci(base, shifted[:5], EvalConfig())
