"""Fixed-width bit packing, and the bit-packed symbol codec (the archive's baseline).

Bit order, used both in memory and on disk: value k of a packed run occupies stream bits
[k*w, (k+1)*w), least significant bit first, and stream bit j is bit (j % 8) of byte j // 8.
This is plain little-endian when w is 8, 16, 32 or 64, so those widths take a direct path;
other widths are packed eight values (= w whole bytes) at a time, column by column.

`BitPackedCodec` stores symbols at w = ceil(log2 A) bits each (1 bit for A = 2, 8 for A = 256,
10 for A = 1024). Its container is the one in grm/archive/codec.py with

    magic b"GRMB", param1 = w, param2 = 0, payload = the n symbols packed at w bits,
    P = ceil(n * w / 8) bytes; the unused high bits of the last byte are zero.
"""

from __future__ import annotations

import functools

import numpy as np
from numpy.typing import ArrayLike

from grm.archive.codec import (
    BYTES_PATH,
    HEADER_SIZE,
    ContainerHeader,
    as_symbols,
    check_alphabet_size,
    check_index,
    pack_container,
    unpack_container,
)
from grm.errors import CorruptionError

_ALIGNED = (8, 16, 32, 64)


def symbol_bits(alphabet_size: int) -> int:
    """w = ceil(log2 A): the fewest bits that hold every symbol in [0, A)."""
    return max(1, (check_alphabet_size(alphabet_size) - 1).bit_length())


