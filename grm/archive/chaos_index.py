"""Suffix search as a range query on chaos-game points kept in Morton (Z) order.

Points. For every position i the index holds the chaos-game point (grm/archive/chaos.py) after
symbol i, truncated to the last L = span symbols:

    (x_i, y_i) = sum_{k=1..L} v(sym[i-k+1]) g^-k,     v(s) = (s // g, s % g),

with digits before the start of the stream taken as 0. Digit k of both coordinates is the
symbol k-1 steps back, so a query q of s symbols (q[-1] aligned with sym[i]) fixes the top s
digits of x and of y: it is the g^-s x g^-s sub-square of the unit square that the game enters
after playing q. Suffix search is the question "which stored points lie in that square?".

Why Morton order makes the square one range. Interleave the digits of x and y: digit pair k is
(r_k, c_k), and read in base G = g^2 it is r_k g + c_k, the symbol itself. So the point's Morton
key is the base-G number whose digits, most significant first, are sym[i], sym[i-1], ...,
sym[i-L+1]. Sorted by Morton key the points follow the quadtree order of the g-ary subdivision,
in which every level-s square is one contiguous run: the keys whose top s digits equal the
query. The key is the point itself, stored in an order-preserving layout (`points()` undoes it).

Key words. A key has 2 L log2(g) <= 104 bits, so it is split into W words of D base-G digits
(D = the most digits with G^D <= 2^64, W = ceil(L / D); W = 2 for every A in 2..1024) and the
points are sorted by (word 0, word 1, ...). A query is then a nested range: an equal-range
binary search in each word the query fixes completely, then one [low, high] binary search in
the word it fixes in part. Every search runs on a view of the previous range: O(W log n).

Short history. A position i < s - 1 has fewer than s real symbols behind it; its missing digits
read as 0, which is also symbol 0, so the range can hold it and it is dropped by position.

Contexts are decoded from the matched keys alone (digit extraction), never from the stream.
Memory: W uint64 words and a uint32 position (uint64 past 2^32 symbols) per symbol, 20 bytes
for W = 2. The index is not serialized: it is rebuilt from the decoded stream in O(n log n).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from grm.archive.codec import ChaosGridConfig, as_symbols
from grm.errors import UserInputError


def digits_per_word(config: ChaosGridConfig) -> int:
    """D: the most base-G digits (G = g^2) one uint64 holds, i.e. G^D <= 2^64."""
    base = config.grid_side**2
    d = 0
    while base ** (d + 1) <= 2**64:
        d += 1
    return d


def key_words(config: ChaosGridConfig) -> int:
    """W: uint64 words per Morton key."""
    return -(-config.anchor_span // digits_per_word(config))


def key_digits(keys: np.ndarray, config: ChaosGridConfig) -> np.ndarray:
    """Morton keys [W, m] -> their digits [m, L], column k-1 = digit k = symbol k-1 steps back."""
    base, d, span = config.grid_side**2, digits_per_word(config), config.anchor_span
    out = np.empty((keys.shape[1], span), dtype=np.uint64)
    for k in range(span):
        word, j = divmod(k, d)
        out[:, k] = keys[word] // np.uint64(base ** (d - 1 - j)) % np.uint64(base)
    return out


@dataclass(frozen=True, eq=False)
class SuffixMatches:
    """The result of one suffix search: matched positions and their points' Morton keys."""

    query_length: int  # s, the number of query symbols
    positions: np.ndarray  # [m] int64, ascending: the position i matching query[-1]
    keys: np.ndarray  # [W, m] uint64 Morton keys of the matched points, same order
    config: ChaosGridConfig  # the grid the keys live on

    def __len__(self) -> int:
        return int(self.positions.size)

    def contexts(self) -> np.ndarray:
        """Each match's last L = span symbols, decoded from its point alone.  # [m, L] int16

        Column c holds symbol i - L + 1 + c (stream order; the last column is sym[i]); columns
        before the start of the stream hold -1, so row i has min(L, i + 1) real symbols. int16
        because A <= 1024 and a common query can match half of a long stream.
        """
        span = self.config.anchor_span
        ctx = key_digits(self.keys, self.config)[:, ::-1].astype(np.int16)
        # Column c is before the stream start when i - span + 1 + c < 0.
        missing = np.arange(span)[None, :] < (span - 1 - self.positions)[:, None]
        ctx[missing] = -1
        return ctx


