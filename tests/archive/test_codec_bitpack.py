"""Bit packing primitives: every width 1..64 round-trips and uses exactly ceil(n * w / 8) bytes."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grm.archive.bitpack import pack_uint, symbol_bits, unpack_uint


@pytest.mark.parametrize("width", range(1, 65))
def test_every_width_round_trips_including_the_maximum_value(width: int) -> None:
    rng = np.random.default_rng(width)
    top = np.uint64(2**width - 1)
    values = rng.integers(0, 2**63, 777, dtype=np.uint64) & top
    values[:3] = [0, top, top >> np.uint64(1)]
    packed = pack_uint(values, width)
    assert len(packed) == (values.size * width + 7) // 8
    np.testing.assert_array_equal(unpack_uint(packed, width, values.size), values)


def test_bit_order_is_lsb_first_across_bytes() -> None:
    # Three 3-bit values 0b101, 0b011, 0b110 -> stream bits 101 110 011 (LSB first per value).
    assert pack_uint([0b101, 0b011, 0b110], 3) == bytes([0b10011101, 0b1])


@settings(max_examples=200, deadline=None)
@given(width=st.integers(1, 64), data=st.data())
def test_property_pack_unpack(width: int, data: st.DataObject) -> None:
    values = data.draw(st.lists(st.integers(0, 2**width - 1), max_size=50))
    out = unpack_uint(pack_uint(np.array(values, dtype=np.uint64), width), width, len(values))
    assert out.tolist() == values


@pytest.mark.parametrize("alphabet, bits", [(2, 1), (3, 2), (4, 2), (5, 3), (255, 8), (256, 8),
                                            (257, 9), (1000, 10), (1024, 10)])
def test_symbol_bits_is_ceil_log2(alphabet: int, bits: int) -> None:
    assert symbol_bits(alphabet) == bits
