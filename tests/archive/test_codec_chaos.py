"""The chaos-game codec's own promises: its points are the game's, and suffix search is exact.

Expectations:
1. Every anchor equals the exact chaos-game point p <- (p + v(s)) / g played from the origin over
   its block (Fraction arithmetic, no floats), and every suffix-index point equals the game
   played over the last min(span, i + 1) symbols.
2. suffix_search has precision and recall 1.0 against a brute-force scan for s = 1..8, on
   streams of several sizes and alphabets, including queries that occur nowhere and matches
   near the start of the stream (where the truncated points have missing history).
3. Contexts decoded from the matched points alone equal the stream's last min(span, i + 1)
   symbols, with -1 before the stream start.
4. Appends invalidate the index; bad queries raise UserInputError.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grm.archive.chaos import ChaosGameCodec
from grm.archive.chaos_index import SuffixIndex, key_words
from grm.archive.codec import ChaosGridConfig, max_span
from grm.errors import UserInputError


def play(symbols: list[int], g: int) -> tuple[Fraction, Fraction]:
    """The chaos game from the origin, exactly: p <- (p + v(s)) / g with v(s) = (s // g, s % g)."""
    x = y = Fraction(0)
    for s in symbols:
        x, y = (x + s // g) / g, (y + s % g) / g
    return x, y


def brute_force(stream: np.ndarray, query: np.ndarray) -> np.ndarray:
    """Positions i with stream[i - s + 1 : i + 1] == query, by scanning every window."""
    s = query.size
    if s > stream.size:
        return np.zeros(0, dtype=np.int64)
    windows = np.lib.stride_tricks.sliding_window_view(stream, s)
    return np.flatnonzero((windows == query).all(axis=1)) + s - 1


def check_matches(codec: ChaosGameCodec, stream: np.ndarray, query: np.ndarray) -> int:
    """Assert precision = recall = 1 and exact contexts for one query; return the match count."""
    matches = codec.suffix_search(query)
    truth = brute_force(stream, query)
    np.testing.assert_array_equal(matches.positions, truth)
    contexts = matches.contexts()
    span = codec.span
    assert contexts.shape == (truth.size, span)
    for row, i in zip(contexts[:: max(1, truth.size // 50)], truth[:: max(1, truth.size // 50)]):
        start = max(0, i - span + 1)
        expected = [-1] * (span - (i + 1 - start)) + stream[start : i + 1].tolist()
        assert row.tolist() == expected
    return truth.size


@pytest.mark.parametrize("alphabet", [2, 3, 16, 257, 1024])
def test_anchors_are_exact_chaos_game_points(alphabet: int) -> None:
    rng = np.random.default_rng(alphabet)
    stream = rng.integers(0, alphabet, 3 * max_span(alphabet) + 5).tolist()
    codec = ChaosGameCodec.encode(stream, alphabet)
    g, span = codec.config.grid_side, codec.span
    for j in range(-(-len(stream) // span)):
        assert codec.anchor_point(j) == play(stream[j * span : (j + 1) * span], g)


@pytest.mark.parametrize("alphabet", [2, 5, 256, 1000])
def test_index_points_are_truncated_chaos_game_points(alphabet: int) -> None:
    stream = np.random.default_rng(1).integers(0, alphabet, 40).tolist()
    config = ChaosGridConfig(alphabet)
    index = SuffixIndex.build(stream, config)
    g, span = config.grid_side, config.anchor_span
    xs, ys = index.points()
    for x, y, i in zip(xs.tolist(), ys.tolist(), index.positions.tolist()):
        expected = play(stream[max(0, i - span + 1) : i + 1], g)
        assert (Fraction(x, g**span), Fraction(y, g**span)) == expected


@pytest.mark.parametrize(
    "alphabet, n, seed",
    [(2, 200_000, 0), (3, 50_000, 1), (16, 100_000, 2), (256, 200_000, 3), (257, 20_000, 4),
     (1000, 50_000, 5), (1024, 100_000, 6)],
)
def test_suffix_search_is_exact_against_brute_force(alphabet: int, n: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    # Leave symbol A - 1 out of the stream so that some queries surely occur nowhere.
    stream = rng.integers(0, alphabet - 1, n) if alphabet > 2 else rng.integers(0, 2, n)
    codec = ChaosGameCodec.encode(stream, alphabet)
    zero_hits = found = 0
    for s in range(1, 9):
        queries = [stream[i - s + 1 : i + 1] for i in rng.integers(s - 1, n, 4)]  # occur >= once
        queries.append(rng.integers(0, alphabet, s))  # usually absent for large s
        if alphabet > 2:
            absent = rng.integers(0, alphabet - 1, s)
            absent[rng.integers(0, s)] = alphabet - 1
            queries.append(absent)
        for query in queries:
            count = check_matches(codec, stream, np.asarray(query))
            zero_hits += count == 0
            found += count
    assert found > 0
    assert zero_hits > 0 or alphabet == 2


def test_matches_near_the_stream_start_respect_missing_history() -> None:
    # All zeros: a truncated point's missing digits also read as symbol 0.
    stream = np.zeros(30, dtype=np.int64)
    codec = ChaosGameCodec.encode(stream, 4, span=6)
    for s in range(1, 7):
        matches = codec.suffix_search([0] * s)
        assert matches.positions.tolist() == list(range(s - 1, 30))
        assert matches.contexts()[0].tolist() == [-1] * (6 - s) + [0] * s


@settings(max_examples=200, deadline=None)
@given(data=st.data(), alphabet=st.integers(2, 6))
def test_property_suffix_search_matches_brute_force(data: st.DataObject, alphabet: int) -> None:
    symbol = st.integers(0, alphabet - 1)
    stream = np.array(data.draw(st.lists(symbol, max_size=200)), dtype=np.int64)
    span = data.draw(st.integers(1, 8))
    query = np.array(data.draw(st.lists(symbol, min_size=1, max_size=span)), dtype=np.int64)
    codec = ChaosGameCodec.encode(stream, alphabet, span=span)
    check_matches(codec, stream, query)


def test_append_invalidates_the_suffix_index() -> None:
    codec = ChaosGameCodec.encode([1, 2, 3], 4)
    assert codec.suffix_search([2, 3]).positions.tolist() == [2]
    codec.append([2, 3])
    assert codec.suffix_search([2, 3]).positions.tolist() == [2, 4]


def test_index_words_and_bytes_are_as_documented() -> None:
    for alphabet in (2, 3, 16, 255, 256, 257, 1000, 1024):
        assert key_words(ChaosGridConfig(alphabet)) == 2
    index = ChaosGameCodec.encode(np.arange(1000) % 256, 256).suffix_index()
    assert len(index) == 1000
    assert index.nbytes == 1000 * (2 * 8 + 4)


@pytest.mark.parametrize("query", [[], [1] * 14, [256], [-1], [0.5], [[1, 2]]])
def test_bad_queries_raise_user_input_error(query: list) -> None:
    codec = ChaosGameCodec.encode(np.arange(100) % 256, 256)  # span 13
    with pytest.raises(UserInputError):
        codec.suffix_search(query)


def test_query_as_long_as_the_span_is_allowed() -> None:
    stream = np.arange(40) % 7
    codec = ChaosGameCodec.encode(stream, 8, span=5)
    assert codec.suffix_search(stream[:5]).positions.tolist() == [4, 11, 18, 25, 32, 39]
    with pytest.raises(UserInputError):
        codec.suffix_search(stream[:6])
