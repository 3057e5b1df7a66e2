"""Mixed-source attention: evaluate an archive tier (or eviction) in one forward pass over a window.

In a running archive, token j's K/V stays exact while it is a sink (j < sinks) or in the recent
window (j > t - recent, for the token t being read); once it ages out it is replaced by its
archived version: position-free key -> quantize -> dequantize -> rotate back to its seat.

One pass computes the same thing. For query t and key j <= t the attention uses

    exact K/V of j      if j < sinks or j > t - recent
    archived K/V of j   otherwise (mode "archive"), or nothing at all (mode "evict")

with one softmax over the union. This equals token-by-token archiving (bench/lib/stepwise.py)
because every layer's K/V at seat j is computed from hidden states that were themselves produced
under the same mixed attention at query j, and the archived version of j depends only on exact
K/V of its quantizer group, which is complete before j leaves the window (grm/archive/quantizer.py).

How: a custom attention function registered with transformers' AttentionInterface under
ATTN_NAME; `window_nll` switches the model to it for one forward pass (`use_mixed_attention`) and
hands it the `MixedSpec` through the forward kwargs, which transformers passes to every layer's
attention call. The function sees the layer's rotated keys and values for the whole window.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from transformers import AttentionInterface

from grm.archive.harvest import layer_inv_freq, rotate_per_token
from grm.archive.quantizer import KVQuantizer
from grm.dialects import REMOUNTABLE, Dialect

ATTN_NAME = "grm_mixed"
SPEC_KWARG = "grm_mixed"  # forward kwarg carrying the MixedSpec to the attention function
EXACT, ARCHIVE, EVICT = "exact", "archive", "evict"
MODES = (EXACT, ARCHIVE, EVICT)


@dataclass(frozen=True)
class WindowConfig:
    sinks: int = 4  # first tokens of the window, always exact
    recent: int = 32  # query t sees keys t-recent+1 .. t exact

    def __post_init__(self) -> None:
        if not isinstance(self.sinks, int) or self.sinks < 0:
            raise ValueError(f"sinks must be a non-negative integer, got {self.sinks!r}")
        if not isinstance(self.recent, int) or self.recent < 1:
            raise ValueError(f"recent must be a positive integer, got {self.recent!r}")


@dataclass(frozen=True, eq=False)
class MixedSpec:
    mode: str  # one of MODES
    dialect: Dialect
    window: WindowConfig = field(default_factory=WindowConfig)
    quantizer: KVQuantizer | None = None  # needed by "archive"

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {self.mode!r}")
        if self.mode == ARCHIVE:
            if self.quantizer is None:
                raise ValueError("archive mode needs a quantizer")
            if self.quantizer.group > self.window.recent:
                raise ValueError(f"quantizer groups of {self.quantizer.group} tokens exceed the exact window "
                                 f"({self.window.recent}): archiving would need tokens not read yet")
            if self.dialect.profile != REMOUNTABLE:
                raise ValueError(f"{self.dialect.family} keys cannot be made position-free")


@functools.lru_cache(maxsize=16)
def selection_masks(length: int, window: WindowConfig, sliding: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(exact, archived) bool masks [query t, key j] over a window of `length` seats.

    Both are causal (j <= t) and, for a sliding-window layer, limited to j > t - sliding.
    """
    t = torch.arange(length)[:, None]
    j = torch.arange(length)[None, :]
    visible = j <= t
    if sliding is not None:
        visible &= j > t - sliding
    exact = visible & ((j < window.sinks) | (j > t - window.recent))
    return exact, visible & ~exact


