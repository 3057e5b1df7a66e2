"""What a symbol codec is: the interfaces, their configuration, input checks and the byte container.

The archive tier turns K/V vectors into codebook indices ("symbols", alphabet size A = 2..1024)
and keeps each index stream (one per layer, head, K/V, stage) in a codec. Two codecs implement
the same `SymbolCodec` interface: `BitPackedCodec` (grm/archive/bitpack.py, the baseline) and
`ChaosGameCodec` (grm/archive/chaos.py). Suffix search is an optional ability, so it is its own
Protocol (`SuffixSearchable`), implemented only by the chaos-game codec.

Lifecycle of a codec (who calls what, and when):
1. The archiver creates one with `Codec.encode(symbols, alphabet_size)` (a new stream), or the
   reader with `Codec.from_bytes(data)` (a persisted stream; damage raises `CorruptionError`).
2. The archiver may `append(symbols)` as the stream grows (amortized O(new symbols)).
3. Readers call `decode()` (whole stream), `symbol_at(i)` (one symbol) or, where supported,
   `suffix_search(query)`. Reads never change the codec.
4. The archiver persists it with `to_bytes()`; the store owns the file and its durability.

Container layout (both codecs; all integers little-endian):

    offset  size  field
    0       4     magic: b"GRMB" (bit-packed) or b"GRMG" (chaos game, grid form)
    4       2     u16 format version (CONTAINER_VERSION = 1)
    6       2     u16 alphabet size A (2..1024)
    8       2     u16 param1: bits per symbol (bit-packed) | anchor span in symbols (chaos)
    10      2     u16 param2: 0 (bit-packed) | bits per packed anchor coordinate (chaos)
    12      8     u64 stream length n, in symbols
    20      4     u32 CRC32 (zlib) of bytes [0, 20)
    24      P     payload; P is a function of the header, defined by each codec
    24+P    4     u32 CRC32 (zlib) of the payload

The header has its own CRC so that a damaged length or alphabet size is reported as header
damage instead of sending the reader off to misread the payload. Any mismatch raises
`CorruptionError(path="<bytes>", offset, expected, got)`; a codec never serves damaged bytes.
"""

from __future__ import annotations

import math
import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np
from numpy.typing import ArrayLike

from grm.errors import CorruptionError, StoreError, UserInputError

if TYPE_CHECKING:
    from grm.archive.chaos_index import SuffixMatches

MIN_ALPHABET = 2
MAX_ALPHABET = 1024
# Every anchor coordinate numerator stays below 2**52 so that it is also an exact float64
# integer: a consumer may hold chaos-game points as float64 (plots, GPU kernels) without loss.
MAX_ANCHOR_BITS = 52

CONTAINER_VERSION = 1
_HEADER = struct.Struct("<4sHHHHQ")  # magic, version, A, param1, param2, length: 20 bytes
_CRC = struct.Struct("<I")
HEADER_SIZE = _HEADER.size + _CRC.size  # 24: header fields plus their CRC32
TRAILER_SIZE = _CRC.size  # 4: payload CRC32
BYTES_PATH = "<bytes>"  # the `path` of a CorruptionError raised while parsing an in-memory buffer


def check_alphabet_size(alphabet_size: int) -> int:
    """Return `alphabet_size` if it is an int in [2, 1024], else raise `UserInputError`."""
    if isinstance(alphabet_size, bool) or not isinstance(alphabet_size, (int, np.integer)):
        raise UserInputError(f"alphabet size must be an integer, got {alphabet_size!r}")
    if not MIN_ALPHABET <= int(alphabet_size) <= MAX_ALPHABET:
        raise UserInputError(
            f"alphabet size must be in [{MIN_ALPHABET}, {MAX_ALPHABET}], got {alphabet_size}"
        )
    return int(alphabet_size)


