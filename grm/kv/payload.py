"""The payload: K/V of a span of tokens, per layer, in the model's compute dtype.

Serialized layout (safetensors; `PAYLOAD_FORMAT_VERSION` in grm.models.identity):
  tensors  "keys"   [layers, kv_heads, tokens, head_dim]   (as cached: after rotary)
           "values" [layers, kv_heads, tokens, head_dim]
  metadata str -> str: "grm_format", plus whatever the caller binds into the record
           (identity, tenant, fingerprint, text, token ids, seats). The store hashes these bytes
           as a whole, so metadata is covered by the same SHA-256 as the tensors.
"""

from __future__ import annotations

import json
import math
import struct
import warnings
from dataclasses import dataclass

import torch

from grm.models.identity import PAYLOAD_FORMAT_VERSION


@dataclass(frozen=True)
class KV:
    keys: torch.Tensor  # [layers, kv_heads, tokens, head_dim]
    values: torch.Tensor  # [layers, kv_heads, tokens, head_dim]

    def __post_init__(self) -> None:
        if self.keys.shape != self.values.shape or self.keys.dim() != 4:
            raise ValueError(f"keys {tuple(self.keys.shape)} and values {tuple(self.values.shape)} must match, 4-D")

    @property
    def tokens(self) -> int:
        return self.keys.shape[2]

    @property
    def nbytes(self) -> int:
        return self.keys.nbytes + self.values.nbytes

    def slice(self, start: int, end: int) -> "KV":
        return KV(self.keys[:, :, start:end], self.values[:, :, start:end])

    @staticmethod
    def cat(parts: list["KV"]) -> "KV":
        if len(parts) == 1:
            return parts[0]
        return KV(torch.cat([p.keys for p in parts], dim=2), torch.cat([p.values for p in parts], dim=2))

    def to_bytes(self, metadata: dict[str, str]) -> bytes:
        """The safetensors bytes of this payload, the same bytes in every process: the header is
        canonical JSON (sorted keys), where safetensors' own writer orders metadata by a per-process
        hash seed, so content addressing would never deduplicate across processes."""
        meta = {"grm_format": str(PAYLOAD_FORMAT_VERSION), **metadata}
        if self.keys.dtype != torch.float32 or self.values.dtype != torch.float32:
            raise ValueError(f"payloads are fp32; got {self.keys.dtype} / {self.values.dtype}")
        k = self.keys.contiguous().numpy().astype("<f4", copy=False).tobytes()
        v = self.values.contiguous().numpy().astype("<f4", copy=False).tobytes()
        header = {"__metadata__": meta,
                  "keys": {"dtype": "F32", "shape": list(self.keys.shape), "data_offsets": [0, len(k)]},
                  "values": {"dtype": "F32", "shape": list(self.values.shape), "data_offsets": [len(k), len(k) + len(v)]}}
        text = json.dumps(header, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
        text += b" " * (-len(text) % 8)  # the data starts 8-byte aligned, as safetensors writes it
        return struct.pack("<Q", len(text)) + text + k + v

    @staticmethod
    def from_bytes(data: bytes) -> tuple["KV", dict[str, str]]:
        """Parse verified payload bytes without copying the tensors (they are views of `data`);
        ValueError if the bytes are not a payload of this format. The layout is safetensors
        (written by safetensors above); reading it is an 8-byte length, a JSON header and raw
        little-endian fp32, so the views are checked against the header here."""
        if len(data) < 8:
            raise ValueError("payload shorter than its header length")
        (header_len,) = struct.unpack_from("<Q", data, 0)
        if 8 + header_len > len(data):
            raise ValueError("payload header runs past the end")
        header = json.loads(bytes(data[8 : 8 + header_len]))
        meta = header.pop("__metadata__", None) or {}
        if meta.get("grm_format") != str(PAYLOAD_FORMAT_VERSION):
            raise ValueError(f"payload format {meta.get('grm_format')!r} is not {PAYLOAD_FORMAT_VERSION}")
        if set(header) != {"keys", "values"}:
            raise ValueError(f"payload has tensors {sorted(header)}")
        base = 8 + header_len
        tensors = {}
        for name, info in header.items():
            shape, (start, end) = info["shape"], info["data_offsets"]
            count = math.prod(shape)
            if info["dtype"] != "F32" or len(shape) != 4 or end - start != 4 * count or base + end > len(data):
                raise ValueError(f"payload tensor {name} is not a 4-D F32 tensor inside the payload")
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # a read-only buffer: GRM never writes K/V in place
                flat = torch.frombuffer(data, dtype=torch.float32, count=count, offset=base + start)
            tensors[name] = flat.view(shape)
        return KV(tensors["keys"], tensors["values"]), meta
