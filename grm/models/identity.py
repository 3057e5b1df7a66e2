"""Model identity: one digest that changes whenever anything that shapes K/V changes.

identity = SHA-256 over (GRM payload format version, model type, canonical config JSON,
weight-file digests, tokenizer-file digests, dtype, position law, numeric regime). The regime is
the device kind the K/V is computed on ("cpu", "cuda:sm90"): the same weights in bf16 on a GPU
give other K/V than in fp32 on a CPU, and GRM serves K/V as exact only to the regime that made
it. The CPU regime adds no field, so identities (and stores) from before regimes stay valid. Hashing hundreds of MB of
weights on every start-up would dominate a warm ask, so file digests are computed once and kept in
a small JSON beside the folder, re-checked by (size, mtime_ns) of every file they cover.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

PAYLOAD_FORMAT_VERSION = 1  # bump when the payload layout changes: old records become misses


def sha256_file(path: Path, chunk: int = 1 << 22) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def _stat_key(path: Path) -> list[int]:
    st = path.stat()
    return [st.st_size, st.st_mtime_ns]


def cached_file_digests(files: list[Path], cache_file: Path) -> dict[str, str]:
    """SHA-256 of each file, reusing `cache_file` entries whose (size, mtime) still match."""
    try:
        cached = json.loads(cache_file.read_text())
    except (OSError, ValueError):
        cached = {}
    out: dict[str, str] = {}
    changed = False
    for path in files:
        key = str(path)
        entry = cached.get(key)
        stat = _stat_key(path)
        if isinstance(entry, dict) and entry.get("stat") == stat:
            out[key] = entry["sha256"]
            continue
        out[key] = sha256_file(path)
        cached[key] = {"stat": stat, "sha256": out[key]}
        changed = True
    if changed:
        tmp = cache_file.with_suffix(".tmp")
        try:
            tmp.write_text(json.dumps(cached, sort_keys=True))
            os.replace(tmp, cache_file)
        except OSError:
            pass  # a read-only cache only costs re-hashing next time
    return out


def model_identity(
    model_type: str,
    config: dict,
    weight_digests: list[str],
    tokenizer_digests: list[str],
    dtype: str,
    position_law: str,
    regime: str = "cpu",
) -> str:
    """The identity digest (hex). Inputs must be deterministic across processes and machines."""
    config = {k: v for k, v in config.items() if k not in ("transformers_version", "_name_or_path")}
    doc = {
        "grm_payload_format": PAYLOAD_FORMAT_VERSION,
        "model_type": model_type,
        "config": config,
        "weights": weight_digests,
        "tokenizer": tokenizer_digests,
        "dtype": dtype,
        "position_law": position_law,
    }
    if regime != "cpu":
        doc["regime"] = regime
    blob = json.dumps(doc, sort_keys=True, separators=(",", ":"), default=str).encode()
    return hashlib.sha256(blob).hexdigest()


def tensor_digest(module: object) -> str:
    """SHA-256 over a module's state dict (names, shapes, bytes); for models built in code."""
    import torch

    h = hashlib.sha256()
    for name, tensor in sorted(module.state_dict().items()):
        t = tensor.detach().to("cpu").contiguous()
        h.update(name.encode())
        h.update(str(tuple(t.shape)).encode())
        h.update(str(t.dtype).encode())
        h.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()