class SuffixIndex:
    """One chaos-game point per symbol, sorted by Morton key (see the module docstring)."""

    def __init__(self, keys: np.ndarray, positions: np.ndarray, config: ChaosGridConfig) -> None:
        self._keys = keys  # [W, n] uint64, lexicographically sorted by (word 0, word 1, ...)
        self._positions = positions  # [n] stream position of each point, same order
        self._config = config
        # Derived constants, cached because search() is the hot path.
        self._span = config.anchor_span  # L, digits per key
        self._base = config.grid_side**2  # G, the Morton digit base
        self._digits = digits_per_word(config)  # D, digits per key word

    @classmethod
    def build(cls, symbols: ArrayLike, config: ChaosGridConfig) -> SuffixIndex:
        """Index every position of `symbols` in O(n log n) (vectorized over positions)."""
        sym = as_symbols(symbols, config.alphabet_size).astype(np.uint64)
        n, span = sym.size, config.anchor_span
        base, d = config.grid_side**2, digits_per_word(config)
        padded = np.concatenate((np.zeros(span - 1, dtype=np.uint64), sym))
        keys = np.zeros((key_words(config), n), dtype=np.uint64)
        scratch = np.empty(n, dtype=np.uint64)
        for k in range(1, span + 1):
            # Digit k (1 = most significant) of point i is sym[i - k + 1] = padded[i + span - k].
            word, j = divmod(k - 1, d)
            place = np.uint64(base ** (d - 1 - j))
            np.multiply(padded[span - k : span - k + n], place, out=scratch)
            keys[word] += scratch  # digits occupy disjoint places: no carries, no overflow
        order = np.lexsort(keys[::-1])  # lexsort's last key is the primary one
        dtype = np.uint32 if n < 2**32 else np.uint64
        return cls(np.ascontiguousarray(keys[:, order]), order.astype(dtype), config)

    @property
    def config(self) -> ChaosGridConfig:
        return self._config

    @property
    def nbytes(self) -> int:
        """Bytes the index holds in memory (keys plus positions)."""
        return int(self._keys.nbytes + self._positions.nbytes)

    def __len__(self) -> int:
        return int(self._positions.size)

    @property
    def positions(self) -> np.ndarray:
        """Stream position of each stored point, in index (Morton) order.  # [n], read-only"""
        view = self._positions.view()
        view.flags.writeable = False
        return view

    def points(self) -> tuple[np.ndarray, np.ndarray]:
        """The stored points as exact numerators (X, Y) over g**span, in index order.  # [n] each"""
        g = self._config.grid_side
        digits = key_digits(self._keys, self._config)  # [n, L]
        # Digit k+1 has place value g**(L-k-1) over the denominator g**L.
        place = np.array([g ** (self._span - 1 - k) for k in range(self._span)], dtype=np.uint64)
        return (digits // np.uint64(g)) @ place, (digits % np.uint64(g)) @ place

    def search(self, query: ArrayLike) -> SuffixMatches:
        """All positions i with symbols[i-s+1 : i+1] == query, s = len(query) in [1, span]."""
        q = as_symbols(query, self._config.alphabet_size, what="query")
        s, span, base, d = q.size, self._span, self._base, self._digits
        if not 1 <= s <= span:
            raise UserInputError(f"query length must be in [1, {span}], got {s}")
        digits = [int(v) for v in q[::-1]]  # digit k+1 = query[-1-k]: most recent first
        lo, hi = 0, len(self)
        for word in range(-(-s // d)):
            fixed = digits[word * d : (word + 1) * d]  # the digits of this word the query sets
            free = base ** (d - len(fixed))  # key values sharing that prefix
            low = sum(v * base ** (d - 1 - j) for j, v in enumerate(fixed))
            column = self._keys[word, lo:hi]  # sorted: earlier words are equal inside [lo, hi)
            a = int(np.searchsorted(column, np.uint64(low), side="left"))
            b = int(np.searchsorted(column, np.uint64(low + free - 1), side="right"))
            lo, hi = lo + a, lo + b
        positions = self._positions[lo:hi]
        keep = np.flatnonzero(positions >= s - 1)  # drop points with too short a history
        keep = keep[np.argsort(positions[keep])]  # positions are distinct: no need for stability
        matched = positions[keep].astype(np.int64)
        return SuffixMatches(s, matched, self._keys[:, lo:hi][:, keep], self._config)