def as_symbols(symbols: ArrayLike, alphabet_size: int, what: str = "symbols") -> np.ndarray:
    """Check a symbol stream and return it as a contiguous int64 array.  # [n]

    Raises `UserInputError` for anything that is not a 1-D array of integers in [0, A): floats
    and bools are refused rather than silently truncated, because a codebook index that is not
    an integer is a bug upstream, not a symbol.
    """
    arr = np.asarray(symbols)
    if arr.ndim != 1:
        raise UserInputError(f"{what} must be a 1-D sequence, got shape {arr.shape}")
    if arr.size == 0:
        return np.zeros(0, dtype=np.int64)
    if arr.dtype.kind not in "iu":
        raise UserInputError(f"{what} must be integers, got dtype {arr.dtype}")
    lo, hi = int(arr.min()), int(arr.max())
    if lo < 0 or hi >= alphabet_size:
        bad = lo if lo < 0 else hi
        raise UserInputError(f"{what} must lie in [0, {alphabet_size}), found {bad}")
    return np.ascontiguousarray(arr, dtype=np.int64)


def check_index(i: int, length: int) -> int:
    """Return `i` if 0 <= i < length (no negative indexing), else raise `UserInputError`."""
    if isinstance(i, bool) or not isinstance(i, (int, np.integer)):
        raise UserInputError(f"symbol index must be an integer, got {i!r}")
    if not 0 <= int(i) < length:
        raise UserInputError(f"symbol index {i} out of range for a stream of {length} symbols")
    return int(i)


def grid_side(alphabet_size: int) -> int:
    """g = ceil(sqrt(A)): the side of the square grid whose vertices are the A symbols."""
    return math.isqrt(check_alphabet_size(alphabet_size) - 1) + 1


def max_span(alphabet_size: int) -> int:
    """The largest anchor span s with g**s <= 2**52, i.e. s * log2(g) <= 52 (exact integers)."""
    g = grid_side(alphabet_size)
    span = 0
    while g ** (span + 1) <= 2**MAX_ANCHOR_BITS:
        span += 1
    return span


@dataclass(frozen=True)
class ChaosGridConfig:
    """Configuration of the chaos-game codec (grid form)."""

    alphabet_size: int  # A: number of distinct symbols, 2..1024
    span: int = 0  # symbols per anchor point; 0 picks max_span(A), the most the 52 bits allow

    def __post_init__(self) -> None:
        check_alphabet_size(self.alphabet_size)
        if isinstance(self.span, bool) or not isinstance(self.span, int):
            raise UserInputError(f"span must be an integer, got {self.span!r}")
        limit = max_span(self.alphabet_size)
        if not 0 <= self.span <= limit:
            raise UserInputError(
                f"span must be in [1, {limit}] for alphabet size {self.alphabet_size} "
                f"(or 0 for the maximum), got {self.span}"
            )

    @property
    def grid_side(self) -> int:
        """g: symbols sit on a g x g grid and the map ratio is 1/g."""
        return grid_side(self.alphabet_size)

    @property
    def anchor_span(self) -> int:
        """Symbols per anchor (the effective span, never 0)."""
        return self.span or max_span(self.alphabet_size)

    @property
    def coord_bits(self) -> int:
        """Bits per packed anchor coordinate numerator: numerators lie in [0, g**span)."""
        return (self.grid_side**self.anchor_span - 1).bit_length()


@runtime_checkable
class SymbolCodec(Protocol):
    """A lossless store of one symbol stream (see the module docstring for the lifecycle).

    Construction is per class (`encode(symbols, alphabet_size, ...)`, `from_bytes(data)`), so
    the Protocol covers what every instance offers.
    """

    @property
    def alphabet_size(self) -> int:
        """A: symbols lie in [0, A)."""
        ...

    @property
    def payload_nbytes(self) -> int:
        """Bytes of the serialized payload (to_bytes() minus the 28-byte header and trailer)."""
        ...

    def __len__(self) -> int: ...

    def decode(self) -> np.ndarray:
        """The whole stream as int64.  # [n]"""
        ...

    def symbol_at(self, i: int) -> int:
        """Symbol i, 0 <= i < len(self)."""
        ...

    def append(self, symbols: ArrayLike) -> None:
        """Add symbols to the end of the stream."""
        ...

    def to_bytes(self) -> bytes:
        """The container described in the module docstring."""
        ...


