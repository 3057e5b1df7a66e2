"""Token-by-token reference for the archive tier: the slow, obvious version of mixed attention.

Tokens are read one at a time into an ordinary cache with the model's own attention. Before token
t is read, the token j = t - recent (if j >= sinks) leaves the exact window: its cache entries in
every layer are overwritten by their archived version (position-free key -> quantizer round trip
-> rotated back to seat j; value -> round trip). Nothing else in the cache ever changes.

Archived versions are computed from the exact K/V still in the cache, a block of whole quantizer
groups at a time: when token j is due and not yet computed, its group starts at g0 = j - j % group
and every token of [g0, e) is still exact in the cache (sinks, or tokens not archived yet: earlier
blocks ended on group boundaries), with e the end of the last whole group before t. A block only uses tokens already read; what it computes ahead of time is
installed in the cache at each token's own step, never earlier. (Blocks keep the reference fast:
one quantizer call per layer per block instead of per token.)

`bench.lib.mixed_attention.window_nll` must agree with `stepwise_nll` (|mean NLL delta| < 1e-4):
that is the check that the one-pass evaluation measures what an archive would really do.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from bench.lib.mixed_attention import ARCHIVE, EVICT, MixedSpec, archived_kv
from grm.kv import new_cache


def stepwise_nll(model: torch.nn.Module, ids: list[int], spec: MixedSpec) -> torch.Tensor:
    """NLL of ids[i+1] for i = 0..T-2, reading token by token at seats 0..T-1: [T-1] float64."""
    if spec.mode == EVICT:
        raise ValueError("the stepwise reference replaces archived tokens; eviction has no replacement")
    n = len(ids)
    window = spec.window
    group = spec.quantizer.group if spec.quantizer is not None else 1
    ready: dict[int, list[tuple[torch.Tensor, torch.Tensor]]] = {}  # block start -> per-layer archived K/V
    start_of: dict[int, int] = {}  # token -> start of the block that holds its archived version
    cache = new_cache()
    nll = []
    with torch.no_grad():
        for t, token in enumerate(ids):
            j = t - window.recent
            if spec.mode == ARCHIVE and j >= window.sinks:
                if j not in start_of:
                    g0 = j - j % group  # tokens [g0, j) are sinks or not yet archived: exact in the cache
                    end = g0 + (t - g0) // group * group  # whole groups, all already read (group <= recent)
                    pos = torch.arange(g0, end)
                    ready[g0] = [archived_kv(spec, i, layer.keys[0, :, g0:end], layer.values[0, :, g0:end], pos)
                                 for i, layer in enumerate(cache.layers)]
                    start_of.update(dict.fromkeys(range(j, end), g0))
                b = start_of.pop(j)
                for layer, (ka, va) in zip(cache.layers, ready[b]):
                    layer.keys[0, :, j] = ka[:, j - b]
                    layer.values[0, :, j] = va[:, j - b]
            out = model(input_ids=torch.tensor([[token]]), position_ids=torch.tensor([[t]]), cache=cache,
                        use_cache=True, logits_to_keep=1)
            if t + 1 < n:
                logits = out.logits[0, -1].to(torch.promote_types(out.logits.dtype, torch.float32))  # float64 stays
                nll.append(F.cross_entropy(logits[None], torch.tensor([ids[t + 1]])).double())
    return torch.stack(nll)
