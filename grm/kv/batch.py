"""Several sequences read one token each per forward call: their caches side by side, left-padded.

Each row of a `PaddedBatch` is one sequence's cache (every layer `[kv_heads, tokens, head_dim]`),
right-aligned in one `DeviceCache` of layers `[rows, kv_heads, length, head_dim]`: row r holds
`pads[r]` columns of zeros, then its own K/V. A step reads one token per row at that row's own
seat (position ids per row: its keys keep the rotation of their seats, padding moves nothing) with
an attention mask that hides the padding, so each row attends to exactly its own tokens. A row
joins (`add`: its cache copied in, the others padded further if it is longer) or leaves (`keep`:
the rest copied out, padding every row shares dropped) between steps; each is one copy of the
batch's K/V. Pads are zeros, never uninitialized memory (a masked weight of 0 times NaN is NaN).

Only for models whose every layer attends to the whole context: a sliding window counts columns,
and padding columns would shift it (grm/runtime/batch.py `batchable`).

Numerics: a padded row attends over masked columns too, and the matrix products run over several
rows at once, so a row's logits are those of the same sequence read alone up to rounding (not
bit-identical: ~3e-5 on SmolLM2's logits in fp32); the greedy text is the same wherever no two
tokens are that close (tests/runtime/test_batch.py). A batch with no padding (one row) takes the
lone step's path, no mask: its logits are bit-identical to `step`'s.
"""

from __future__ import annotations

import torch
from transformers import DynamicCache

from grm.kv.device import DeviceCache, room


class PaddedBatch:
    def __init__(self) -> None:
        self.cache: DeviceCache | None = None  # layers [rows, kv_heads, length, head_dim]
        self.pads: list[int] = []  # per row: padding columns before its first token

    @property
    def rows(self) -> int:
        return len(self.pads)

    @property
    def length(self) -> int:
        return 0 if self.cache is None else self.cache.get_seq_length()

    def add(self, row: DynamicCache) -> None:
        """Append `row` (a cache of one batch row) as the last row of the batch."""
        if isinstance(row, DeviceCache):
            row.sync()
        n, old = row.get_seq_length(), self.length
        length = max(old, n)
        layers = []
        for i, layer in enumerate(row.layers):
            k_new, v_new = layer.keys[:, :, :n], layer.values[:, :, :n]  # [1, kv_heads, n, head_dim]
            k_old = v_old = None
            if self.cache is not None:
                k_old, v_old = self.cache.layers[i].keys, self.cache.layers[i].values  # [rows, kv_heads, old, head_dim]
            keys, values = _buffers(self.rows + 1, k_new, v_new, length)
            if k_old is not None:
                keys[:-1, :, length - old:length].copy_(k_old)
                values[:-1, :, length - old:length].copy_(v_old)
            keys[-1:, :, length - n:length].copy_(k_new)
            values[-1:, :, length - n:length].copy_(v_new)
            layers.append((keys, values))
        self.pads = [p + length - old for p in self.pads] + [length - n]
        self._install(layers, length)

    def keep(self, rows: list[int]) -> None:
        """Keep only `rows` (indexes, in this order); the padding every kept row has is dropped."""
        if not rows:
            self.cache, self.pads = None, []
            return
        pads = [self.pads[r] for r in rows]
        trim, length = min(pads), self.length
        index = torch.tensor(rows, device=self.cache.layers[0].keys.device)
        layers = []
        for layer in self.cache.layers:
            k, v = layer.keys.index_select(0, index)[:, :, trim:], layer.values.index_select(0, index)[:, :, trim:]
            keys, values = _buffers(len(rows), k, v, length - trim)
            keys[:, :, :length - trim].copy_(k)
            values[:, :, :length - trim].copy_(v)
            layers.append((keys, values))
        self.pads = [p - trim for p in pads]
        self._install(layers, length - trim)

    def step(self, model: torch.nn.Module, tokens: list[int], seats: list[int]) -> torch.Tensor:
        """Read `tokens[r]` at seat `seats[r]` in row r; the logits of each [rows, vocab] (fp32)."""
        device = model.device
        mask = None  # no row padded (one row, or rows of one length): the lone step's path
        if any(self.pads):
            pads = torch.tensor(self.pads, device=device)
            mask = (torch.arange(self.length + 1, device=device)[None] >= pads[:, None]).long()  # [rows, length + 1]
        out = model(input_ids=torch.tensor(tokens, device=device)[:, None],
                    position_ids=torch.tensor(seats, device=device)[:, None], attention_mask=mask,
                    cache=self.cache, use_cache=True, logits_to_keep=1)
        return out.logits[:, -1].float()

    def _install(self, layers: list[tuple[torch.Tensor, torch.Tensor]], length: int) -> None:
        """A fresh cache over the buffers: each layer's K/V are views of their first `length`
        columns, the rest room the next steps write into in place (grm/kv/device.py ArenaLayer)."""
        cache = DeviceCache()
        for i, (keys, values) in enumerate(layers):
            cache.update(keys[:, :, :0], values[:, :, :0], i)  # creates layer i, empty
            cache.layers[i].hold(keys, values, length)
        self.cache = cache


def _buffers(rows: int, keys: torch.Tensor, values: torch.Tensor,
             length: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Zeroed buffers [rows, kv_heads, length + room, head_dim] like `keys`/`values`."""
    cap = length + room(length)
    k = torch.zeros((rows, keys.shape[1], cap, keys.shape[3]), dtype=keys.dtype, device=keys.device)
    v = torch.zeros((rows, values.shape[1], cap, values.shape[3]), dtype=values.dtype, device=values.device)
    return k, v
