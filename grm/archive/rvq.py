"""Per-head residual vector quantization (RVQ) of position-free K/V: codebooks, encode, decode.

One codebook stack per (layer, kv-head, K or V): stage s holds k centroids [k, head_dim] trained
by k-means (grm/archive/kmeans.py; all (layer, head) problems of one side and stage in one batch)
on the residuals left by stages 0..s-1, on K/V harvested from training text
(grm/archive/harvest.py) that must be disjoint from any evaluation text. Keys are quantized
position-free (before rotary), so one codebook serves every seat. Encoding is greedy: each stage
picks the nearest centroid to the current residual. Fewer stages than were trained is a prefix of
the stack (RVQ x1 = the first stage of RVQ x4), so one training serves every allocation of stages
to keys and values (bench/archive.py measures which side is the more sensitive).

Index streams: `RVQCodes.keys` [layers, kv_heads, key_stages, tokens] and `.values`
[layers, kv_heads, value_stages, tokens], uint8 when k <= 256 else uint16 (k <= 1024, the symbol
codecs' alphabet limit). Each (layer, head, side, stage) row is one symbol stream for the codecs.

Codebooks are rounded to their storage form during training, before the next stage's residuals
are taken, so encoding and decoding use exactly the stored numbers. Storage: float16 (default),
bfloat16, float32, or int8 = every centroid row stored as int8 codes times one float16 scale
(symmetric absmax: scale = max|c| / 127, codes = round(c / scale)), 66 bytes per 64-dim row
instead of 128: at 32k stored tokens the codebooks are about half of an archive's all-in bytes.

Distortion: encoding picks, per stage, argmin_c ||w * (r - c)||^2 with per-(layer, head) channel
weights w (all ones = plain squared error; bench/lib/metric.py gives attention-aware ones), and
training runs k-means on w * x, so both minimize the same weighted error.

Serialized layout (safetensors, little-endian; `to_bytes` / `from_bytes`):
  tensors   "keys"          [layers, kv_heads, key_stages, k, head_dim]    storage dtype
            "values"        [layers, kv_heads, value_stages, k, head_dim]  storage dtype
            "key_weights"   [layers, kv_heads, head_dim]  float32 distortion weights of keys
            "value_weights" [layers, kv_heads, head_dim]  float32 distortion weights of values
            "key_scales"    [layers, kv_heads, key_stages, k]    float16, int8 storage only
            "value_scales"  [layers, kv_heads, value_stages, k]  float16, int8 storage only
  metadata  "grm_rvq_format"  RVQ_FORMAT ("1")
            "identity"        the model identity the K/V came from (never served to another)
            "config"          canonical JSON of RVQConfig
            "train"           canonical JSON of training facts (tokens, vectors per codebook, text digest)
            "version"         16 hex digits of SHA-256 over format, identity, config and all tensor bytes
`from_bytes` recomputes the version and refuses bytes whose version does not match (damage), whose
format is another, or (when asked) whose identity is another model's.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field

import numpy as np
import torch
from safetensors.torch import load as st_load
from safetensors.torch import save as st_save

from grm.archive.kmeans import KMeansConfig, kmeans, nearest
from grm.kv import KV

RVQ_FORMAT = 1
MAX_K = 1024  # the symbol codecs take alphabets of at most 1024
_DTYPES = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32, "int8": torch.int8}
STORAGES = tuple(_DTYPES)  # codebook storage forms (RVQConfig.storage_dtype)
INT8_MAX = 127


def to_storage(c: torch.Tensor, storage: str) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Centroids c [..., d] in their storage form: (tensor, None) for a float dtype, or
    (int8 codes, float16 per-row scales [...]) for "int8"."""
    if storage != "int8":
        return c.to(_DTYPES[storage]), None
    amax = c.abs().amax(dim=-1).to(torch.float32)
    scale = (amax / INT8_MAX).to(torch.float16)
    safe = torch.where(scale > 0, scale, torch.ones_like(scale)).to(torch.float32)
    codes = torch.round(c.to(torch.float32) / safe[..., None]).clamp_(-INT8_MAX, INT8_MAX).to(torch.int8)
    return codes, scale


