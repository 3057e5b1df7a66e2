"""The dense routing channel: keys from the model's own K, position-free, as per-head centroids.

A span's routing key is, for every `layer_stride`-th layer and every KV head, the mean of its
keys after undoing the rotary map (each key rotated back by its seat), L2-normalized:
[layers', kv_heads, head_dim]. A query's key is made the same way from the question read after
the sinks. Score = mean over (layer, head) of the cosine between the two. Stored in record
metadata as base64 of fp16 little-endian bytes (a few KB per span).

A long span is a multi-key node: besides its centroid it keeps the centroid of every
`chunk_tokens` run (up to `max_keys`), and it scores as the best of its keys, so a fact in one
paragraph of a long span is not averaged away by the rest.
"""

from __future__ import annotations

import base64
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np
import torch

from grm.dialects import Dialect
from grm.dialects.rotary import rotate_keys_at
from grm.kv import KV
from grm.kv.forward import read_after_sinks


@dataclass(frozen=True)
class DenseConfig:
    layer_stride: int = 4  # use every n-th layer (keys of neighbouring layers are alike)
    chunk_tokens: int = 64  # multi-key nodes: one extra key per run of this many tokens
    max_keys: int = 8  # at most this many keys per span (the centroid included)

    def __post_init__(self) -> None:
        if self.layer_stride < 1 or self.chunk_tokens < 1 or self.max_keys < 1:
            raise ValueError("layer_stride, chunk_tokens and max_keys must be >= 1")


def key_width(dialect: Dialect, config: DenseConfig) -> int:
    """How many numbers one routing key holds: layers' x kv_heads x head_dim."""
    return len(range(0, dialect.n_layers, config.layer_stride)) * dialect.kv_heads * dialect.head_dim


def routing_key(kv: KV, dialect: Dialect, seat: int, config: DenseConfig) -> torch.Tensor:
    """[layers', kv_heads, head_dim] normalized centroids of `kv`'s position-free keys."""
    layers = range(0, kv.keys.shape[0], config.layer_stride)
    seats = torch.arange(seat, seat + kv.tokens)
    out = []
    for layer in layers:
        keys = kv.keys[layer]  # [kv_heads, tokens, head_dim]
        inv = dialect.inv_freq[layer]
        free = rotate_keys_at(keys, inv, -seats) if inv is not None else keys
        out.append(free.float().mean(dim=1))
    cent = torch.stack(out)
    return cent / cent.norm(dim=-1, keepdim=True).clamp_min(1e-12)


def span_keys(kv: KV, dialect: Dialect, seat: int, config: DenseConfig) -> torch.Tensor:
    """[n_keys, layers', kv_heads, head_dim]: the span's centroid, then (for spans longer than one
    chunk) the centroid of each chunk, evenly spread chunks when there are more than max_keys - 1."""
    keys = [routing_key(kv, dialect, seat, config)]
    n_chunks = -(-kv.tokens // config.chunk_tokens)
    if n_chunks > 1 and config.max_keys > 1:
        step = config.chunk_tokens * max(1, -(-n_chunks // (config.max_keys - 1)))
        for a in range(0, kv.tokens, step):
            keys.append(routing_key(kv.slice(a, min(a + step, kv.tokens)), dialect, seat + a, config))
    return torch.stack(keys)


def query_key(model: torch.nn.Module, sinks: KV, ids: list[int], dialect: Dialect, config: DenseConfig) -> torch.Tensor:
    """The routing key of a query: its tokens read after the sinks (one short forward pass)."""
    return routing_key(read_after_sinks(model, sinks, ids), dialect, sinks.tokens, config)


class QueryKeys:
    """The routing keys of the last `size` queries read after one model's sinks, so a query routed
    twice (over sections and over grafts in one request, or a message sent again) is read through
    the model once. Keyed by token ids and config: the same ids after the same sinks give the same key."""

    def __init__(self, size: int = 64) -> None:
        self.size = size
        self._keys: OrderedDict[tuple, torch.Tensor] = OrderedDict()

    def get(self, model: torch.nn.Module, sinks: KV, ids: list[int], dialect: Dialect,
            config: DenseConfig) -> torch.Tensor:
        at = (tuple(ids), config)
        key = self._keys.get(at)
        if key is None:
            key = query_key(model, sinks, ids, dialect, config)
            self.put(ids, config, key)
        else:
            self._keys.move_to_end(at)
        return key

    def known(self, ids: list[int], config: DenseConfig) -> bool:
        return (tuple(ids), config) in self._keys

    def put(self, ids: list[int], config: DenseConfig, key: torch.Tensor) -> None:
        """Keep `key` as the routing key of the query `ids`: a chat turn's words keyed from the read
        that also stores the turn (`words_key`), so they are not read again to be routed."""
        at = (tuple(ids), config)
        self._keys[at] = key
        self._keys.move_to_end(at)
        while len(self._keys) > self.size:
            self._keys.popitem(last=False)


def words_key(kv: KV, span: tuple[int, int], dialect: Dialect, seat: int, config: DenseConfig) -> torch.Tensor:
    """The routing key of the words at `span` (start, end) of the K/V `kv` read from `seat`: a
    query's key taken from the labelled read that stores it ("User: <words>" after the sinks)
    rather than from a read of the words alone. It differs from `query_key` of the bare words only
    in what the words follow (the label instead of the sinks alone)."""
    start, end = span
    return routing_key(kv.slice(start, end), dialect, seat + start, config)


def encode_key(key: torch.Tensor) -> str:
    return base64.b64encode(key.to(torch.float16).numpy().astype("<f2").tobytes()).decode("ascii")


def decode_fp16(text: object) -> np.ndarray | None:
    """Numbers `encode_key` stored (base64 of fp16 little-endian) as a flat fp16 array; None if
    `text` is not such a string or holds none."""
    if not isinstance(text, str) or not text:
        return None
    try:
        arr = np.frombuffer(base64.b64decode(text, validate=True), dtype="<f2")
    except ValueError:  # binascii.Error is a ValueError
        return None
    return arr if arr.size else None


def decode_keys(text: object, width: int) -> np.ndarray | None:
    """A stored key (or a multi-key node's keys) as [n_keys, width] fp16; None if it does not
    decode or does not fit this geometry (`width` = key_width)."""
    arr = decode_fp16(text)
    if arr is None or arr.size % width:
        return None
    return arr.reshape(-1, width)


def decode_key(text: str, like: torch.Tensor) -> torch.Tensor | None:
    """A stored key (or keys) shaped like `like`: [*like.shape] for one key, [n, *like.shape] for
    a multi-key node; None if it does not fit (another geometry) or does not decode. With `score`,
    the one-row-at-a-time reference the index (grm/route/index.py) is tested against."""
    rows = decode_keys(text, like.numel())
    if rows is None:
        return None
    out = torch.from_numpy(rows.astype(np.float32))
    return out.reshape(like.shape) if len(rows) == 1 else out.reshape(-1, *like.shape)


def score(query: torch.Tensor, key: torch.Tensor) -> float:
    """Mean cosine over (layer, head); both are normalized already. For a multi-key node
    ([n, ...] against a single query key) the best of its keys."""
    cos = (query * key).sum(dim=-1)
    return float(cos.flatten(-2).mean(-1).max()) if key.dim() > query.dim() else float(cos.mean())