@runtime_checkable
class SuffixSearchable(Protocol):
    """Optional ability: find every position whose preceding symbols end with a query."""

    def suffix_search(self, query: ArrayLike) -> SuffixMatches:
        """All i with symbols[i-s+1 : i+1] == query (s = len(query)), ascending."""
        ...


@dataclass(frozen=True)
class ContainerHeader:
    """The parsed fixed header of a codec container."""

    magic: bytes  # 4 bytes naming the codec
    alphabet_size: int  # A
    param1: int  # codec-specific (see the layout in the module docstring)
    param2: int  # codec-specific
    length: int  # n, symbols in the stream


def pack_container(header: ContainerHeader, payload: bytes) -> bytes:
    """Frame `payload` with the header, the header CRC and the payload CRC."""
    fields = _HEADER.pack(
        header.magic,
        CONTAINER_VERSION,
        header.alphabet_size,
        header.param1,
        header.param2,
        header.length,
    )
    return b"".join(
        (fields, _CRC.pack(zlib.crc32(fields)), payload, _CRC.pack(zlib.crc32(payload)))
    )


def unpack_container(
    data: bytes, magic: bytes, payload_size: Callable[[ContainerHeader], int]
) -> tuple[ContainerHeader, memoryview]:
    """Check a container and return its header and payload.

    `payload_size` maps a CRC-checked header to the payload length it implies; it raises
    `CorruptionError` itself for header values the codec cannot have written.
    """
    view = memoryview(data).cast("B")
    if len(view) < HEADER_SIZE + TRAILER_SIZE:
        raise CorruptionError(
            BYTES_PATH, len(view), f">= {HEADER_SIZE + TRAILER_SIZE} bytes", len(view), "truncated"
        )
    fields = bytes(view[: _HEADER.size])
    got_magic, version, alphabet, p1, p2, length = _HEADER.unpack(fields)
    if got_magic != magic:
        raise CorruptionError(BYTES_PATH, 0, magic, got_magic, "bad magic")
    (stored_crc,) = _CRC.unpack(view[_HEADER.size : HEADER_SIZE])
    if stored_crc != zlib.crc32(fields):
        raise CorruptionError(
            BYTES_PATH, _HEADER.size, stored_crc, zlib.crc32(fields), "header CRC32 mismatch"
        )
    if version != CONTAINER_VERSION:
        # The header CRC matched, so this was written on purpose by another format version.
        raise StoreError(f"unsupported codec container version {version}")
    if not MIN_ALPHABET <= alphabet <= MAX_ALPHABET:
        raise CorruptionError(
            BYTES_PATH, 6, f"alphabet size in [{MIN_ALPHABET}, {MAX_ALPHABET}]", alphabet
        )
    header = ContainerHeader(got_magic, alphabet, p1, p2, length)
    size = payload_size(header)
    expected_total = HEADER_SIZE + size + TRAILER_SIZE
    if len(view) != expected_total:
        raise CorruptionError(
            BYTES_PATH, min(len(view), expected_total), expected_total, len(view),
            "container length disagrees with its header",
        )
    payload = view[HEADER_SIZE : HEADER_SIZE + size]
    (stored_crc,) = _CRC.unpack(view[HEADER_SIZE + size :])
    got_crc = zlib.crc32(payload)
    if stored_crc != got_crc:
        raise CorruptionError(
            BYTES_PATH, HEADER_SIZE + size, stored_crc, got_crc, "payload CRC32 mismatch"
        )
    return header, payload
