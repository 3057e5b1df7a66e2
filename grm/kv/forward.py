"""Reading tokens into a cache: the one place GRM calls the model's forward pass.

Chunked prefill bounds the transient attention memory on long inputs; the chunking is a fixed
function of the input length (`calls`), so the same tokens after the same cache always take the
same arithmetic path (the exactness invariant depends on it: a forward call cut in two gives K/V
that differ in the last bits). A reader that pauses between two forward calls (the server's
batch, grm/runtime/answer.py `read_prompt`) makes the same calls, one `prefill_call` each.

`watch(model)` counts what the model reads (`Reads`: tokens and forward calls) with a forward
pre-hook, so every caller is counted, here or elsewhere (a blend's re-read, the self-test): the
runtime owns one `Reads` per loaded model and the server reports it per request. A decode loop
reads its tokens `paused()` and counts its own steps (a batched step serves several requests).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch
from transformers import DynamicCache

from grm.kv.cache import cache_from_kv, kv_from_cache
from grm.kv.payload import KV

PREFILL_CHUNK = 512  # tokens per forward call during prefill


@dataclass
class Reads:
    """Tokens the model read and forward calls it made, while not `paused` (one worker thread)."""

    tokens: int = 0  # input positions read, over every batch row
    calls: int = 0  # forward calls
    paused_depth: int = 0  # > 0: a decode loop is reading (it counts its own steps)

    def hook(self, module: torch.nn.Module, args: tuple, kwargs: dict) -> None:
        """A forward pre-hook (`register_forward_pre_hook(..., with_kwargs=True)`): count one call."""
        if self.paused_depth:
            return
        ids = kwargs.get("input_ids", args[0] if args else None)
        if ids is None:
            embeds = kwargs.get("inputs_embeds")
            n = embeds.shape[:-1].numel() if embeds is not None else 0
        else:
            n = ids.numel()
        self.tokens += int(n)
        self.calls += 1

    @contextmanager
    def paused(self) -> Iterator[None]:
        self.paused_depth += 1
        try:
            yield
        finally:
            self.paused_depth -= 1

    def snapshot(self) -> tuple[int, int]:
        """(tokens, calls) so far: what a request read is the difference of two snapshots."""
        return self.tokens, self.calls


def watch(model: torch.nn.Module) -> Reads:
    """A `Reads` counting every forward call of `model` from now on."""
    reads = Reads()
    model.register_forward_pre_hook(reads.hook, with_kwargs=True)
    return reads


def calls(n: int) -> list[tuple[int, int]]:
    """The spans [a, b) that `prefill` reads `n` tokens in, one forward call each (at most
    PREFILL_CHUNK tokens): a fixed function of `n`."""
    if n < 1:
        raise ValueError("prefill needs at least one token")
    return [(a, min(a + PREFILL_CHUNK, n)) for a in range(0, n, PREFILL_CHUNK)]


def prefill(model: torch.nn.Module, cache: DynamicCache, ids: list[int], start: int) -> torch.Tensor:
    """Read `ids` at seats start.. into `cache`; return the last position's logits [vocab] (fp32)."""
    logits = None
    for a, b in calls(len(ids)):
        logits = prefill_call(model, cache, ids[a:b], start + a)
    return logits


def prefill_call(model: torch.nn.Module, cache: DynamicCache, ids: list[int], start: int) -> torch.Tensor:
    """One forward call of a prefill (`ids`: one span of `calls`): `ids` read at seats start..
    into `cache`; the last position's logits [vocab] (fp32)."""
    input_ids = torch.tensor([ids], device=model.device)
    positions = torch.arange(start, start + len(ids), device=model.device)[None]
    out = model(input_ids=input_ids, position_ids=positions, cache=cache, use_cache=True, logits_to_keep=1)
    return out.logits[0, -1].float()


def read_after_sinks(model: torch.nn.Module, sinks: KV, ids: list[int]) -> KV:
    """`ids` read alone right after the sinks (nothing else before them): their K/V, seated at
    sinks.tokens.. . How every span is read that is stored to be mounted anywhere (a section, a
    graft) or routed to by its keys (a query's dense key)."""
    cache = cache_from_kv(sinks)
    prefill(model, cache, ids, sinks.tokens)
    return kv_from_cache(cache, sinks.tokens)


def step(model: torch.nn.Module, cache: DynamicCache, token: int, seat: int) -> torch.Tensor:
    """Read one token at `seat`; return its logits [vocab]."""
    out = model(
        input_ids=torch.tensor([[token]], device=model.device), position_ids=torch.tensor([[seat]], device=model.device),
        cache=cache,
        use_cache=True, logits_to_keep=1,
    )
    return out.logits[0, -1].float()
