"""The payload: K/V of a span of tokens, per layer, in the model's compute dtype.

The tensors are F32 (the CPU regime), or BF16/F16 (a model run in that dtype on an accelerator);
the model identity names the dtype, so a payload is only ever read back in the dtype it has.

Serialized layout (safetensors, format version `PAYLOAD_FORMAT_VERSION`):
  u64 LE   header length N (a multiple of 8: the header is space-padded so data is 8-aligned)
  N bytes  canonical JSON header (sorted keys, no spaces):
           "__metadata__": str -> str: "grm_format" (the version), plus whatever the caller binds
                           into the record (identity, tenant, fingerprint, text, token ids, seats)
           "keys":   {"dtype": "F32", "shape": [layers, kv_heads, tokens, head_dim],
                      "data_offsets": [0, S]}                (as cached: after rotary)
           "values": {"dtype": "F32", "shape": (the same), "data_offsets": [S, 2S]}
  2S bytes keys then values, little-endian, S = itemsize * layers * kv_heads * tokens * head_dim
           ("dtype" is F32, or BF16/F16 for a model run in that dtype: itemsize 4 or 2)
The store hashes these bytes as a whole, so metadata is covered by the same SHA-256 as the
tensors. `parse_header` is the one reader of the header: `KV.from_bytes` and the exact plane's
scatter reads (which read the header first and the tensors straight into place) both call it.
The version is part of every model identity (defined beside it in grm.models.identity, which
may not import this plane): bumping it turns every old record into a miss.
"""

from __future__ import annotations

import json
import math
import struct
import warnings
from dataclasses import dataclass

import torch

from grm.models.identity import PAYLOAD_FORMAT_VERSION

# safetensors dtype names of the tensors a payload may hold
_DTYPES = {torch.float32: "F32", torch.bfloat16: "BF16", torch.float16: "F16"}
_BY_NAME = {name: dtype for dtype, name in _DTYPES.items()}


def _raw(t: torch.Tensor) -> bytes:
    """A tensor's bytes, little-endian (the host's order on every machine GRM runs on)."""
    return t.detach().to("cpu").contiguous().view(torch.uint8).numpy().tobytes()

FORMAT_KEY = "grm_format"  # the metadata field holding the format version
TENSORS = ("keys", "values")  # in file order


@dataclass(frozen=True)
class PayloadHeader:
    """A parsed, checked payload header: both tensors are `dtype` of `shape`, keys at [0, S) and
    values at [S, 2S) of the data that follows the header."""

    meta: dict[str, str]  # the bound metadata, "grm_format" included
    shape: tuple[int, int, int, int]  # [layers, kv_heads, tokens, head_dim]
    dtype: str = "F32"  # "F32", "BF16" or "F16" (both tensors)

    @property
    def torch_dtype(self) -> torch.dtype:
        return _BY_NAME[self.dtype]

    @property
    def tensor_bytes(self) -> int:
        """S: the bytes of one tensor (keys or values)."""
        return self.torch_dtype.itemsize * math.prod(self.shape)


def parse_header(header: bytes) -> PayloadHeader:
    """Parse the JSON header of a payload (the N bytes after the length); ValueError if it is not
    a header of this format version laid out as `KV.to_bytes` writes it."""
    try:
        h = json.loads(header)
    except (ValueError, UnicodeDecodeError) as e:
        raise ValueError(f"payload header is not JSON: {e}") from None
    if not isinstance(h, dict):
        raise ValueError("payload header is not a JSON object")
    meta = h.pop("__metadata__", None) or {}
    if not isinstance(meta, dict) or meta.get(FORMAT_KEY) != str(PAYLOAD_FORMAT_VERSION):
        got = meta.get(FORMAT_KEY) if isinstance(meta, dict) else None
        raise ValueError(f"payload format {got!r} is not {PAYLOAD_FORMAT_VERSION}")
    if set(h) != set(TENSORS):
        raise ValueError(f"payload has tensors {sorted(h)}")
    infos = [h[name] for name in TENSORS]
    if not all(isinstance(i, dict) for i in infos):
        raise ValueError("payload tensor entries are not objects")
    shape = infos[0].get("shape")
    if (not isinstance(shape, list) or len(shape) != 4
            or not all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in shape)):
        raise ValueError(f"payload tensor shape {shape!r} is not 4-D")
    dtype = infos[0].get("dtype")
    if dtype not in _BY_NAME:
        raise ValueError(f"payload tensor dtype {dtype!r} is not one of {', '.join(_BY_NAME)}")
    parsed = PayloadHeader(meta, (shape[0], shape[1], shape[2], shape[3]), dtype)
    size = parsed.tensor_bytes
    for k, (name, info) in enumerate(zip(TENSORS, infos)):
        if (info.get("dtype") != dtype or info.get("shape") != shape
                or info.get("data_offsets") != [k * size, (k + 1) * size]):
            raise ValueError(f"payload tensor {name} is not laid out as {dtype} {shape} at its place")
    return parsed


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
        meta = {FORMAT_KEY: str(PAYLOAD_FORMAT_VERSION), **metadata}
        name = _DTYPES.get(self.keys.dtype)
        if name is None or self.values.dtype != self.keys.dtype:
            raise ValueError(f"payloads are {'/'.join(_DTYPES.values())}; got {self.keys.dtype} / {self.values.dtype}")
        k, v = _raw(self.keys), _raw(self.values)
        header = {"__metadata__": meta,
                  "keys": {"dtype": name, "shape": list(self.keys.shape), "data_offsets": [0, len(k)]},
                  "values": {"dtype": name, "shape": list(self.values.shape), "data_offsets": [len(k), len(k) + len(v)]}}
        text = json.dumps(header, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
        text += b" " * (-len(text) % 8)  # the data starts 8-byte aligned, as safetensors writes it
        return struct.pack("<Q", len(text)) + text + k + v

    @staticmethod
    def from_bytes(data: bytes) -> tuple["KV", dict[str, str]]:
        """Parse verified payload bytes without copying the tensors (they are views of `data`);
        ValueError if the bytes are not a payload of this format (`parse_header` decides)."""
        if len(data) < 8:
            raise ValueError("payload shorter than its header length")
        (header_len,) = struct.unpack_from("<Q", data, 0)
        if 8 + header_len > len(data):
            raise ValueError("payload header runs past the end")
        header = parse_header(bytes(data[8 : 8 + header_len]))
        base, size = 8 + header_len, header.tensor_bytes
        if base + 2 * size != len(data):
            raise ValueError(f"payload holds {len(data) - base} tensor bytes, its header says {2 * size}")
        dtype = header.torch_dtype
        count = size // dtype.itemsize
        tensors = []
        for k in range(len(TENSORS)):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # a read-only buffer: GRM never writes K/V in place
                flat = torch.frombuffer(data, dtype=dtype, count=count, offset=base + k * size)
            tensors.append(flat.view(header.shape))
        return KV(tensors[0], tensors[1]), header.meta
