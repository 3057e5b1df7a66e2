"""K/V are stored in the dtype the model computes in: a bf16 model's blocks are BF16 payloads of 2
bytes an element, an fp32 model's stay F32 (4 bytes); nothing is widened or narrowed on the way."""

from __future__ import annotations

import math

import pytest
import torch

from grm.kv import KV
from grm.store.kinds import BLOCK, SINKS
from grm.store.tenant import SYSTEM_TENANT
from tests.conftest import lorem


@pytest.mark.parametrize("dtype,name,itemsize", [("bfloat16", "BF16", 2), ("float32", "F32", 4)])
def test_stored_kv_has_the_models_compute_dtype(make_runtime, tmp_path, dtype, name, itemsize):
    rt = make_runtime(store=tmp_path / dtype, dtype=dtype, block_tokens=64, section_tokens=64)
    assert rt.lm.model.dtype == getattr(torch, dtype)
    rt.ingest_text(lorem(2, seed=5), "doc")
    d = rt.dialect
    rows = [*rt.store.records(rt.config.tenant, BLOCK), rt.store.get(SYSTEM_TENANT, SINKS, rt.exact.sink_fp)]
    assert len(rows) >= 3
    for rec in rows:
        data = rt.store.read_payload(rec)
        kv, _meta = KV.from_bytes(data)
        tokens = int(rec.meta["tokens"])
        assert kv.keys.dtype == getattr(torch, dtype) and f'"dtype":"{name}"'.encode() in data[:4096]
        tensor_bytes = 2 * itemsize * math.prod((d.n_layers, d.kv_heads, tokens, d.head_dim))
        assert kv.nbytes == tensor_bytes and len(data) - tensor_bytes < 8 + 4096 + 16 * tokens  # header: text, ids
