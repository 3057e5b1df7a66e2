"""An archived span: the payload of one archive record, and how it is built and read back.

A span of K/V (a block or graft) of T tokens read at seats seat..seat+T-1 is split into
  - the quantized head: tokens [0, T - tail): position-free keys and values as RVQ index streams,
    one stream per (layer, kv-head, K|V, stage), each stored through a symbol codec
    (grm/archive/bitpack.py or grm/archive/chaos.py, containers with their own CRCs);
  - the exact tail: the last `tail` tokens (none by default; `recent`), as cached (keys after
    rotary at their seats), in the dtype of the exact payload (so they come back bit-identical);
  - pinned tokens (format 2 only): salient tokens of the quantized head (grm/archive/salient.py)
    kept apart, by position: their K/V as cached (keys after rotary), each head_dim row stored
    int8 with a float16 absmax scale (the codebooks' int8 form, grm/archive/rvq.py to_storage;
    the default) or float16 ("salient_storage"), float32 if a value would not fit. They are
    quantized in the streams too (the streams stay contiguous for random access and suffix
    search), and a mount puts the pinned rows over them.
The sinks are never part of a span: they are their own record and are never archived.

Serialized layout (safetensors, little-endian; `ArchivedSpan.to_bytes` / `from_bytes`):
  tensors   "tail_keys"    [layers, kv_heads, tail, head_dim]   exact dtype (after rotary)
            "tail_values"  [layers, kv_heads, tail, head_dim]
            "streams"      [total_bytes] uint8: every stream's codec container, concatenated in
                           canonical order: K then V, then layer, head, stage (RVQCodes.streams)
            "offsets"      [streams + 1] int64: stream i is streams[offsets[i]:offsets[i+1]]
  format 2 adds (written only when a span has pinned tokens, so other spans stay format 1):
            "pinned"        [pinned] int64: strictly increasing positions in [0, quantized)
            "pinned_keys"   [layers, kv_heads, pinned, head_dim]  int8 | float16 | float32 (after rotary)
            "pinned_values" [layers, kv_heads, pinned, head_dim]
            "pinned_key_scales", "pinned_value_scales"  [layers, kv_heads, pinned] float16 (int8 only)
  metadata  "grm_archive_format"  "1" | "2" (FORMATS)
            "identity"     model identity of the K/V and of the codebooks
            "tenant", "key"  the archive record's tenant and key (= the source block's key)
            "parent"       the source block's parent fingerprint
            "seat"         seat of the span's first token when it was read
            "tokens"       T;  "tail": exact tokens;  "quantized": T - tail
            "codebook"     codebook version (RVQCodebooks.version) the indices refer to
            "k", "key_stages", "value_stages"  alphabet and stages used (a prefix of the trained stack)
            "codec"        "chaos" | "bitpack"
            "source"       SHA-256 of the exact payload the span was archived from (lineage)
            "pinned", "keep_salient", "salient_storage"  (format 2) pinned tokens, the rule that
                           chose them, and the form their rows are stored in
The store hashes these bytes as a whole (SHA-256 in the catalog), so the metadata is covered by
the same digest as the tensors; each codec container also carries CRC32s. `from_bytes` raises
ValueError for anything that does not parse as this format; the reader turns that into a miss.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass

import numpy as np
import torch
from safetensors.torch import load as st_load
from safetensors.torch import save as st_save

from grm.archive.bitpack import BitPackedCodec
from grm.archive.chaos import ChaosGameCodec
from grm.archive.rvq import RVQCodes, from_storage
from grm.errors import GrmError

ARCHIVE_FORMAT = 1  # a span without pinned tokens
PINNED_FORMAT = 2  # a span with pinned tokens (three more tensors)
FORMATS = (ARCHIVE_FORMAT, PINNED_FORMAT)
CODECS = {"chaos": ChaosGameCodec, "bitpack": BitPackedCodec}
_INT_FIELDS = ("seat", "tokens", "tail", "quantized", "k", "key_stages", "value_stages")
_STR_FIELDS = ("identity", "tenant", "key", "parent", "codebook", "codec", "source")
_TENSORS = {"tail_keys", "tail_values", "streams", "offsets"}
_PINNED_TENSORS = {"pinned", "pinned_keys", "pinned_values"}
_PINNED_SCALES = {"pinned_key_scales", "pinned_value_scales"}


@dataclass(frozen=True)
class ArchivedSpan:
    """One archived span, parsed (see the module docstring for every field)."""

    codes: RVQCodes  # keys [layers, kv_heads, key_stages, quantized], values [..., value_stages, quantized]
    tail_keys: torch.Tensor  # [layers, kv_heads, tail, head_dim] exact, after rotary at their seats
    tail_values: torch.Tensor  # [layers, kv_heads, tail, head_dim]
    meta: dict  # the metadata fields, ints as ints
    pinned: torch.Tensor | None = None  # [pinned] int64 positions in the quantized head, or None
    pinned_keys: torch.Tensor | None = None  # [layers, kv_heads, pinned, head_dim] as stored, after rotary
    pinned_values: torch.Tensor | None = None
    pinned_key_scales: torch.Tensor | None = None  # [layers, kv_heads, pinned] float16 when rows are int8
    pinned_value_scales: torch.Tensor | None = None

    @property
    def stream_bytes(self) -> int:
        return int(self.meta.get("stream_bytes", 0))

    @property
    def pinned_count(self) -> int:
        return 0 if self.pinned is None else int(self.pinned.numel())

    @property
    def pinned_bytes(self) -> int:
        if self.pinned is None:
            return 0
        scales = [t.nbytes for t in (self.pinned_key_scales, self.pinned_value_scales) if t is not None]
        return int(self.pinned.nbytes + self.pinned_keys.nbytes + self.pinned_values.nbytes + sum(scales))

    def pinned_kv(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The pinned rows as float32 numbers (keys after rotary at the span's seats)."""
        return (from_storage(self.pinned_keys, self.pinned_key_scales),
                from_storage(self.pinned_values, self.pinned_value_scales))

    def to_bytes(self, codec: str) -> bytes:
        """Serialize; each stream goes through `codec` ("chaos" or "bitpack")."""
        cls = CODECS[codec]
        blobs = [cls.encode(sym.astype(np.int64), self.codes.k).to_bytes() for _, sym in self.codes.streams()]
        offsets = np.zeros(len(blobs) + 1, dtype=np.int64)
        offsets[1:] = np.cumsum([len(b) for b in blobs])
        streams = torch.frombuffer(bytearray(b"".join(blobs)), dtype=torch.uint8)
        tensors = {"tail_keys": self.tail_keys.contiguous(), "tail_values": self.tail_values.contiguous(),
                   "streams": streams, "offsets": torch.from_numpy(offsets)}
        meta = {**{k: str(v) for k, v in self.meta.items()}, "codec": codec}
        if self.pinned_count:
            tensors.update(pinned=self.pinned.to(torch.int64).contiguous(),
                           pinned_keys=self.pinned_keys.contiguous(), pinned_values=self.pinned_values.contiguous())
            if self.pinned_key_scales is not None:
                tensors.update(pinned_key_scales=self.pinned_key_scales.contiguous(),
                               pinned_value_scales=self.pinned_value_scales.contiguous())
            meta.update(grm_archive_format=str(PINNED_FORMAT), pinned=str(self.pinned_count))
        else:
            meta.update(grm_archive_format=str(ARCHIVE_FORMAT))
            meta.pop("pinned", None)
            meta.pop("keep_salient", None)
            meta.pop("salient_storage", None)
        return st_save(tensors, metadata=meta)

    @classmethod
    def from_bytes(cls, data: bytes) -> ArchivedSpan:
        """Parse verified bytes; ValueError if they are not an archived span of this format
        (including a stream container whose CRC or header does not check out)."""
        try:
            tensors = st_load(bytes(data))
            (header_len,) = struct.unpack_from("<Q", data, 0)
            raw = json.loads(bytes(data[8 : 8 + header_len])).get("__metadata__") or {}
        except Exception as exc:  # safetensors raises several types for bad bytes
            raise ValueError(f"not an archived span: {exc}") from exc
        fmt = raw.get("grm_archive_format")
        if fmt not in {str(f) for f in FORMATS}:
            raise ValueError(f"archive format {fmt!r} is not one of {', '.join(map(str, FORMATS))}")
        pinned = fmt == str(PINNED_FORMAT)
        scaled = pinned and tensors.get("pinned_keys", torch.empty(0)).dtype == torch.int8
        want = _TENSORS | (_PINNED_TENSORS if pinned else set()) | (_PINNED_SCALES if scaled else set())
        if set(tensors) != want:
            raise ValueError(f"archived span (format {fmt}) has tensors {sorted(tensors)}")
        try:
            meta: dict = {k: int(raw[k]) for k in _INT_FIELDS + (("pinned",) if pinned else ())}
            meta.update({k: str(raw[k]) for k in _STR_FIELDS + (("keep_salient", "salient_storage") if pinned else ())})
        except (KeyError, ValueError) as exc:
            raise ValueError(f"archived span metadata is incomplete: {exc}") from exc
        codec = CODECS.get(meta["codec"])
        if codec is None:
            raise ValueError(f"unknown stream codec {meta['codec']!r}")
        tk, tv = tensors["tail_keys"], tensors["tail_values"]
        if tk.shape != tv.shape or tk.dim() != 4 or tk.shape[2] != meta["tail"]:
            raise ValueError(f"exact tail {tuple(tk.shape)} / {tuple(tv.shape)} does not match tail={meta['tail']}")
        layers, heads = tk.shape[0], tk.shape[1]
        ks, vs, n = meta["key_stages"], meta["value_stages"], meta["quantized"]
        if n < 1 or meta["tokens"] != n + meta["tail"]:
            raise ValueError("token counts of the archived span do not add up")
        offsets = tensors["offsets"].numpy()
        blob = tensors["streams"].numpy().tobytes()
        count = layers * heads * (ks + vs)
        if offsets.shape != (count + 1,) or offsets[0] != 0 or offsets[-1] != len(blob) or (np.diff(offsets) < 0).any():
            raise ValueError("stream offsets do not cover the stream bytes")
        dt = np.uint8 if meta["k"] <= 256 else np.uint16
        keys = np.empty((layers, heads, ks, n), dtype=dt)
        values = np.empty((layers, heads, vs, n), dtype=dt)
        i = 0
        for arr, stages in ((keys, ks), (values, vs)):
            for layer in range(layers):
                for head in range(heads):
                    for stage in range(stages):
                        try:
                            c = codec.from_bytes(blob[offsets[i] : offsets[i + 1]])
                        except GrmError as exc:  # CorruptionError and friends: damaged stream
                            raise ValueError(f"stream {i} is damaged: {exc}") from exc
                        if c.alphabet_size != meta["k"] or len(c) != n:
                            raise ValueError(f"stream {i} holds {len(c)} symbols of alphabet {c.alphabet_size}")
                        arr[layer, head, stage] = c.decode()
                        i += 1
        meta["stream_bytes"] = len(blob)
        if not pinned:
            return cls(RVQCodes(keys, values, meta["k"]), tk, tv, meta)
        pos, pk, pv = tensors["pinned"], tensors["pinned_keys"], tensors["pinned_values"]
        ks_, vs_ = (tensors["pinned_key_scales"], tensors["pinned_value_scales"]) if scaled else (None, None)
        p = meta["pinned"]
        if (pos.dtype != torch.int64 or tuple(pos.shape) != (p,) or p < 1 or pk.shape != pv.shape
                or tuple(pk.shape) != (layers, heads, p, tk.shape[3]) or pk.dtype != pv.dtype
                or pk.dtype not in (torch.int8, torch.float16, torch.bfloat16, torch.float32)):
            raise ValueError(f"pinned tokens {tuple(pos.shape)} / {tuple(pk.shape)} do not match pinned={p}")
        if scaled and any(s.dtype != torch.float16 or tuple(s.shape) != (layers, heads, p) for s in (ks_, vs_)):
            raise ValueError("int8 pinned rows need float16 scales, one per row")
        if int(pos[0]) < 0 or int(pos[-1]) >= n or (p > 1 and bool((pos[1:] <= pos[:-1]).any())):
            raise ValueError("pinned positions are not increasing positions of the quantized tokens")
        return cls(RVQCodes(keys, values, meta["k"]), tk, tv, meta, pos, pk, pv, ks_, vs_)