def from_storage(stored: torch.Tensor, scales: torch.Tensor | None) -> torch.Tensor:
    """The stored centroids as float32 numbers (what encoding and decoding use)."""
    out = stored.to(torch.float32)
    return out if scales is None else out * scales.to(torch.float32)[..., None]


@dataclass(frozen=True)
class RVQConfig:
    k: int = 256  # centroids per stage (2..1024); indices are uint8 up to 256, else uint16
    key_stages: int = 4  # stages trained for keys
    value_stages: int = 2  # stages trained for values
    iters: int = 20  # Lloyd rounds per k-means
    max_train: int = 20000  # training vectors per (layer, head, side); more are subsampled
    seed: int = 0  # seeds subsampling and k-means++
    storage_dtype: str = "float16"  # dtype codebooks are stored (and used) in

    def __post_init__(self) -> None:
        if not isinstance(self.k, int) or not 2 <= self.k <= MAX_K:
            raise ValueError(f"k must be an integer in [2, {MAX_K}], got {self.k!r}")
        for name in ("key_stages", "value_stages"):
            v = getattr(self, name)
            if not isinstance(v, int) or not 0 <= v <= 16:
                raise ValueError(f"{name} must be an integer in [0, 16], got {v!r}")
        if self.key_stages + self.value_stages == 0:
            raise ValueError("train at least one stage for keys or values")
        if not isinstance(self.iters, int) or self.iters < 0:
            raise ValueError(f"iters must be >= 0, got {self.iters!r}")
        if not isinstance(self.max_train, int) or self.max_train < self.k:
            raise ValueError(f"max_train must be an integer >= k ({self.k}), got {self.max_train!r}")
        if self.storage_dtype not in _DTYPES:
            raise ValueError(f"storage_dtype must be one of {sorted(_DTYPES)}, got {self.storage_dtype!r}")

    @property
    def index_dtype(self) -> np.dtype:
        return np.dtype(np.uint8 if self.k <= 256 else np.uint16)

    @property
    def index_bits(self) -> int:
        """Bits per index when bit-packed: ceil(log2 k)."""
        return (self.k - 1).bit_length()


@dataclass(frozen=True)
class RVQCodes:
    """The index streams of a run of tokens (see the module docstring)."""

    keys: np.ndarray  # [layers, kv_heads, key_stages, tokens] uint8 | uint16
    values: np.ndarray  # [layers, kv_heads, value_stages, tokens]
    k: int  # alphabet size of every stream

    def streams(self) -> list[tuple[tuple[int, int, str, int], np.ndarray]]:
        """Every stream as ((layer, head, "K"|"V", stage), symbols [tokens])."""
        out = []
        for side, arr in (("K", self.keys), ("V", self.values)):
            for layer in range(arr.shape[0]):
                for head in range(arr.shape[1]):
                    for stage in range(arr.shape[2]):
                        out.append(((layer, head, side, stage), arr[layer, head, stage]))
        return out


def _seed(base: int, side: int, stage: int) -> int:
    """A distinct seed per (side, stage) k-means batch."""
    return (base * 1_000_003 + side * 64 + stage) % (2**63)