def archived_kv(spec: MixedSpec, layer: int, keys: torch.Tensor, values: torch.Tensor,
                positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Archived K/V of a run of tokens: keys [kv_heads, tokens, head_dim] after rotary at `positions`."""
    assert spec.quantizer is not None
    inv = layer_inv_freq(spec.dialect, layer)
    free = rotate_per_token(keys, inv, -positions)
    kq, vq = spec.quantizer.roundtrip(layer, free, values)
    return rotate_per_token(kq, inv, positions), vq


def mixed_attention(module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                    attention_mask: torch.Tensor | None, scaling: float, dropout: float = 0.0,
                    **kwargs: object) -> tuple[torch.Tensor, None]:
    """The attention function: query [1, q_heads, T, d], key/value [1, kv_heads, T, d] -> [1, T, q_heads, d]."""
    spec = kwargs.get(SPEC_KWARG)
    if not isinstance(spec, MixedSpec):
        raise RuntimeError(f"{ATTN_NAME} attention needs a MixedSpec in the forward kwarg {SPEC_KWARG!r}")
    _, q_heads, length, dim = query.shape
    if query.shape[0] != 1 or key.shape[2] != length:
        raise RuntimeError("mixed attention evaluates one window in one pass: batch 1, no cache")
    layer = int(module.layer_idx)
    kv_heads = key.shape[1]
    q = query[0].reshape(kv_heads, q_heads // kv_heads, length, dim)  # [kv_heads, groups, T, d]
    k, v = key[0], value[0]  # [kv_heads, T, d]
    exact, archived = selection_masks(length, spec.window, spec.dialect.sliding_window[layer])
    if spec.mode == ARCHIVE:
        # Exact and archived versions side by side: one softmax over the union of both key sets.
        positions = kwargs.get("position_ids")
        positions = positions[0] if isinstance(positions, torch.Tensor) else torch.arange(length)
        ka, va = archived_kv(spec, layer, k, v, positions)
        k, v = torch.cat((k, ka), dim=1), torch.cat((v, va), dim=1)  # [kv_heads, 2T, d]
        allowed = torch.cat((exact, archived), dim=1)  # [T, 2T]
    else:
        allowed = exact | archived if spec.mode == EXACT else exact
    cap = getattr(module.config, "attn_logit_softcapping", None)
    if cap:  # soft-capped logits: no fused kernel takes them, so the plain way
        scores = torch.tanh((q @ k[:, None].transpose(-1, -2)) * scaling / cap) * cap  # [kv_heads, groups, T, T|2T]
        work = torch.float64 if q.dtype == torch.float64 else torch.float32
        probs = F.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1, dtype=work).to(q.dtype)
        out = probs @ v[:, None]  # [kv_heads, groups, T, d]
    else:  # the fused kernel with a boolean mask: same softmax, no [T, 2T] matrices kept
        out = F.scaled_dot_product_attention(q.reshape(1, q_heads, length, dim), k[None], v[None],
                                             attn_mask=allowed[None, None], scale=scaling, enable_gqa=True)
    out = out.reshape(q_heads, length, dim).transpose(0, 1)[None].contiguous()  # [1, T, q_heads, d]
    return out, None


@contextlib.contextmanager
def use_mixed_attention(model: torch.nn.Module) -> Iterator[None]:
    """Switch `model` to the mixed attention function for the duration of the block."""
    if ATTN_NAME not in AttentionInterface._global_mapping:
        AttentionInterface.register(ATTN_NAME, mixed_attention)
    before = model.config._attn_implementation
    model.set_attn_implementation(ATTN_NAME)
    try:
        yield
    finally:
        model.set_attn_implementation(before)


def window_nll(model: torch.nn.Module, ids: list[int], spec: MixedSpec) -> torch.Tensor:
    """NLL of ids[i+1] given ids[..i] under `spec`, for i = 0..T-2, seats 0..T-1: [T-1] float64."""
    if len(ids) < 2:
        raise ValueError("a window needs at least 2 tokens")
    input_ids = torch.tensor([ids])
    with use_mixed_attention(model), torch.no_grad():
        out = model(input_ids=input_ids, position_ids=torch.arange(len(ids))[None], use_cache=False,
                    logits_to_keep=0, **{SPEC_KWARG: spec})
    logits = out.logits[0, :-1]  # [T-1, vocab]
    logits = logits.double() if logits.dtype == torch.float64 else logits.float()
    return F.cross_entropy(logits, input_ids[0, 1:], reduction="none").double()
