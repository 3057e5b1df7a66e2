"""Archive tier: symbol codecs for quantized K/V index streams (bit-packed baseline and the
exact-grid chaos-game codec with O(1) access, append and suffix search)."""

from grm.archive.bitpack import BitPackedCodec, pack_uint, symbol_bits, unpack_uint
from grm.archive.chaos import ChaosGameCodec
from grm.archive.chaos_index import SuffixIndex, SuffixMatches
from grm.archive.codec import ChaosGridConfig, SuffixSearchable, SymbolCodec, grid_side, max_span

__all__ = [
    "BitPackedCodec", "ChaosGameCodec", "ChaosGridConfig", "SuffixIndex", "SuffixMatches", "SuffixSearchable",
    "SymbolCodec", "grid_side", "max_span", "pack_uint", "symbol_bits", "unpack_uint",
]
