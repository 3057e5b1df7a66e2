"""Seeded k-means (k-means++ seeding, then Lloyd iterations) on CPU tensors.

Used to train the archive's codebooks (grm/archive/rvq.py): one run per (layer, kv-head, K/V,
stage) on a few thousand 64-dimensional vectors. Everything is a pure function of the data, the
configuration and the seed: the same inputs give the same centroids in any process.

- Seeding: k-means++ (Arthur & Vassilvitskii, 2007): the first centre uniformly, each next one
  with probability proportional to the squared distance to the nearest centre chosen so far.
- Lloyd: assign every point to its nearest centre, move every centre to the mean of its points;
  stop after `iters` rounds or when no assignment changes.
- Empty clusters are refilled with the points farthest from their centres (deterministic), so a
  codebook never carries dead entries.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

_ASSIGN_CHUNK = 8192  # points per distance block: bounds the [chunk, k] scratch matrix


@dataclass(frozen=True)
class KMeansConfig:
    k: int = 256  # number of centres
    iters: int = 20  # Lloyd rounds at most (0 = k-means++ seeding only)
    seed: int = 0  # seeds the k-means++ draws

    def __post_init__(self) -> None:
        if not isinstance(self.k, int) or self.k < 1:
            raise ValueError(f"k must be a positive integer, got {self.k!r}")
        if not isinstance(self.iters, int) or self.iters < 0:
            raise ValueError(f"iters must be a non-negative integer, got {self.iters!r}")
        if not isinstance(self.seed, int):
            raise ValueError(f"seed must be an integer, got {self.seed!r}")


def nearest(x: torch.Tensor, centres: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Index of the nearest centre of every point and its squared distance.

    x [n, d], centres [k, d] (float32) -> (index [n] int64, squared distance [n] float32).
    Distances use ||x||^2 - 2 x.c + ||c||^2; ties go to the lower index (torch.min's rule).
    """
    c_sq = (centres * centres).sum(-1)  # [k]
    idx = torch.empty(x.shape[0], dtype=torch.int64)
    dist = torch.empty(x.shape[0], dtype=torch.float32)
    for a in range(0, x.shape[0], _ASSIGN_CHUNK):
        xs = x[a : a + _ASSIGN_CHUNK]
        d = c_sq[None, :] - 2.0 * (xs @ centres.T)  # [chunk, k], without the constant ||x||^2
        best, arg = d.min(dim=1)
        idx[a : a + xs.shape[0]] = arg
        dist[a : a + xs.shape[0]] = (best + (xs * xs).sum(-1)).clamp_min(0.0)
    return idx, dist


def kmeans_pp(x: torch.Tensor, k: int, generator: torch.Generator) -> torch.Tensor:
    """k-means++ seeding: k centres drawn from the rows of x [n, d]. Returns [k, d]."""
    n = x.shape[0]
    first = int(torch.randint(n, (1,), generator=generator))
    centres = [x[first]]
    closest = ((x - x[first]) ** 2).sum(-1)  # [n] squared distance to the nearest centre so far
    for _ in range(1, k):
        total = float(closest.sum())
        if total <= 0.0:  # every point coincides with a centre: draw uniformly
            pick = int(torch.randint(n, (1,), generator=generator))
        else:
            pick = int(torch.multinomial(closest.double() / total, 1, generator=generator))
        centres.append(x[pick])
        closest = torch.minimum(closest, ((x - x[pick]) ** 2).sum(-1))
    return torch.stack(centres)


def kmeans(x: torch.Tensor, config: KMeansConfig) -> torch.Tensor:
    """Centres [k, d] (float32) of the points x [n, d]; needs n >= k."""
    if x.dim() != 2:
        raise ValueError(f"k-means wants points [n, d], got shape {tuple(x.shape)}")
    n = x.shape[0]
    if n < config.k:
        raise ValueError(f"k-means with k={config.k} needs at least {config.k} points, got {n}")
    x = x.to(torch.float32).contiguous()
    gen = torch.Generator().manual_seed(config.seed)
    centres = kmeans_pp(x, config.k, gen)
    assign: torch.Tensor | None = None
    for _ in range(config.iters):
        idx, dist = nearest(x, centres)
        if assign is not None and torch.equal(idx, assign):
            break
        assign = idx
        sums = torch.zeros_like(centres).index_add_(0, idx, x)
        counts = torch.bincount(idx, minlength=config.k)
        filled = counts > 0
        centres = centres.clone()
        centres[filled] = sums[filled] / counts[filled, None].to(torch.float32)
        empty = torch.nonzero(~filled).flatten()
        if empty.numel():
            # Refill dead centres with the worst-served points (largest distance, ties by index).
            far = torch.argsort(dist, descending=True, stable=True)[: empty.numel()]
            centres[empty] = x[far]
    return centres
