"""Training the archive's codebooks from text for one loaded model (what `grm archive train` runs).

The text is cut into non-overlapping windows of `window_tokens` seats (the sinks, then the next
tokens of the text; a last shorter window is kept if it holds at least MIN_WINDOW_TOKENS text
tokens), each window is read alone from seat 0 and its position-free K/V harvested without the
sinks (grm/archive/harvest.py), and one RVQ stack per (layer, head, side) is trained on all of it
(grm/archive/rvq.py). k defaults to 256, smaller when the text is short: k-means wants many
vectors per centroid, so k is the largest power of two <= tokens / VECTORS_PER_CENTROID (>= 2).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass

import torch

from grm.archive.harvest import harvest
from grm.archive.rvq import STORAGES, RVQCodebooks, RVQConfig, train_rvq
from grm.dialects import Dialect
from grm.errors import UserInputError
from grm.kv import KV
from grm.models import LoadedModel

MIN_WINDOW_TOKENS = 8
VECTORS_PER_CENTROID = 16
DEFAULT_K = 256


@dataclass(frozen=True)
class TrainConfig:
    k: int | None = None  # centroids per stage; None = auto_k(training tokens)
    key_stages: int = 4  # stages trained for keys (the measured hybrid: K4/V3)
    value_stages: int = 3  # stages trained for values
    iters: int = 15  # Lloyd rounds per k-means
    max_train: int = 60000  # vectors per codebook; more are subsampled (bench: 51k beat 20k, see archive.md)
    storage: str = "int8"  # codebook storage: int8 rows + a float16 scale each (half of float16, measured free)
    seed: int = 0  # seeds subsampling and k-means++
    window_tokens: int = 1024  # seats per training window, sinks included

    def __post_init__(self) -> None:
        if self.k is not None and not (isinstance(self.k, int) and 2 <= self.k <= 1024):
            raise UserInputError(f"--k must be in [2, 1024], got {self.k!r}")
        stages = (self.key_stages, self.value_stages)
        if not all(0 <= s <= 16 for s in stages) or sum(stages) == 0:
            raise UserInputError("stages must be in [0, 16], at least one side with >= 1")
        if self.iters < 0 or self.max_train < 2:
            raise UserInputError("--iters must be >= 0 and --max-train >= 2")
        if self.window_tokens < 16:
            raise UserInputError("training windows must be >= 16 tokens")
        if self.storage not in STORAGES:
            raise UserInputError(f"--storage must be one of {', '.join(STORAGES)}, got {self.storage!r}")


def auto_k(tokens: int, cap: int = DEFAULT_K) -> int:
    """The largest power of two <= tokens / VECTORS_PER_CENTROID, in [2, cap]."""
    k = 2
    while k * 2 <= min(cap, tokens // VECTORS_PER_CENTROID):
        k *= 2
    return k


def windows(ids: list[int], sinks: list[int], window_tokens: int) -> list[list[int]]:
    """[sinks + body] windows over `ids`, non-overlapping; a short last one if it is long enough."""
    body = window_tokens - len(sinks)
    if body < MIN_WINDOW_TOKENS:
        raise UserInputError(f"a {window_tokens}-token window leaves no room after {len(sinks)} sink tokens")
    starts = range(0, len(ids), body)
    return [list(sinks) + ids[a : a + body] for a in starts if len(ids[a : a + body]) >= MIN_WINDOW_TOKENS]


def train_codebooks(lm: LoadedModel, dialect: Dialect, text: str, config: TrainConfig = TrainConfig(),
                    progress: Callable[[int, int], None] | None = None) -> RVQCodebooks:
    """Codebooks for `lm` trained on `text`; progress(windows done, windows total) after each
    window harvested. UserInputError if the text is too short to train on."""
    sinks = list(lm.tokenizer.sink_ids)
    wins = windows(lm.tokenizer.encode(text), sinks, min(config.window_tokens, dialect.max_positions))
    if not wins:
        raise UserInputError(f"no text to train on (need at least {MIN_WINDOW_TOKENS} tokens)")
    keys, values = [], []
    with torch.inference_mode():
        for i, w in enumerate(wins):
            got = harvest(lm.model, dialect, [w], skip=len(sinks))
            keys.append(got.kv.keys)
            values.append(got.kv.values)
            if progress:
                progress(i + 1, len(wins))
    kv = KV(torch.cat(keys, dim=2), torch.cat(values, dim=2))
    n = kv.tokens
    k = config.k or auto_k(n)
    if n < k:
        raise UserInputError(f"{n} training tokens are fewer than k={k} centroids: give more text or a smaller --k")
    rcfg = RVQConfig(k=k, key_stages=config.key_stages, value_stages=config.value_stages, iters=config.iters,
                     max_train=max(config.max_train, k), seed=config.seed, storage_dtype=config.storage)
    info = {"text_sha256": hashlib.sha256(text.encode()).hexdigest(), "windows": len(wins),
            "window_tokens": config.window_tokens}
    return train_rvq(kv, rcfg, lm.identity, info)
