"""Behaviour shared by both symbol codecs: lossless round trips, append, random access, bytes.

Expectations:
1. decode(encode(s)) == s for every alphabet size 2..1024 and every kind of stream (uniform,
   Zipf-skewed, repetitive, constant, extreme symbols); about 2 * 10^6 symbols in all.
2. Appending in chunks gives the same codec (decode and bytes) as one encode.
3. symbol_at(i) == decode()[i] at sampled positions, including the first and the last.
4. from_bytes(to_bytes()) round-trips; any damaged byte, truncation or forged field raises
   CorruptionError; a bad symbol, alphabet size or index raises UserInputError.
"""

from __future__ import annotations

import struct
import zlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grm.archive.bitpack import BitPackedCodec, pack_uint
from grm.archive.chaos import ChaosGameCodec
from grm.archive.codec import (
    ContainerHeader,
    SuffixSearchable,
    SymbolCodec,
    max_span,
    pack_container,
)
from grm.errors import CorruptionError, StoreError, UserInputError

ALPHABETS = (2, 3, 16, 255, 256, 257, 1000, 1024)
CODECS = (BitPackedCodec, ChaosGameCodec)
STREAM_LEN = 60_000


def make_stream(kind: str, alphabet: int, n: int, seed: int) -> np.ndarray:
    """A test stream of n symbols in [0, alphabet)."""
    rng = np.random.default_rng(seed)
    if kind == "uniform":
        return rng.integers(0, alphabet, n)
    if kind == "zipf":
        # Skewed, with labels shuffled so that frequent symbols include high values too.
        p = 1.0 / np.arange(1, alphabet + 1) ** 1.3
        return rng.permutation(alphabet)[rng.choice(alphabet, n, p=p / p.sum())]
    if kind == "repetitive":
        motif = rng.integers(0, alphabet, 37)
        stream = np.resize(motif, n)
        flips = rng.random(n) < 0.01
        stream[flips] = rng.integers(0, alphabet, int(flips.sum()))
        return stream
    if kind == "extremes":
        return np.where(rng.random(n) < 0.5, 0, alphabet - 1)
    raise ValueError(kind)


@pytest.mark.parametrize("codec_cls", CODECS)
@pytest.mark.parametrize("alphabet", ALPHABETS)
@pytest.mark.parametrize("kind", ["uniform", "zipf"])
def test_round_trip_is_exact_for_every_alphabet(codec_cls, alphabet: int, kind: str) -> None:
    stream = make_stream(kind, alphabet, STREAM_LEN, seed=alphabet)
    codec = codec_cls.encode(stream, alphabet)
    decoded = codec.decode()
    assert len(codec) == STREAM_LEN
    assert decoded.dtype == np.int64
    np.testing.assert_array_equal(decoded, stream)
    np.testing.assert_array_equal(codec_cls.from_bytes(codec.to_bytes()).decode(), stream)


@pytest.mark.parametrize("codec_cls", CODECS)
@pytest.mark.parametrize("alphabet", ALPHABETS)
@pytest.mark.parametrize("kind", ["repetitive", "extremes"])
def test_round_trip_is_exact_on_repetitive_streams(codec_cls, alphabet: int, kind: str) -> None:
    stream = make_stream(kind, alphabet, 5_003, seed=alphabet + 1)  # odd length: partial tail
    np.testing.assert_array_equal(codec_cls.encode(stream, alphabet).decode(), stream)


@pytest.mark.parametrize("codec_cls", CODECS)
def test_constant_and_tiny_streams_round_trip(codec_cls) -> None:
    for alphabet in ALPHABETS:
        for stream in ([], [0], [alphabet - 1], [alphabet - 1] * 1000, [0] * 999):
            codec = codec_cls.encode(np.array(stream, dtype=np.int64), alphabet)
            assert codec.decode().tolist() == list(stream)
            assert codec_cls.from_bytes(codec.to_bytes()).decode().tolist() == list(stream)


@settings(max_examples=150, deadline=None)
@given(data=st.data(), alphabet=st.integers(2, 1024))
def test_property_round_trip_both_codecs(data: st.DataObject, alphabet: int) -> None:
    stream = data.draw(st.lists(st.integers(0, alphabet - 1), max_size=300))
    span = data.draw(st.integers(0, max_span(alphabet)))
    for codec in (BitPackedCodec.encode(stream, alphabet),
                  ChaosGameCodec.encode(stream, alphabet, span=span)):
        assert codec.decode().tolist() == stream
        assert type(codec).from_bytes(codec.to_bytes()).decode().tolist() == stream


