"""Payload bytes: one spelling per payload, in every process, readable by safetensors itself."""

from __future__ import annotations

import hashlib
import json
import os
import struct
import subprocess
import sys

import pytest
import torch
from safetensors.torch import load

from grm.kv import KV
from grm.kv.payload import FORMAT_KEY, PAYLOAD_FORMAT_VERSION, parse_header

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


def _header(data: bytes) -> tuple[int, dict]:
    (n,) = struct.unpack_from("<Q", data, 0)
    return n, json.loads(data[8 : 8 + n])


def _rewrite(data: bytes, header: dict) -> bytes:
    """The payload with its JSON header replaced (re-padded), tensor bytes unchanged."""
    n, _ = _header(data)
    text = json.dumps(header, sort_keys=True, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + data[8 + n :]


def test_parse_header_reads_what_to_bytes_writes():
    kv = KV(torch.randn(2, 3, 5, 4), torch.randn(2, 3, 5, 4))
    data = kv.to_bytes({"tenant": "t"})
    n, _ = _header(data)
    h = parse_header(data[8 : 8 + n])
    assert h.shape == (2, 3, 5, 4) and h.tensor_bytes == 2 * 3 * 5 * 4 * 4
    assert h.meta == {FORMAT_KEY: str(PAYLOAD_FORMAT_VERSION), "tenant": "t"}


def test_headers_of_another_version_or_layout_are_refused_by_the_one_parser():
    """1. another format version, 2. a third tensor, 3. values before keys, 4. another dtype,
    5. keys and values of different shapes, 6. not JSON: each a ValueError from parse_header and
    from KV.from_bytes (which calls it), never a mis-read tensor."""
    kv = KV(torch.randn(1, 2, 3, 4), torch.randn(1, 2, 3, 4))
    data = kv.to_bytes({})
    _, good = _header(data)
    s = good["keys"]["data_offsets"][1]
    bad = [
        {**good, "__metadata__": {FORMAT_KEY: str(PAYLOAD_FORMAT_VERSION + 1)}},
        {**good, "extra": good["keys"]},
        {**good, "keys": {**good["keys"], "data_offsets": [s, 2 * s]},
         "values": {**good["values"], "data_offsets": [0, s]}},
        {**good, "keys": {**good["keys"], "dtype": "F16"}},
        {**good, "values": {**good["values"], "shape": [1, 2, 4, 3]}},
    ]
    for header in bad:
        forged = _rewrite(data, header)
        n, _ = _header(forged)
        with pytest.raises(ValueError):
            parse_header(forged[8 : 8 + n])
        with pytest.raises(ValueError):
            KV.from_bytes(forged)
    with pytest.raises(ValueError):
        parse_header(b"{not json")


def test_payload_with_missing_or_trailing_tensor_bytes_is_refused():
    data = KV(torch.randn(1, 2, 3, 4), torch.randn(1, 2, 3, 4)).to_bytes({})
    back, _ = KV.from_bytes(data)
    assert back.tokens == 3
    for damaged in (data[:-4], data + b"\0\0\0\0", data[:6]):
        with pytest.raises(ValueError):
            KV.from_bytes(damaged)
