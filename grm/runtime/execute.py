"""Steps 5-7 of a request (grm/runtime/answer.py plans steps 1-4): the text after memory read
into the arena (`read_prompt`, a `Pause` before each forward call so the server's worker can step
its batch between two), the answer generated (a `Decoding`: alone, or in the batch of
grm/runtime/batch.py) and concluded into the `Answer` the API reports; the prompt's new chain
blocks are stored as they are read (answer.harvest_blocks).
"""

from __future__ import annotations

import time
from collections.abc import Generator
from dataclasses import dataclass, replace
from typing import TypeVar

import torch
from transformers import DynamicCache

from grm.kv.forward import step
from grm.runtime.answer import Context, Generation, Pause, Ready, harvest_blocks, reading
from grm.runtime.generate import Answer, Sequence
from grm.runtime.question import with_lead

T = TypeVar("T")


@dataclass
class Generated:
    text: str
    ids: list[int]
    ttft_s: float
    prompt_tokens: int  # seats in context before generation
    start: int  # the seat where the text read after memory began
    finish_reason: str = "stop"  # stop (end of turn or a stop string) | length | cancelled


@dataclass
class Decoding:
    """A request whose text after memory is read (step 5 done), its answer still to generate
    (step 6): the arena's cache, the last position's logits and the answer's `Sequence`.
    `alone(model)` generates it one forward call a token (`greedy`'s loop); a batch
    (grm/runtime/batch.py) generates several in one forward call a token, with the same rules."""

    ready: Ready
    gen: Generation
    t0: float
    start: int  # the seat where the text read after memory began
    prompt_tokens: int  # seats in context before generation
    logits: torch.Tensor  # [vocab] fp32, the prompt's last position
    seq: Sequence

    @property
    def cache(self) -> DynamicCache:
        return self.ready.arena.cache

    def alone(self, model: torch.nn.Module) -> None:
        logits = self.logits
        while (at := self.seq.push(logits)) is not None:
            logits = step(model, self.cache, self.seq.ids[-1], at)

    def generated(self) -> Generated:
        seq = self.seq
        return Generated(seq.text, seq.ids, seq.ttft, self.prompt_tokens, self.start, seq.finish_reason)


def read_prompt(ctx: Context, ready: Ready, gen: Generation, t0: float) -> Generator[Pause, None, Decoding]:
    """Step 5: read the runs after the arena (storing the prompt's new blocks if asked), a `Pause`
    yielded before each forward call (answer.reading); the answer is generated from the Decoding
    returned."""
    arena = ready.arena
    start = arena.seat
    logits = yield from reading(ctx.lm.model, arena.cache, ready.read, start)
    seat = start + sum(map(len, ready.read))
    with torch.no_grad():
        if ready.blocks_to_store:
            harvest_blocks(ctx, arena, ready.blocks_to_store, ready.block_meta)
    seq = Sequence(ctx.lm.tokenizer, seat, gen.max_new_tokens, t0, gen.stops, blank_line_ends=not gen.chat,
                   on_token=gen.on_token)
    return Decoding(ready, gen, t0, start, seat, logits, seq)


def through(steps: Generator[Pause, None, T]) -> T:
    """The result of a read that pauses (`read_prompt`, `begin`), read without pausing."""
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value


def run(ctx: Context, ready: Ready, gen: Generation, t0: float) -> Generated:
    """Read the runs after the arena, generate, and store the prompt's new blocks if asked."""
    dec = through(read_prompt(ctx, ready, gen, t0))
    with ctx.reads.paused():  # decode steps are counted by the sequence (Sequence.steps)
        dec.alone(ctx.lm.model)
    return dec.generated()


def answer(ctx: Context, ready: Ready, gen: Generation, t0: float) -> Answer:
    """Steps 5-7 for `ask`: the Answer the API and `--json` report (`begin`, generated alone,
    `conclude`)."""
    dec = through(begin(ctx, ready, gen, t0))
    if isinstance(dec, Answer):
        return dec
    with ctx.reads.paused():  # decode steps are counted by the sequence (Sequence.steps)
        dec.alone(ctx.lm.model)
    return conclude(dec)


def begin(ctx: Context, ready: Ready, gen: Generation, t0: float) -> Generator[Pause, None, Decoding | Answer]:
    """Step 5 for `ask` (`read_prompt`'s pauses yielded): the Decoding to generate, or the Answer
    itself where nothing is generated: an abstaining plan answers the configured line, streamed
    as one piece."""
    if ready.abstained:
        line = ctx.config.abstain_line
        if gen.on_token is not None:
            gen.on_token(line)
        t = time.perf_counter() - t0
        return Answer(answer=line, mode=ready.mode, ttft_s=t, total_s=t, prompt_tokens=0, tokens_from_memory=0,
                      tokens_computed=0, mounted=ready.mounted, abstained=True)
    if ready.lead and gen.on_token is not None:  # the stream starts with the lead, as the answer does
        first = [True]

        def on_token(delta: str, _send=gen.on_token) -> bool | None:
            if first and delta:
                first.clear()
                delta = with_lead(ready.lead, delta)
            return _send(delta)
        gen = replace(gen, on_token=on_token)
    return (yield from read_prompt(ctx, ready, gen, t0))


def conclude(dec: Decoding) -> Answer:
    """After step 6: the Answer of a generated Decoding."""
    ready, out = dec.ready, dec.generated()
    from_memory = ready.arena.from_memory
    return Answer(
        answer=with_lead(ready.lead, out.text), mode=ready.mode, ttft_s=out.ttft_s,
        total_s=time.perf_counter() - dec.t0, prompt_tokens=out.prompt_tokens, tokens_from_memory=from_memory,
        tokens_computed=out.prompt_tokens - from_memory, mounted=ready.mounted, lossy=ready.lossy,
        fallback=ready.fallback, completion_tokens=len(out.ids), finish_reason=out.finish_reason,
    )
