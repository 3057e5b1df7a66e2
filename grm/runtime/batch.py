"""Answers generated together: the server's batch (continuous batching of greedy decoding).

Lifecycle (who calls what, when; all on the server's one model worker):
1. `Runtime.batch()` gives a `Batch` (None for a model it cannot batch: `batchable`).
2. Each request is planned, loaded and read ALONE, exactly as `ask` reads it
   (`Runtime.answering` up to its Decoding: the memory path and exactness are unchanged), and its
   `Decoding` `join`s the batch between steps; its first token is chosen then (a request that
   ends there never joins). Asked with `pauses`, the generator yields a `Pause` before each
   forward call of its prompt read (chunked prefill): the caller may `step()` the batch before
   resuming it, so a long prompt joining does not stall the rows already decoding; the calls,
   and so the K/V and the first token, are those of the read without pauses.
3. `step()` reads the latest token of every live sequence in one forward call (grm/kv/batch.py:
   caches left-padded, a mask, a seat per row) and returns the keys of the sequences that ended
   (end of turn, a stop string, max tokens, a cancel: `Sequence.push`'s rules, the same as
   `greedy`'s); they leave the batch, the others go on, new ones may join before the next step.
4. The caller resumes each ended request's `answering` generator, which returns its Answer.
A step that fails fails the requests in it (`clear()` hands back their keys).

`alone(steps, ...)` is the same protocol for one request, one forward call a token (`ask`, and a
server started with `--batch 1`); it reads through pauses.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any, TypeVar

import torch

from grm.dialects import Dialect
from grm.kv import new_cache
from grm.kv.batch import PaddedBatch
from grm.kv.forward import Reads
from grm.runtime.answer import Pause
from grm.runtime.execute import Decoding

T = TypeVar("T")


def batchable(dialect: Dialect, model: torch.nn.Module) -> bool:
    """Whether sequences of this model can be read side by side with each answer the answer it
    gets alone: every layer attends to the whole context (a sliding window counts columns,
    padding would move it), and the model does not compute in bf16/fp16 on a CPU. A CPU's matmul
    rounds a row differently beside other rows in fp32 and bf16 alike
    (bench/results/batch-rows-probe-session27.md); in fp32 that did not change a greedy token on
    tests/runtime/test_batch.py's prompts, in bf16 (SmolLM2) it did."""
    reduced = model.dtype in (torch.bfloat16, torch.float16) and model.device.type == "cpu"
    return not reduced and all(window is None for window in dialect.sliding_window)


def alone(steps: Generator[Decoding | Pause, None, T], model: torch.nn.Module, reads: Reads) -> T:
    """Drive an `answering` generator to its end, its answer generated one forward call a token
    (its prompt read through, where it pauses)."""
    try:
        dec = next(steps)
        while isinstance(dec, Pause):
            dec = next(steps)
        with torch.no_grad(), reads.paused():  # decode steps are counted by the sequence
            dec.alone(model)
        steps.send(None)
    except StopIteration as done:
        return done.value
    raise RuntimeError("an answering generator yielded twice")  # a bug, never a user's error


def resume(steps: Generator[Decoding, None, T]) -> T:
    """The result of an `answering` generator whose Decoding was generated elsewhere (in a batch)."""
    try:
        steps.send(None)
    except StopIteration as done:
        return done.value
    raise RuntimeError("an answering generator yielded twice")


class Batch:
    def __init__(self, model: torch.nn.Module, reads: Reads) -> None:
        self.model, self.reads = model, reads
        self._rows = PaddedBatch()
        self._live: list[tuple[Any, Decoding, int]] = []  # (key, decoding, seat of its next token), row order

    def __len__(self) -> int:
        return len(self._live)

    def join(self, key: Any, dec: Decoding) -> bool:
        """Choose `dec`'s first token; if that does not end it, it joins the batch (True)."""
        at = dec.seq.push(dec.logits)
        if at is None:
            return False
        self._rows.add(dec.cache)
        dec.ready.arena.cache = new_cache()  # its K/V now live in the batch: the row's own copy goes
        self._live.append((key, dec, at))
        return True

    def step(self) -> list[Any]:
        """One forward call for every live sequence; the keys of those that ended (they left)."""
        tokens = [dec.seq.ids[-1] for _, dec, _ in self._live]
        seats = [at for _, _, at in self._live]
        with torch.no_grad(), self.reads.paused():  # decode steps are counted by each sequence
            logits = self._rows.step(self.model, tokens, seats)  # [rows, vocab]
        live, kept, ended = [], [], []
        for r, (key, dec, _) in enumerate(self._live):
            at = dec.seq.push(logits[r])
            if at is None:
                ended.append(key)
            else:
                live.append((key, dec, at))
                kept.append(r)
        if ended:
            self._rows.keep(kept)
        self._live = live
        return ended

    def clear(self) -> list[Any]:
        """Empty the batch (after a failed step): the keys of every sequence that was in it."""
        keys = [key for key, _, _ in self._live]
        self._live, self._rows = [], PaddedBatch()
        return keys