def encode_residual(books: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """Greedy RVQ: books [heads, stages, k, d], x [heads, tokens, d] -> idx [heads, stages, tokens], in books' dtype."""
    resid = x.to(books.dtype).clone()
    out = torch.empty(books.shape[0], books.shape[1], x.shape[1], dtype=torch.int64)
    for s in range(books.shape[1]):
        c = books[:, s]  # [heads, k, d]
        dist = (c * c).sum(-1)[:, None, :] - 2.0 * torch.bmm(resid, c.transpose(1, 2))  # [heads, tokens, k]
        idx = dist.argmin(dim=-1)  # [heads, tokens]
        out[:, s] = idx
        resid -= torch.gather(c, 1, idx[..., None].expand(-1, -1, c.shape[-1]))
    return out


def decode_residual(books: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """Sum of the chosen centroids: books [heads, stages, k, d], idx [heads, stages, tokens] -> [heads, tokens, d]."""
    heads, stages, _, d = books.shape
    out = torch.zeros(heads, idx.shape[-1], d, dtype=books.dtype)
    for s in range(stages):
        out += torch.gather(books[:, s], 1, idx[:, s, :, None].expand(-1, -1, d))
    return out


@dataclass(frozen=True, eq=False)
class RVQCodebooks:
    """Trained codebooks of one model identity (see the module docstring for the layout)."""

    keys: torch.Tensor  # [layers, kv_heads, key_stages, k, head_dim] storage dtype
    values: torch.Tensor  # [layers, kv_heads, value_stages, k, head_dim]
    config: RVQConfig
    identity: str  # model identity the codebooks belong to
    train: dict = field(default_factory=dict)  # training facts (JSON-able)
    # [layers, kv_heads, head_dim] float32 channel weights of the distortion (bench/lib/metric.py);
    # None = all ones (plain squared error). Encoding picks argmin ||w * (x - c)||^2.
    key_weights: torch.Tensor | None = None
    value_weights: torch.Tensor | None = None
    # int8 storage only: float16 scale of every centroid row, [layers, kv_heads, stages, k]
    key_scales: torch.Tensor | None = None
    value_scales: torch.Tensor | None = None
    version: str = ""  # computed in __post_init__

    def __post_init__(self) -> None:
        cfg = self.config
        for name, stages in (("keys", cfg.key_stages), ("values", cfg.value_stages)):
            t = getattr(self, name)
            if t.dim() != 5 or t.shape[2] != stages or t.shape[3] != cfg.k:
                raise ValueError(f"{name} codebooks {tuple(t.shape)} do not match stages={stages}, k={cfg.k}")
        for name, ref in (("key_weights", self.keys), ("value_weights", self.values)):
            w = getattr(self, name)
            shape = (ref.shape[0], ref.shape[1], ref.shape[4])
            w = torch.ones(shape) if w is None else w.to(torch.float32).clone()  # never shared
            if tuple(w.shape) != shape or not bool((w > 0).all()):
                raise ValueError(f"{name} must be positive, shaped {shape}")
            object.__setattr__(self, name, w)
        int8 = cfg.storage_dtype == "int8"
        for name, ref in (("key_scales", self.keys), ("value_scales", self.values)):
            sc = getattr(self, name)
            if ref.dtype != _DTYPES[cfg.storage_dtype]:
                raise ValueError(f"codebooks are {ref.dtype}, the config says {cfg.storage_dtype}")
            if int8 and (sc is None or tuple(sc.shape) != tuple(ref.shape[:4]) or sc.dtype != torch.float16):
                raise ValueError(f"int8 codebooks need float16 {name} shaped {tuple(ref.shape[:4])}")
            if not int8 and sc is not None:
                raise ValueError(f"{name} belong to int8 codebooks only")
        object.__setattr__(self, "version", self._digest())
        # float32 working copies: encode/decode run in float32 on the stored numbers.
        object.__setattr__(self, "_k32", from_storage(self.keys, self.key_scales))
        object.__setattr__(self, "_v32", from_storage(self.values, self.value_scales))
        # ...and in the weighted space encoding compares in: w * c, [layers, heads, stages, k, d]
        object.__setattr__(self, "_kw32", self._k32 * self.key_weights[:, :, None, None, :])
        object.__setattr__(self, "_vw32", self._v32 * self.value_weights[:, :, None, None, :])

    def _digest(self) -> str:
        h = hashlib.sha256()
        for part in (str(RVQ_FORMAT), self.identity, _canon(asdict(self.config))):
            h.update(part.encode() + b"\0")
        for t in self._tensors().values():
            h.update(str(tuple(t.shape)).encode())
            h.update(t.contiguous().view(torch.uint8).numpy().tobytes() if t.numel() else b"")
        return h.hexdigest()[:16]

    def _tensors(self) -> dict[str, torch.Tensor]:
        """Every stored tensor by its name in the serialized layout (scales only for int8)."""
        out = {"keys": self.keys, "values": self.values, "key_weights": self.key_weights,
               "value_weights": self.value_weights}
        if self.key_scales is not None:
            out.update(key_scales=self.key_scales, value_scales=self.value_scales)
        return out

    @property
    def n_layers(self) -> int:
        return int(self.keys.shape[0] if self.keys.numel() else self.values.shape[0])

    @property
    def nbytes(self) -> int:
        """Bytes of the codebook tensors as stored, scales included (what an archive amortizes)."""
        parts = (self.keys, self.values, self.key_scales, self.value_scales)
        return int(sum(t.numel() * t.element_size() for t in parts if t is not None))

    def stage_nbytes(self) -> int:
        """Bytes of one stage of one side as stored, over every (layer, head): what each stage a
        quantizer uses adds to the all-in cost."""
        ref = self.keys if self.keys.numel() else self.values
        layers, heads, _, k, dim = ref.shape
        return int(layers * heads * k * (dim * ref.element_size() + (2 if self.key_scales is not None else 0)))

    def books(self, side: str, layer: int, stages: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """Codebooks of one layer and side ("K" or "V"), first `stages` stages: [heads, stages, k, d].

        float32 by default; float64 (exact copies of the stored numbers) for float64 evaluations.
        """
        full = self._k32 if side == "K" else self._v32  # type: ignore[attr-defined]
        if not 0 <= stages <= full.shape[2]:
            raise ValueError(f"{side} has {full.shape[2]} trained stages, asked for {stages}")
        return full[layer, :, :stages].to(dtype)

    def weights(self, side: str, layer: int) -> torch.Tensor:
        """Distortion weights of one layer and side: [heads, d]."""
        return (self.key_weights if side == "K" else self.value_weights)[layer]  # type: ignore[index]

    def encode_side(self, side: str, layer: int, stages: int, x: torch.Tensor) -> torch.Tensor:
        """Indices [heads, stages, tokens] of x [heads, tokens, d] under the weighted distortion.

        Distances are computed in float32, or in float64 when x is float64.
        """
        w = self.weights(side, layer)[:, None, :]  # [heads, 1, d]
        if x.dtype == torch.float64:
            books = self.books(side, layer, stages, torch.float64) * w.double()[:, None]
            return encode_residual(books, x * w.double())
        full = self._kw32 if side == "K" else self._vw32  # type: ignore[attr-defined]
        if not 0 <= stages <= full.shape[2]:
            raise ValueError(f"{side} has {full.shape[2]} trained stages, asked for {stages}")
        return encode_residual(full[layer, :, :stages], x.to(torch.float32) * w)

    def encode(self, kv: KV, key_stages: int | None = None, value_stages: int | None = None) -> RVQCodes:
        """Index streams of position-free K/V [layers, kv_heads, tokens, head_dim]."""
        ks = self.config.key_stages if key_stages is None else key_stages
        vs = self.config.value_stages if value_stages is None else value_stages
        dt = self.config.index_dtype
        k_idx = [self.encode_side("K", i, ks, kv.keys[i]) for i in range(kv.keys.shape[0])]
        v_idx = [self.encode_side("V", i, vs, kv.values[i]) for i in range(kv.values.shape[0])]
        return RVQCodes(torch.stack(k_idx).numpy().astype(dt), torch.stack(v_idx).numpy().astype(dt), self.config.k)

    def decode(self, codes: RVQCodes) -> KV:
        """Position-free K/V (float32) from index streams (both sides need at least one stage)."""
        if codes.keys.shape[2] == 0 or codes.values.shape[2] == 0:
            raise ValueError("decode needs index streams for both keys and values")
        keys = [decode_residual(self.books("K", i, codes.keys.shape[2]), torch.from_numpy(codes.keys[i].astype(np.int64)))
                for i in range(codes.keys.shape[0])]
        values = [decode_residual(self.books("V", i, codes.values.shape[2]),
                                  torch.from_numpy(codes.values[i].astype(np.int64))) for i in range(codes.values.shape[0])]
        return KV(torch.stack(keys), torch.stack(values))

    def to_bytes(self) -> bytes:
        meta = {"grm_rvq_format": str(RVQ_FORMAT), "identity": self.identity, "config": _canon(asdict(self.config)),
                "train": _canon(self.train), "version": self.version}
        return st_save({name: t.contiguous() for name, t in self._tensors().items()}, metadata=meta)

    @classmethod
    def from_bytes(cls, data: bytes, identity: str | None = None) -> RVQCodebooks:
        """Parse codebook bytes; ValueError if they are damaged, of another format or (given) another identity."""
        try:
            tensors = st_load(bytes(data))
            header_len = int.from_bytes(data[:8], "little")
            meta = json.loads(bytes(data[8 : 8 + header_len])).get("__metadata__") or {}
        except Exception as exc:  # safetensors raises several types for bad bytes
            raise ValueError(f"not a codebook file: {exc}") from exc
        if meta.get("grm_rvq_format") != str(RVQ_FORMAT):
            raise ValueError(f"codebook format {meta.get('grm_rvq_format')!r} is not {RVQ_FORMAT}")
        if identity is not None and meta.get("identity") != identity:
            raise ValueError("codebooks belong to another model identity")
        try:
            config = RVQConfig(**json.loads(meta["config"]))
        except (KeyError, TypeError, json.JSONDecodeError) as exc:
            raise ValueError(f"codebook config unreadable: {exc}") from exc
        want = {"keys", "values", "key_weights", "value_weights"}
        if config.storage_dtype == "int8":
            want |= {"key_scales", "value_scales"}
        if set(tensors) != want:
            raise ValueError(f"codebook file has tensors {sorted(tensors)}")
        books = cls(tensors["keys"], tensors["values"], config, meta.get("identity", ""),
                    json.loads(meta.get("train", "{}")), tensors["key_weights"], tensors["value_weights"],
                    tensors.get("key_scales"), tensors.get("value_scales"))
        if books.version != meta.get("version"):
            raise ValueError(f"codebook version {meta.get('version')!r} does not match its content ({books.version})")
        return books


def _canon(obj: object) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))


def train_rvq(kv: KV, config: RVQConfig, identity: str, train_info: dict | None = None,
              key_weights: torch.Tensor | None = None, value_weights: torch.Tensor | None = None) -> RVQCodebooks:
    """Train every (layer, head, side) codebook stack on position-free K/V [layers, kv_heads, tokens, head_dim].

    With channel weights [layers, kv_heads, head_dim] (bench/lib/metric.py) k-means runs on
    w * x, so it minimizes the weighted distortion; the stored centroids are in x's own units.
    """
    layers, heads, n, dim = kv.keys.shape
    ones = torch.ones(layers, heads, dim)
    kw = ones if key_weights is None else key_weights.to(torch.float32)
    vw = ones if value_weights is None else value_weights.to(torch.float32)
    if n < config.k:
        raise ValueError(f"training needs at least k={config.k} tokens, got {n}")
    store = _DTYPES[config.storage_dtype]
    out, scales = {}, {}
    for side_i, (side, src, stages, wt) in enumerate((("K", kv.keys, config.key_stages, kw),
                                                       ("V", kv.values, config.value_stages, vw))):
        w = wt.reshape(layers * heads, 1, dim)
        books = torch.zeros(layers * heads, stages, config.k, dim, dtype=store)
        book_scales = torch.zeros(layers * heads, stages, config.k, dtype=torch.float16)
        x = src.reshape(layers * heads, n, dim)  # one k-means problem per (layer, head), solved as a batch
        if n > config.max_train and stages:
            gen = torch.Generator().manual_seed(_seed(config.seed, side_i, 63))
            pick = torch.stack([torch.randperm(n, generator=gen)[: config.max_train] for _ in range(layers * heads)])
            x = torch.gather(x, 1, pick[..., None].expand(-1, -1, dim))
        x = x.to(torch.float32) * w  # [layers * heads, vectors, dim] weighted residuals
        for stage in range(stages):
            cw = kmeans(x, KMeansConfig(config.k, config.iters, _seed(config.seed, side_i, stage)))
            c, sc = to_storage(cw / w, config.storage_dtype)  # stored in x's units
            books[:, stage] = c
            if sc is not None:
                book_scales[:, stage] = sc
            c32 = from_storage(c, sc) * w  # what encoding will compare against
            idx, _ = nearest(x, c32)
            x = x - torch.gather(c32, 1, idx[..., None].expand(-1, -1, dim))
        out[side] = books.reshape(layers, heads, stages, config.k, dim)
        scales[side] = book_scales.reshape(layers, heads, stages, config.k) if store == torch.int8 else None
    info = {"tokens": n, "vectors_per_codebook": min(n, config.max_train),
            "metric": "plain" if key_weights is None and value_weights is None else "weighted", **(train_info or {})}
    return RVQCodebooks(out["K"], out["V"], config, identity, info, kw, vw, scales["K"], scales["V"])


class RVQQuantizer:
    """A KVQuantizer (grm/archive/quantizer.py) over trained codebooks; 0 stages leaves that side exact."""

    def __init__(self, codebooks: RVQCodebooks, key_stages: int, value_stages: int) -> None:
        if key_stages > codebooks.config.key_stages or value_stages > codebooks.config.value_stages:
            raise ValueError(f"asked K x{key_stages} / V x{value_stages}, trained K x{codebooks.config.key_stages} "
                             f"/ V x{codebooks.config.value_stages}")
        if key_stages < 0 or value_stages < 0 or key_stages + value_stages == 0:
            raise ValueError("quantize at least one side with >= 1 stage")
        self.codebooks = codebooks
        self.key_stages = key_stages
        self.value_stages = value_stages

    @property
    def name(self) -> str:
        k = f"K x{self.key_stages}" if self.key_stages else "K exact"
        v = f"V x{self.value_stages}" if self.value_stages else "V exact"
        return f"rvq {k} / {v} (k={self.codebooks.config.k})"

    @property
    def group(self) -> int:
        return 1  # every token is encoded on its own

    def _side(self, side: str, layer: int, stages: int, x: torch.Tensor) -> torch.Tensor:
        if stages == 0:
            return x
        idx = self.codebooks.encode_side(side, layer, stages, x)
        work = torch.float64 if x.dtype == torch.float64 else torch.float32
        return decode_residual(self.codebooks.books(side, layer, stages, work), idx).to(x.dtype)

    def roundtrip(self, layer: int, keys: torch.Tensor, values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self._side("K", layer, self.key_stages, keys), self._side("V", layer, self.value_stages, values)

    def archive_bytes_per_token(self, n_layers: int, kv_heads: int, head_dim: int) -> float:
        """Bit-packed indices; a side left exact counts as fp16."""
        bits = self.codebooks.config.index_bits
        per_head = sum(stages * bits / 8 if stages else head_dim * 2 for stages in (self.key_stages, self.value_stages))
        return n_layers * kv_heads * per_head