@functools.lru_cache(maxsize=None)
def _byte_spans(width: int) -> tuple[tuple[int, int, int], ...]:
    """(k, byte, shift) for every byte that value k of an 8-value group touches.

    Eight values of w bits fill exactly w bytes, so groups start on byte boundaries and the
    layout inside a group is the same for every group: value k covers bits [k*w, (k+1)*w) of
    it, so byte b holds the value's bits from bit 8*b - k*w on (when that is negative, the
    value starts -shift bits into the byte).
    """
    spans = []
    for k in range(8):
        first = k * width
        for byte in range(first // 8, (first + width - 1) // 8 + 1):
            spans.append((k, byte, 8 * byte - first))
    return tuple(spans)


def pack_uint(values: ArrayLike, width: int) -> bytes:
    """Pack unsigned integers (each < 2**width, 1 <= width <= 64) into ceil(n*width/8) bytes."""
    if not 1 <= width <= 64:
        raise ValueError(f"width must be in [1, 64], got {width}")
    v = np.asarray(values, dtype=np.uint64).ravel()
    if width in _ALIGNED:
        return v.astype(f"<u{width // 8}").tobytes()
    groups = -(-v.size // 8)
    padded = np.zeros(groups * 8, dtype=np.uint64)  # zero values leave the padding bits zero
    padded[: v.size] = v
    vals = padded.reshape(groups, 8)  # [groups, 8]
    out = np.zeros((groups, width), dtype=np.uint8)  # [groups, width]: w bytes per 8 values
    for k, byte, shift in _byte_spans(width):
        part = vals[:, k] << np.uint64(-shift) if shift < 0 else vals[:, k] >> np.uint64(shift)
        out[:, byte] |= (part & np.uint64(0xFF)).astype(np.uint8)
    return out.tobytes()[: (v.size * width + 7) // 8]


def unpack_uint(data: bytes | memoryview, width: int, count: int) -> np.ndarray:
    """Inverse of `pack_uint`: the first `count` values, as uint64.  # [count]"""
    if not 1 <= width <= 64:
        raise ValueError(f"width must be in [1, 64], got {width}")
    if width in _ALIGNED:
        return np.frombuffer(data, dtype=f"<u{width // 8}", count=count).astype(np.uint64)
    groups = -(-count // 8)
    used = (count * width + 7) // 8
    raw = np.zeros(groups * width, dtype=np.uint8)
    raw[:used] = np.frombuffer(data, dtype=np.uint8, count=used)
    raw = raw.reshape(groups, width)  # [groups, width]
    vals = np.zeros((groups, 8), dtype=np.uint64)  # [groups, 8]
    for k, byte, shift in _byte_spans(width):
        part = raw[:, byte].astype(np.uint64)
        vals[:, k] |= part >> np.uint64(-shift) if shift < 0 else part << np.uint64(shift)
    return (vals & np.uint64(2**width - 1)).reshape(-1)[:count]


class BitPackedCodec:
    """Symbols packed at ceil(log2 A) bits each: O(1) symbol_at, amortized O(n) append."""

    MAGIC = b"GRMB"

    def __init__(self, alphabet_size: int) -> None:
        self._alphabet = check_alphabet_size(alphabet_size)
        self._width = symbol_bits(alphabet_size)
        self._buf = bytearray()  # packed stream, bit order as in the module docstring
        self._n = 0

    @classmethod
    def encode(cls, symbols: ArrayLike, alphabet_size: int) -> BitPackedCodec:
        """A new codec holding `symbols` (each in [0, alphabet_size))."""
        codec = cls(alphabet_size)
        codec.append(symbols)
        return codec

    @property
    def alphabet_size(self) -> int:
        return self._alphabet

    @property
    def bits_per_symbol(self) -> int:
        return self._width

    @property
    def payload_nbytes(self) -> int:
        return len(self._buf)

    def __len__(self) -> int:
        return self._n

    def append(self, symbols: ArrayLike) -> None:
        """Add symbols; O(len(symbols)) amortized (bytearray growth)."""
        sym = as_symbols(symbols, self._alphabet)
        if sym.size == 0:
            return
        # Groups of 8 symbols start on byte boundaries: re-pack the last, partial group (< 8
        # symbols, so O(1)) together with the new symbols.
        group_start = self._n - self._n % 8
        offset = group_start * self._width // 8
        tail = unpack_uint(bytes(self._buf[offset:]), self._width, self._n - group_start)
        del self._buf[offset:]
        self._buf.extend(pack_uint(np.concatenate((tail, sym.astype(np.uint64))), self._width))
        self._n += sym.size

    def decode(self) -> np.ndarray:
        """The whole stream as int64.  # [n]"""
        return unpack_uint(bytes(self._buf), self._width, self._n).astype(np.int64)

    def symbol_at(self, i: int) -> int:
        """Symbol i in O(1): read the at most 3 bytes that hold its bits."""
        i = check_index(i, self._n)
        start = i * self._width
        lo, hi = start // 8, (start + self._width + 7) // 8
        word = int.from_bytes(self._buf[lo:hi], "little")
        return (word >> (start % 8)) & ((1 << self._width) - 1)

    def to_bytes(self) -> bytes:
        header = ContainerHeader(self.MAGIC, self._alphabet, self._width, 0, self._n)
        return pack_container(header, bytes(self._buf))

    @classmethod
    def from_bytes(cls, data: bytes) -> BitPackedCodec:
        """Parse `to_bytes()` output; damage raises `CorruptionError`."""

        def payload_size(h: ContainerHeader) -> int:
            width = symbol_bits(h.alphabet_size)
            if h.param1 != width or h.param2 != 0:
                raise CorruptionError(BYTES_PATH, 8, (width, 0), (h.param1, h.param2), "params")
            return (h.length * width + 7) // 8

        header, payload = unpack_container(data, cls.MAGIC, payload_size)
        codec = cls(header.alphabet_size)
        codec._buf = bytearray(payload)
        codec._n = header.length
        if codec._n:
            # Padding bits must be zero and every symbol below A: w bits can hold up to 2**w - 1.
            tail_bits = codec._n * codec._width % 8
            if tail_bits and codec._buf[-1] >> tail_bits:
                offset = HEADER_SIZE + len(payload) - 1
                got = codec._buf[-1] >> tail_bits
                raise CorruptionError(BYTES_PATH, offset, 0, got, "non-zero padding bits")
            symbols = codec.decode()
            bad = np.flatnonzero(symbols >= header.alphabet_size)
            if bad.size:
                k = int(bad[0])
                offset = HEADER_SIZE + k * codec._width // 8
                expected = f"symbol < {header.alphabet_size}"
                raise CorruptionError(BYTES_PATH, offset, expected, int(symbols[k]))
        return codec
