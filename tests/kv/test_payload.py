"""Payload bytes: one spelling per payload, in every process, readable by safetensors itself."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys

import torch
from safetensors.torch import load

from grm.kv import KV

SCRIPT = """
import hashlib, torch
from grm.kv import KV
g = torch.Generator().manual_seed(7)
kv = KV(torch.randn(2, 3, 5, 4, generator=g), torch.randn(2, 3, 5, 4, generator=g))
meta = {"identity": "x", "tenant": "t", "fingerprint": "f", "parent": "p", "seat": "4", "text": "hi", "ids": "[1]"}
print(hashlib.sha256(kv.to_bytes(meta)).hexdigest())
"""


def test_same_payload_same_bytes_across_processes_with_different_hash_seeds():
    digests = set()
    for seed in ("1", "2", "3"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        out = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, check=True)
        digests.add(out.stdout.strip())
    assert len(digests) == 1


def test_payload_is_safetensors_and_round_trips():
    kv = KV(torch.randn(2, 3, 5, 4), torch.randn(2, 3, 5, 4))
    data = kv.to_bytes({"b": "2", "a": "1"})
    tensors = load(data)
    assert torch.equal(tensors["keys"], kv.keys) and torch.equal(tensors["values"], kv.values)
    back, meta = KV.from_bytes(data)
    assert torch.equal(back.keys, kv.keys) and meta["a"] == "1" and meta["b"] == "2"
    assert data == kv.to_bytes({"a": "1", "b": "2"})  # key order of the caller's dict does not matter
    assert hashlib.sha256(data).hexdigest()