@settings(max_examples=100, deadline=None)
@given(data=st.data(), alphabet=st.sampled_from(ALPHABETS))
def test_property_chunked_append_equals_one_shot_encode(data: st.DataObject, alphabet: int) -> None:
    stream = data.draw(st.lists(st.integers(0, alphabet - 1), max_size=400))
    span = data.draw(st.integers(0, max_span(alphabet)))
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=8)))
    chunks = [stream[a:b] for a, b in zip([0, *cuts], [*cuts, len(stream)])]
    encoders = (
        lambda symbols: BitPackedCodec.encode(symbols, alphabet),
        lambda symbols: ChaosGameCodec.encode(symbols, alphabet, span=span),
    )
    for encode in encoders:
        grown = encode([])
        for chunk in chunks:
            grown.append(chunk)
        assert grown.decode().tolist() == stream
        assert grown.to_bytes() == encode(stream).to_bytes()


@pytest.mark.parametrize("codec_cls", CODECS)
@pytest.mark.parametrize("alphabet", ALPHABETS)
def test_chunked_append_of_a_long_stream_matches_encode(codec_cls, alphabet: int) -> None:
    stream = make_stream("zipf", alphabet, 20_000, seed=7)
    rng = np.random.default_rng(alphabet)
    grown = codec_cls.encode(stream[:0], alphabet)
    start = 0
    while start < stream.size:
        # Chunk sizes straddle every anchor boundary case: 0, 1, span - 1, span, span + 1, large.
        size = int(rng.choice([0, 1, 9, 10, 11, 12, 13, 14, 51, 52, 53, 997]))
        grown.append(stream[start : start + size])
        start += size
    np.testing.assert_array_equal(grown.decode(), stream)
    assert grown.to_bytes() == codec_cls.encode(stream, alphabet).to_bytes()


@pytest.mark.parametrize("codec_cls", CODECS)
@pytest.mark.parametrize("alphabet", ALPHABETS)
def test_symbol_at_agrees_with_decode(codec_cls, alphabet: int) -> None:
    stream = make_stream("uniform", alphabet, 30_001, seed=3)
    codec = codec_cls.encode(stream, alphabet)
    rng = np.random.default_rng(5)
    for i in [0, 1, stream.size - 1, *rng.integers(0, stream.size, 1500).tolist()]:
        assert codec.symbol_at(i) == stream[i]
    codec.append(stream[:7])  # random access keeps working across a partial tail anchor
    assert [codec.symbol_at(stream.size + j) for j in range(7)] == stream[:7].tolist()


def test_codecs_implement_the_protocols() -> None:
    bitpacked, chaos = BitPackedCodec.encode([1, 0], 2), ChaosGameCodec.encode([1, 0], 2)
    assert isinstance(bitpacked, SymbolCodec) and isinstance(chaos, SymbolCodec)
    assert isinstance(chaos, SuffixSearchable)
    assert not isinstance(bitpacked, SuffixSearchable)


@pytest.mark.parametrize("alphabet", [16, 256, 1024])
def test_chaos_anchors_cost_the_same_bits_as_packing_for_powers_of_four(alphabet: int) -> None:
    stream = make_stream("uniform", alphabet, 10_000, seed=1)
    chaos = ChaosGameCodec.encode(stream, alphabet)
    packed = BitPackedCodec.encode(stream, alphabet)
    assert chaos.payload_nbytes - packed.payload_nbytes <= 16  # at most the tail anchor's pad
    assert len(chaos.to_bytes()) == chaos.payload_nbytes + 28


def test_chaos_anchors_beat_packing_just_above_a_power_of_two() -> None:
    stream = make_stream("uniform", 257, 12_000, seed=2)
    chaos = ChaosGameCodec.encode(stream, 257)  # 17 x 17 grid: 8.33 bits vs 9 bits per symbol
    assert chaos.payload_nbytes < BitPackedCodec.encode(stream, 257).payload_nbytes


# --- damage and bad input -------------------------------------------------------------------


@pytest.mark.parametrize("codec_cls", CODECS)
@pytest.mark.parametrize("alphabet", [3, 256, 1000])
def test_every_damaged_byte_raises_corruption_error(codec_cls, alphabet: int) -> None:
    data = codec_cls.encode(make_stream("uniform", alphabet, 101, seed=4), alphabet).to_bytes()
    for offset in range(len(data)):
        damaged = bytearray(data)
        damaged[offset] ^= 0x10
        with pytest.raises(CorruptionError) as err:
            codec_cls.from_bytes(bytes(damaged))
        assert err.value.path == "<bytes>"
        assert 0 <= err.value.offset <= len(data)


