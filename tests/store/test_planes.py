"""Byte planes + zstd for payload files (grm/store/planes.py, grm/store/envelope.py).

1. shuffle/unshuffle are inverse for every width and length (trailing bytes included);
2. the width is read from a safetensors header: BF16 -> 2, F32 -> 4, anything else -> 1;
3. a compressed K/V-like payload is enveloped with the planes flag and its width, is smaller than
   zstd alone would make it, and round trips, encrypted too (compressed before encrypted: the
   ciphertext is smaller than the payload);
4. a payload zstd cannot shrink is written plain (no envelope) and still reads back;
5. old envelopes (zstd without planes) stay readable; a planes envelope with a bad width or a
   flipped body byte is a miss, never other bytes.
"""

from __future__ import annotations

import json
import random
import struct
from pathlib import Path

import pytest
import zstandard

from grm.store import Store, StoreConfig
from grm.store.envelope import F_PLANES, F_ZSTD, HEAD, HEAD_SIZE, MAGIC
from grm.store.planes import shuffle, unshuffle, width_of

KEY = bytes(range(32))


def tensor_file(dtype: str, itemsize: int, n: int, seed: int = 0) -> bytes:
    """A safetensors-framed payload whose elements have a compressible high byte (as K/V do:
    sign and exponent vary little) and a noisy low byte."""
    rng = random.Random(seed)
    size = n * itemsize
    header = {"__metadata__": {"grm_format": "x"},
              "keys": {"dtype": dtype, "shape": [n // 2], "data_offsets": [0, size // 2]},
              "values": {"dtype": dtype, "shape": [n // 2], "data_offsets": [size // 2, size]}}
    text = json.dumps(header, sort_keys=True).encode()
    text += b" " * (-len(text) % 8)
    body = bytearray()
    for _ in range(n):
        body += bytes(rng.randrange(256) for _ in range(itemsize - 1)) + bytes([0x3C + rng.randrange(3)])
    return struct.pack("<Q", len(text)) + text + bytes(body)


@pytest.mark.parametrize("width", [1, 2, 3, 4, 8])
@pytest.mark.parametrize("length", [0, 1, 7, 64, 1001])
def test_unshuffle_inverts_shuffle(width: int, length: int) -> None:
    rng = random.Random(length)
    data = bytes(rng.randrange(256) for _ in range(length))
    packed = shuffle(data, width)
    assert len(packed) == length and unshuffle(packed, width) == data
    if width == 2 and length >= 4:
        assert packed[: length // 2] == data[0 : length // 2 * 2 : 2]  # plane 0 first


def test_width_comes_from_the_safetensors_header() -> None:
    assert width_of(tensor_file("BF16", 2, 64)) == 2
    assert width_of(tensor_file("F32", 4, 64)) == 4
    assert width_of(b"plain text, not a tensor file") == 1
    assert width_of(struct.pack("<Q", 8) + b"[1,2,3] ") == 1  # JSON, but not a header object


def _open(root: Path, **kw) -> Store:
    return Store.open(StoreConfig(root, **kw))


@pytest.mark.parametrize("key", [None, KEY], ids=["plain", "encrypted"])
def test_tensor_payload_is_stored_as_byte_planes_and_round_trips(root: Path, key: bytes | None) -> None:
    data = tensor_file("BF16", 2, 20_000)
    with _open(root, master_key=key, compress=True) as s:
        rec = s.put("t", "block", "k", payload=data)
        blob = s.payload_path(rec).read_bytes()
    magic, flags, width, _nonce = HEAD.unpack_from(blob, 0)
    assert magic == MAGIC and flags & F_ZSTD and flags & F_PLANES and width == 2
    assert len(blob) < 0.75 * len(data)  # the noisy low byte stays; the high byte nearly vanishes
    if key is None:
        assert len(blob) - HEAD_SIZE < len(zstandard.ZstdCompressor(level=1).compress(data))
    with _open(root, master_key=key, compress=True) as s:
        assert s.read_payload(s.get("t", "block", "k")) == data
    with _open(root, master_key=key) as s:  # compression off: what is stored still reads
        assert s.read_payload(s.get("t", "block", "k")) == data


def test_payload_zstd_cannot_shrink_is_written_plain(root: Path) -> None:
    data = random.Random(1).randbytes(50_000)
    with _open(root, compress=True) as s:
        rec = s.put("t", "block", "k", payload=data)
        assert s.payload_path(rec).read_bytes() == data
        assert s.read_payload(rec) == data


def test_old_zstd_envelopes_read_and_damaged_planes_are_misses(root: Path) -> None:
    data = tensor_file("F32", 4, 5_000)
    with _open(root, compress=True) as s:
        rec = s.put("t", "block", "k", payload=data)
        path = s.payload_path(rec)
        blob = path.read_bytes()
        _m, flags, width, nonce = HEAD.unpack_from(blob, 0)
        assert width == 4
        old = HEAD.pack(MAGIC, F_ZSTD, 0, bytes(12)) + zstandard.ZstdCompressor(level=3).compress(data)
        path.write_bytes(old)  # as written before byte planes
        assert s.read_payload(rec) == data
        path.write_bytes(HEAD.pack(MAGIC, flags, 9, nonce) + blob[HEAD_SIZE:])  # no such width
        assert s.read_payload(rec) is None
        path.write_bytes(HEAD.pack(MAGIC, flags, 2, nonce) + blob[HEAD_SIZE:])  # the wrong width
        assert s.read_payload(rec) is None
        assert s.counters["payload_corrupt"] == 2
