"""Which K/V errors matter: per-channel weights that turn k-means' squared error into attention error.

Plain k-means minimizes ||x - c||^2, treating every channel alike. Attention does not:

- a key error e changes the logit of query q by q . R e (R the relative rotation), so its expected
  square is sum_c E[q_c^2] e_c^2 once averaged over seats, with E[q_c^2] averaged over each rotary
  pair (c, c + d/2) because the rotation mixes the pair (grm/archive/harvest.py, query_energy):
  key weight w_c = sqrt(pair-averaged query energy of the kv head's query heads);
- a value error e reaches the residual stream as W_o,i e for every query head i of the group, so
  its energy is e^T (sum_i W_o,i^T W_o,i) e; keeping the diagonal: value weight
  w_c = sqrt(sum_i ||column c of W_o,i||^2).

Quantizing w * x with plain k-means then minimizes these (diagonal) attention errors. Weights
are normalized to mean 1 per (layer, head); only their ratios matter.
"""

from __future__ import annotations

import torch

from grm.dialects import Dialect


def _normalized(w: torch.Tensor) -> torch.Tensor:
    w = w.clamp_min(w.mean(dim=-1, keepdim=True) * 1e-3)  # no channel is ever free
    return (w / w.mean(dim=-1, keepdim=True)).to(torch.float32)


def key_weights(query_energy: torch.Tensor) -> torch.Tensor:
    """[layers, kv_heads, head_dim] key channel weights from the harvested query energy."""
    return _normalized(query_energy.double().sqrt())


def value_weights(model: torch.nn.Module, dialect: Dialect) -> torch.Tensor:
    """[layers, kv_heads, head_dim] value channel weights from each layer's output projection."""
    group = dialect.q_heads // dialect.kv_heads
    out = []
    for layer in model.model.layers[: dialect.n_layers]:
        w = layer.self_attn.o_proj.weight.detach().double()  # [hidden, q_heads * head_dim]
        col = w.pow(2).sum(0).reshape(dialect.kv_heads, group, dialect.head_dim).sum(1)  # [kv_heads, head_dim]
        out.append(col.sqrt())
    return _normalized(torch.stack(out))
