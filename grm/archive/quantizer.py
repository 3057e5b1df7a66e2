"""What a K/V quantizer is to the archive's evaluation: a lossy round trip of position-free K/V.

Implemented by `RVQQuantizer` (grm/archive/rvq.py) and `KiviQuantizer` (bench/lib/baselines.py).

Lifecycle: the evaluator (bench/lib/mixed_attention.py, bench/lib/stepwise.py) calls
`roundtrip(layer, keys, values)` with the position-free keys and the values of a run of tokens
that starts at a multiple of `group` tokens from the window's first seat, and uses what comes back
in place of the archived tokens. A quantizer never sees positions.

Locality contract (what makes the one-pass evaluation equal to token-by-token archiving): the
archived value of token j depends only on the exact K/V of the tokens of its group,
[j - j % group, j - j % group + group). With group <= the exact window, a token's group is
complete before the token leaves the window, so quantizing a whole window at once gives the
same numbers as quantizing each group the moment its first token ages out.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import torch


@runtime_checkable
class KVQuantizer(Protocol):
    @property
    def name(self) -> str:
        """Short label for tables, e.g. "rvq K4/V2" or "int4 g32"."""
        ...

    @property
    def group(self) -> int:
        """Tokens that share quantization state (1 = every token on its own)."""
        ...

    def roundtrip(self, layer: int, keys: torch.Tensor, values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Quantize then dequantize one layer: keys, values [kv_heads, tokens, head_dim] -> same shapes/dtype."""
        ...

    def archive_bytes_per_token(self, n_layers: int, kv_heads: int, head_dim: int) -> float:
        """Stored bytes per token over all layers and heads (indices or codes plus per-group scales)."""
        ...
