"""Seeded, batched k-means (k-means++ seeding on a sample, then Lloyd iterations) on CPU tensors.

Used to train the archive's codebooks (grm/archive/rvq.py): one problem per (layer, kv-head) for
a given side and stage, all solved together as a batch [problems, points, dims] so that a few
large tensor operations replace many small ones (small ops are what a busy 2-core machine makes
slow). Everything is a pure function of the data, the configuration and the seed.

- Seeding: k-means++ (Arthur & Vassilvitskii, 2007) on a random sample of `init_sample` points
  per problem: the first centre uniformly, each next one with probability proportional to the
  squared distance to the nearest centre chosen so far.
- Lloyd: assign every point to its nearest centre, move every centre to the mean of its points;
  stop after `iters` rounds or when no assignment changes in any problem.
- Empty clusters are refilled with the points farthest from their centres (deterministic), so a
  codebook never carries dead entries.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

_CHUNK = 2048  # points per distance block: bounds the [problems, chunk, k] scratch tensor


@dataclass(frozen=True)
class KMeansConfig:
    k: int = 256  # number of centres
    iters: int = 20  # Lloyd rounds at most (0 = k-means++ seeding only)
    seed: int = 0  # seeds sampling and the k-means++ draws
    init_sample: int = 4096  # points per problem that k-means++ seeds from

    def __post_init__(self) -> None:
        if not isinstance(self.k, int) or self.k < 1:
            raise ValueError(f"k must be a positive integer, got {self.k!r}")
        if not isinstance(self.iters, int) or self.iters < 0:
            raise ValueError(f"iters must be a non-negative integer, got {self.iters!r}")
        if not isinstance(self.seed, int):
            raise ValueError(f"seed must be an integer, got {self.seed!r}")
        if not isinstance(self.init_sample, int) or self.init_sample < self.k:
            raise ValueError(f"init_sample must be an integer >= k, got {self.init_sample!r}")


def nearest(x: torch.Tensor, centres: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Nearest centre of every point and its squared distance, per problem.

    x [b, n, d], centres [b, k, d] (float32) -> (index [b, n] int64, squared distance [b, n]).
    Distances use ||x||^2 - 2 x.c + ||c||^2; ties go to the lower index (torch.min's rule).
    A 2-D x [n, d] with centres [k, d] is one problem and returns [n]-shaped results.
    """
    if x.dim() == 2:
        idx, dist = nearest(x[None], centres[None])
        return idx[0], dist[0]
    c_sq = (centres * centres).sum(-1)[:, None, :]  # [b, 1, k]
    b, n, _ = x.shape
    idx = torch.empty(b, n, dtype=torch.int64)
    dist = torch.empty(b, n, dtype=torch.float32)
    for a in range(0, n, _CHUNK):
        xs = x[:, a : a + _CHUNK]
        d = torch.baddbmm(c_sq, xs, centres.transpose(1, 2), alpha=-2.0)  # [b, chunk, k] without ||x||^2
        best, arg = d.min(dim=2)
        idx[:, a : a + xs.shape[1]] = arg
        dist[:, a : a + xs.shape[1]] = (best + (xs * xs).sum(-1)).clamp_min(0.0)
    return idx, dist


def kmeans_pp(x: torch.Tensor, k: int, generator: torch.Generator) -> torch.Tensor:
    """k-means++ seeding, per problem: x [b, n, d] -> centres [b, k, d] drawn from the rows."""
    b, n, _ = x.shape
    rows = torch.arange(b)
    x_sq = (x * x).sum(-1)  # [b, n]
    pick = torch.randint(n, (b,), generator=generator)
    centres = [x[rows, pick]]  # each [b, d]
    closest = (x_sq - 2.0 * torch.bmm(x, centres[0][:, :, None])[..., 0] + x_sq[rows, pick][:, None]).clamp_min(0.0)
    for _ in range(1, k):
        weights = closest.double()
        dead = weights.sum(1) <= 0.0  # every point already a centre: draw uniformly
        weights[dead] = 1.0
        pick = torch.multinomial(weights, 1, generator=generator)[:, 0]
        c = x[rows, pick]
        centres.append(c)
        dist = (x_sq - 2.0 * torch.bmm(x, c[:, :, None])[..., 0] + x_sq[rows, pick][:, None]).clamp_min(0.0)
        closest = torch.minimum(closest, dist)
    return torch.stack(centres, dim=1)


def kmeans(x: torch.Tensor, config: KMeansConfig) -> torch.Tensor:
    """Centres (float32) of the points x: [n, d] -> [k, d], or batched [b, n, d] -> [b, k, d]; needs n >= k."""
    if x.dim() == 2:
        return kmeans(x[None], config)[0]
    if x.dim() != 3:
        raise ValueError(f"k-means wants points [n, d] or [b, n, d], got shape {tuple(x.shape)}")
    b, n, _ = x.shape
    if n < config.k:
        raise ValueError(f"k-means with k={config.k} needs at least {config.k} points, got {n}")
    x = x.to(torch.float32).contiguous()
    gen = torch.Generator().manual_seed(config.seed)
    if n > config.init_sample:
        sample = torch.stack([torch.randperm(n, generator=gen)[: config.init_sample] for _ in range(b)])
        seed_pts = torch.gather(x, 1, sample[..., None].expand(-1, -1, x.shape[2]))
    else:
        seed_pts = x
    centres = kmeans_pp(seed_pts, config.k, gen)
    assign: torch.Tensor | None = None
    flat_x = x.reshape(b * n, -1)
    offsets = (torch.arange(b) * config.k)[:, None]  # [b, 1]
    for _ in range(config.iters):
        idx, dist = nearest(x, centres)
        if assign is not None and torch.equal(idx, assign):
            break
        assign = idx
        flat = (idx + offsets).reshape(-1)
        sums = torch.zeros(b * config.k, x.shape[2]).index_add_(0, flat, flat_x).reshape(b, config.k, -1)
        counts = torch.bincount(flat, minlength=b * config.k).reshape(b, config.k)
        filled = counts > 0
        centres = torch.where(filled[..., None], sums / counts.clamp_min(1)[..., None].to(torch.float32), centres)
        for p in torch.nonzero(~filled.all(dim=1)).flatten().tolist():
            # Refill dead centres with the worst-served points (largest distance, ties by index).
            empty = torch.nonzero(~filled[p]).flatten()
            far = torch.argsort(dist[p], descending=True, stable=True)[: empty.numel()]
            centres[p, empty] = x[p, far]
    return centres