@pytest.mark.parametrize("codec_cls", CODECS)
def test_truncated_or_extended_bytes_raise_corruption_error(codec_cls) -> None:
    data = codec_cls.encode(make_stream("uniform", 16, 200, seed=5), 16).to_bytes()
    for cut in range(len(data)):
        with pytest.raises(CorruptionError):
            codec_cls.from_bytes(data[:cut])
    with pytest.raises(CorruptionError):
        codec_cls.from_bytes(data + b"\x00")


def test_corruption_error_names_the_crc_mismatch() -> None:
    data = bytearray(BitPackedCodec.encode([1, 2, 3] * 10, 4).to_bytes())
    data[30] ^= 0xFF
    with pytest.raises(CorruptionError) as err:
        BitPackedCodec.from_bytes(bytes(data))
    assert err.value.expected != err.value.got
    assert err.value.offset == len(data) - 4  # the payload CRC32 sits in the trailer


def test_one_codec_refuses_the_others_bytes() -> None:
    with pytest.raises(CorruptionError):
        ChaosGameCodec.from_bytes(BitPackedCodec.encode([1, 0], 2).to_bytes())
    with pytest.raises(CorruptionError):
        BitPackedCodec.from_bytes(ChaosGameCodec.encode([1, 0], 2).to_bytes())


def test_forged_payloads_with_valid_crcs_are_refused() -> None:
    # A = 3 packs at 2 bits, so the value 3 fits the width but is not a symbol.
    forged = pack_container(ContainerHeader(b"GRMB", 3, 2, 0, 4), bytes([0b11000000]))
    with pytest.raises(CorruptionError):
        BitPackedCodec.from_bytes(forged)
    # A = 3 sits on a 2 x 2 grid whose vertex (1, 1) = symbol 3 is not a symbol.
    good = ChaosGameCodec.encode([2, 1, 0], 3)
    header = ContainerHeader(b"GRMG", 3, good.span, good.config.coord_bits, 1)
    with pytest.raises(CorruptionError):  # one symbol whose point is the idle vertex (1, 1)
        ChaosGameCodec.from_bytes(pack_container(header, pack_uint([1, 1], header.param2)))
    with pytest.raises(CorruptionError):  # a 1-digit tail anchor with a 2-digit numerator
        ChaosGameCodec.from_bytes(pack_container(header, pack_uint([2, 0], header.param2)))
    with pytest.raises(CorruptionError):  # a span the alphabet cannot have
        bad = ContainerHeader(b"GRMG", 3, 53, header.param2, 1)
        ChaosGameCodec.from_bytes(pack_container(bad, pack_uint([0, 0], header.param2)))


def test_unknown_version_with_valid_crc_is_a_store_error() -> None:
    data = bytearray(BitPackedCodec.encode([1], 2).to_bytes())
    data[4:6] = struct.pack("<H", 2)
    data[20:24] = struct.pack("<I", zlib.crc32(bytes(data[:20])))
    with pytest.raises(StoreError) as err:
        BitPackedCodec.from_bytes(bytes(data))
    assert not isinstance(err.value, CorruptionError)


@pytest.mark.parametrize("codec_cls", CODECS)
@pytest.mark.parametrize(
    "alphabet, stream",
    [
        (4, [0, 4]),  # symbol == A
        (4, [1, -1]),  # negative
        (1024, [1024]),
        (16, [1.0, 2.0]),  # floats are not symbols
        (16, [[1, 2], [3, 4]]),  # not 1-D
        (16, [True, False]),
    ],
)
def test_bad_symbols_raise_user_input_error(codec_cls, alphabet: int, stream: list) -> None:
    with pytest.raises(UserInputError):
        codec_cls.encode(stream, alphabet)
    codec = codec_cls.encode([0, 1], alphabet)
    with pytest.raises(UserInputError):
        codec.append(stream)
    assert codec.decode().tolist() == [0, 1]  # a refused append changes nothing


@pytest.mark.parametrize("codec_cls", CODECS)
@pytest.mark.parametrize("alphabet", [1, 0, -5, 1025, 4096, True, 2.0])
def test_bad_alphabet_sizes_raise_user_input_error(codec_cls, alphabet) -> None:
    with pytest.raises(UserInputError):
        codec_cls.encode([0], alphabet)


@pytest.mark.parametrize("codec_cls", CODECS)
def test_out_of_range_symbol_at_raises_user_input_error(codec_cls) -> None:
    codec = codec_cls.encode([3, 1, 2], 4)
    for i in (-1, 3, 100):
        with pytest.raises(UserInputError):
            codec.symbol_at(i)


def test_span_beyond_exact_precision_raises_user_input_error() -> None:
    assert max_span(256) == 13  # 16**13 == 2**52
    with pytest.raises(UserInputError):
        ChaosGameCodec.encode([0], 256, span=14)
    with pytest.raises(UserInputError):
        ChaosGameCodec.encode([0], 256, span=-1)
