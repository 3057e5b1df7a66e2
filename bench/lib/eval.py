"""Perplexity over non-overlapping windows of held-out text, with seeded bootstrap confidence intervals.

A window is the model's sink tokens followed by the next `window_tokens - len(sinks)` tokens of
the text: windows never overlap and never share text. Scored are the predictions of every text
token of the window (targets at seats >= sinks). Perplexity = exp(total NLL / scored tokens).

Confidence intervals resample whole windows with replacement (tokens inside a window are not
independent), `bootstrap` times from a numpy Generator seeded with `seed`, and take the
percentile interval. `ratio_ci` resamples the same windows for two methods (paired), which is
what a "+x% perplexity" claim needs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from bench.lib.mixed_attention import MixedSpec, window_nll


@dataclass(frozen=True)
class EvalConfig:
    window_tokens: int = 1024  # seats per window, sinks included
    bootstrap: int = 2000  # bootstrap resamples
    confidence: float = 0.95  # two-sided interval
    seed: int = 0  # seeds the resampling

    def __post_init__(self) -> None:
        if not isinstance(self.window_tokens, int) or self.window_tokens < 8:
            raise ValueError(f"window_tokens must be an integer >= 8, got {self.window_tokens!r}")
        if not isinstance(self.bootstrap, int) or self.bootstrap < 1:
            raise ValueError(f"bootstrap must be a positive integer, got {self.bootstrap!r}")
        if not 0.0 < self.confidence < 1.0:
            raise ValueError(f"confidence must be in (0, 1), got {self.confidence!r}")


@dataclass(frozen=True)
class Perplexity:
    ppl: float  # exp(mean NLL over all scored tokens)
    lo: float  # bootstrap interval over windows
    hi: float
    mean_nll: float  # nats per token
    windows: int
    tokens: int  # scored tokens


def token_windows(token_ids: list[int], sinks: list[int], config: EvalConfig, limit: int | None = None) -> list[list[int]]:
    """Non-overlapping windows [sinks + body] over `token_ids`; only full windows; at most `limit`."""
    body = config.window_tokens - len(sinks)
    if body < 2:
        raise ValueError("the window leaves no room for text after the sinks")
    out = [list(sinks) + token_ids[a : a + body] for a in range(0, len(token_ids) - body + 1, body)]
    return out if limit is None else out[:limit]


def scored(nll: torch.Tensor, sinks: int) -> torch.Tensor:
    """The NLLs of one window that count: predictions of targets at seats >= sinks."""
    return nll[max(sinks - 1, 0) :]


def evaluate(model: torch.nn.Module, windows: list[list[int]], spec: MixedSpec) -> list[torch.Tensor]:
    """Scored NLLs [tokens] of every window under `spec` (one mixed-attention pass per window)."""
    return [scored(window_nll(model, ids, spec), spec.window.sinks) for ids in windows]


def _percentiles(samples: np.ndarray, confidence: float) -> tuple[float, float]:
    tail = (1.0 - confidence) / 2 * 100
    lo, hi = np.percentile(samples, [tail, 100 - tail])
    return float(lo), float(hi)


def _resamples(n: int, config: EvalConfig) -> np.ndarray:
    """[bootstrap, n] window indices drawn with replacement (the same for every method)."""
    return np.random.default_rng(config.seed).integers(0, n, size=(config.bootstrap, n))


def perplexity(nlls: list[torch.Tensor], config: EvalConfig) -> Perplexity:
    """Perplexity of the scored NLLs of several windows, with a bootstrap interval over windows."""
    if not nlls:
        raise ValueError("perplexity needs at least one window")
    sums = np.array([float(x.sum()) for x in nlls])
    counts = np.array([x.numel() for x in nlls], dtype=np.float64)
    mean = sums.sum() / counts.sum()
    idx = _resamples(len(nlls), config)
    boot = np.exp(sums[idx].sum(1) / counts[idx].sum(1))
    lo, hi = _percentiles(boot, config.confidence)
    return Perplexity(float(np.exp(mean)), lo, hi, float(mean), len(nlls), int(counts.sum()))


def ratio_ci(base: list[torch.Tensor], other: list[torch.Tensor], config: EvalConfig) -> tuple[float, float, float]:
    """ppl(other) / ppl(base) on the same windows, with a paired bootstrap interval: (ratio, lo, hi)."""
    if len(base) != len(other) or any(a.numel() != b.numel() for a, b in zip(base, other)):
        raise ValueError("a paired ratio needs the same windows for both methods")
    diff = np.array([float(b.sum() - a.sum()) for a, b in zip(base, other)])
    counts = np.array([a.numel() for a in base], dtype=np.float64)
    idx = _resamples(len(base), config)
    boot = np.exp(diff[idx].sum(1) / counts[idx].sum(1))
    lo, hi = _percentiles(boot, config.confidence)
    return float(np.exp(diff.sum() / counts.sum())), lo, hi
