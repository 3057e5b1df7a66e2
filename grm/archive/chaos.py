"""The chaos-game codec, exact grid form (the "Fractal KV-Cache Archives" idea).

The game. The A symbols are the vertices of a g x g grid, g = ceil(sqrt(A)): symbol s sits at
v(s) = (r, c) = (s // g, s % g). Reading symbol s maps the point p = (x, y) of the unit square to

    p' = (p + v(s)) / g,

which is the classical chaos-game step "move (g-1)/g of the way towards corner v(s)/(g-1)", a
contraction of ratio 1/g. Unrolled from the origin, after symbols s_1..s_k

    x_k = r_k/g + r_{k-1}/g^2 + ... + r_1/g^k        (y likewise with the columns c)

so each coordinate is a k-digit base-g fraction whose most significant digit is the most recent
symbol's row (x) or column (y). We keep the integer numerators X = g^k x, Y = g^k y, and one
step is then X' = X + r g^k: an integer addition.

Anchors. One point for the whole stream would need n log2(g) bits of precision, so the stream
is cut into blocks of `span` symbols (the last block may be shorter, k < span symbols) and
anchor j is the point after playing block j from the origin: (X_j, Y_j), with k digits each.
span is chosen so that g**span <= 2**52 (ChaosGridConfig): every numerator is < 2**52, an exact
uint64 and an exact float64 integer, and random access starts at most one anchor back.

Lossless by construction, not by testing:
1. s -> (s // g, s % g) is injective on [0, g^2), and A <= g^2, so each symbol is one grid vertex.
2. The numerator of a block of k symbols is X = sum_j r_j g^j with digits r_j in [0, g): the
   base-g representation, a bijection between digit strings and integers in [0, g^k).
3. All arithmetic is on integers below g**span <= 2**52 < 2**64: uint64 never overflows or
   rounds, so encoding computes that representation exactly and decoding (digit j of X is
   (X // g^j) % g, the inverse map p -> g p - v applied j times) recovers every digit.
Hence decode(encode(s)) == s for every stream, which the tests confirm rather than establish.

Complexities (n = stream length): encode and decode O(n), numpy-vectorized per block of digits;
symbol_at O(1) digit extraction from the covering anchor (within the O(span) budget);
append of m symbols O(span + m) amortized (fill the tail anchor, then encode whole blocks,
anchor arrays grow by doubling). Suffix search lives in grm/archive/chaos_index.py; its
index is built from the decoded stream on first use and dropped by every append.

Payload (the container of grm/archive/codec.py with magic b"GRMG", param1 = span,
param2 = b = bit_length(g**span - 1)): anchors in stream order, each as X then Y, packed at b
bits per value with grm.archive.bitpack.pack_uint; P = ceil(2 * ceil(n / span) * b / 8) bytes.
That is 2b/span ~= 2 log2(g) bits per symbol: the same as bit packing when A is a power of 4
(A = 16, 256, 1024), less when A is just above a power of two (A = 257: 8.33 vs 9 bits), more
when the grid has idle vertices (A = 2: 2 vs 1 bit).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
from numpy.typing import ArrayLike

from grm.archive.bitpack import pack_uint, unpack_uint
from grm.archive.chaos_index import SuffixIndex, SuffixMatches
from grm.archive.codec import (
    BYTES_PATH,
    HEADER_SIZE,
    ChaosGridConfig,
    ContainerHeader,
    as_symbols,
    check_index,
    max_span,
    pack_container,
    unpack_container,
)
from grm.errors import CorruptionError


class ChaosGameCodec:
    """A symbol stream kept as exact chaos-game anchor points (see the module docstring)."""

    MAGIC = b"GRMG"

    def __init__(self, config: ChaosGridConfig) -> None:
        self._config = config
        self._g = config.grid_side
        self._span = config.anchor_span
        self._place_int = [self._g**j for j in range(self._span + 1)]  # g**j, exact Python ints
        self._place = np.array(self._place_int[: self._span], dtype=np.uint64)  # [span]
        self._x = np.zeros(0, dtype=np.uint64)  # [capacity] X numerators; first _anchors() valid
        self._y = np.zeros(0, dtype=np.uint64)  # [capacity] Y numerators
        self._n = 0
        self._index: SuffixIndex | None = None  # built lazily, invalid after append

    @classmethod
    def encode(cls, symbols: ArrayLike, alphabet_size: int, span: int = 0) -> ChaosGameCodec:
        """A new codec holding `symbols`; span 0 picks the largest exact span for A."""
        codec = cls(ChaosGridConfig(alphabet_size, span))
        codec.append(symbols)
        return codec

    @property
    def config(self) -> ChaosGridConfig:
        return self._config

    @property
    def alphabet_size(self) -> int:
        return self._config.alphabet_size

    @property
    def span(self) -> int:
        return self._span

    @property
    def payload_nbytes(self) -> int:
        """Serialized anchor bytes (the archive proper, without header and CRCs)."""
        return (2 * self._anchors() * self._config.coord_bits + 7) // 8

    def __len__(self) -> int:
        return self._n

    def _anchors(self, n: int | None = None) -> int:
        """Anchors covering the first n symbols (default: the whole stream)."""
        return -(-(self._n if n is None else n) // self._span)

    def _reserve(self, anchors: int) -> None:
        """Grow the anchor arrays to hold `anchors`, doubling so append stays amortized O(m)."""
        if anchors <= self._x.size:
            return
        capacity = max(anchors, 2 * self._x.size, 16)
        for name in ("_x", "_y"):
            old = getattr(self, name)
            new = np.zeros(capacity, dtype=np.uint64)
            new[: old.size] = old
            setattr(self, name, new)

    def _encode_blocks(self, sym: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Anchor numerators of `sym` cut into blocks from its start.  # [blocks] each

        Padding the last block with symbol 0 adds zero digits, so a k-symbol tail gets
        exactly its k-digit numerator.
        """
        blocks = -(-sym.size // self._span)
        padded = np.zeros(blocks * self._span, dtype=np.uint64)
        padded[: sym.size] = sym
        digits = padded.reshape(blocks, self._span)  # [blocks, span], oldest symbol first
        rows, cols = digits // np.uint64(self._g), digits % np.uint64(self._g)
        # Digit j of a block carries place value g**j: the most recent symbol is most significant.
        return rows @ self._place, cols @ self._place

    def append(self, symbols: ArrayLike) -> None:
        """Add m symbols in O(span + m) amortized."""
        sym = as_symbols(symbols, self.alphabet_size)
        if sym.size == 0:
            return
        self._index = None
        held = self._n % self._span  # symbols already in the last, partial anchor
        take = 0
        if held:
            # Keep playing the game on the partial anchor: X += r * g**held, one digit at a time.
            take = min(self._span - held, sym.size)
            head = sym[:take].astype(np.uint64)
            place = self._place[held : held + take]
            last = self._n // self._span
            self._x[last] += np.sum(head // np.uint64(self._g) * place, dtype=np.uint64)
            self._y[last] += np.sum(head % np.uint64(self._g) * place, dtype=np.uint64)
        rest = sym[take:]
        if rest.size:
            x, y = self._encode_blocks(rest)
            start = self._anchors(self._n + take)  # take fills the tail anchor exactly
            self._reserve(start + x.size)
            self._x[start : start + x.size] = x
            self._y[start : start + y.size] = y
        self._n += sym.size

    def decode(self) -> np.ndarray:
        """The whole stream as int64, by digit extraction from every anchor.  # [n]"""
        count = self._anchors()
        g = np.uint64(self._g)
        x = self._x[:count, None]  # [anchors, 1]
        y = self._y[:count, None]
        rows = (x // self._place) % g  # [anchors, span]: digit j of X is the row of symbol j
        cols = (y // self._place) % g
        return (rows * g + cols).ravel()[: self._n].astype(np.int64)

    def symbol_at(self, i: int) -> int:
        """Symbol i: digit i % span of anchor i // span."""
        block, digit = divmod(check_index(i, self._n), self._span)
        place = self._place_int[digit]
        row = int(self._x[block]) // place % self._g
        col = int(self._y[block]) // place % self._g
        return row * self._g + col

    def anchor_point(self, j: int) -> tuple[Fraction, Fraction]:
        """Anchor j as the exact chaos-game point (x, y) in the unit square."""
        j = check_index(j, self._anchors())
        digits = min(self._span, self._n - j * self._span)
        denominator = self._place_int[digits]
        return Fraction(int(self._x[j]), denominator), Fraction(int(self._y[j]), denominator)

    def suffix_index(self) -> SuffixIndex:
        """The suffix-search index of the current stream (built on first use after a change)."""
        if self._index is None:
            self._index = SuffixIndex.build(self.decode(), self._config)
        return self._index

    def suffix_search(self, query: ArrayLike) -> SuffixMatches:
        """All positions i whose last len(query) symbols equal `query` (1 <= len <= span)."""
        return self.suffix_index().search(query)

    def to_bytes(self) -> bytes:
        count = self._anchors()
        coords = np.empty(2 * count, dtype=np.uint64)  # X0, Y0, X1, Y1, ...
        coords[0::2] = self._x[:count]
        coords[1::2] = self._y[:count]
        cfg = self._config
        header = ContainerHeader(self.MAGIC, cfg.alphabet_size, self._span, cfg.coord_bits, self._n)
        return pack_container(header, pack_uint(coords, cfg.coord_bits))

    @classmethod
    def from_bytes(cls, data: bytes) -> ChaosGameCodec:
        """Parse `to_bytes()` output; damage raises `CorruptionError`."""

        def payload_size(h: ContainerHeader) -> int:
            if not 1 <= h.param1 <= max_span(h.alphabet_size):
                limit = max_span(h.alphabet_size)
                raise CorruptionError(BYTES_PATH, 8, f"span in [1, {limit}]", h.param1)
            bits = ChaosGridConfig(h.alphabet_size, h.param1).coord_bits
            if h.param2 != bits:
                raise CorruptionError(BYTES_PATH, 10, bits, h.param2, "anchor coordinate bits")
            return (2 * -(-h.length // h.param1) * bits + 7) // 8

        header, payload = unpack_container(data, cls.MAGIC, payload_size)
        codec = cls(ChaosGridConfig(header.alphabet_size, header.param1))
        count = codec._anchors(header.length)
        bits = codec._config.coord_bits
        coords = unpack_uint(payload, bits, 2 * count)
        codec._reserve(count)
        codec._x[:count] = coords[0::2]
        codec._y[:count] = coords[1::2]
        codec._n = header.length
        codec._check_anchors(bits)
        return codec

    def _check_anchors(self, bits: int) -> None:
        """Refuse anchors this codec cannot have written (the CRC may be intact yet forged)."""
        count = self._anchors()
        if not count:
            return
        digits = np.full(count, self._span, dtype=np.int64)
        digits[-1] = self._n - (count - 1) * self._span  # the tail anchor holds k <= span digits
        limit = np.array(self._place_int, dtype=np.uint64)[digits]  # numerators < g**digits
        bad_x = np.flatnonzero((self._x[:count] >= limit) | (self._y[:count] >= limit))
        if bad_x.size:
            j = int(bad_x[0])
            offset = HEADER_SIZE + 2 * j * bits // 8
            got = (int(self._x[j]), int(self._y[j]))
            raise CorruptionError(BYTES_PATH, offset, f"numerators < {int(limit[j])}", got)
        symbols = self.decode()  # grid vertices at or past A exist (A <= g*g) but are not symbols
        bad = np.flatnonzero(symbols >= self.alphabet_size)
        if bad.size:
            j = int(bad[0]) // self._span
            offset = HEADER_SIZE + 2 * j * bits // 8
            raise CorruptionError(
                BYTES_PATH, offset, f"symbols < {self.alphabet_size}", int(symbols[bad[0]])
            )
