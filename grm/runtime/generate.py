"""Greedy generation after a prefilled cache, and the Answer the API returns."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field

import torch
from transformers import DynamicCache

from grm.kv.forward import step
from grm.models.tokenizer import Tokenizer


@dataclass
class Answer:
    answer: str
    mode: str
    ttft_s: float  # from the ask call to the first generated token
    total_s: float
    prompt_tokens: int  # every token in context before generation (sinks included)
    tokens_from_memory: int  # loaded from memory (sinks and stored K/V)
    tokens_computed: int  # read by the model in this call; the two add up to prompt_tokens
    mounted: list[dict] = field(default_factory=list)  # [{id, score}]
    lossy: bool = False  # True if anything served was not exact (never for exact hits)

    def to_json(self) -> dict:
        return asdict(self)


def finish_text(text: str, stops: tuple[str, ...] = ()) -> str:
    """The answer as reported: cut at the first blank line (or any of `stops`), stripped."""
    text = text.lstrip().split("\n\n", 1)[0]
    for stop in stops:
        text = text.split(stop, 1)[0]
    return text.strip()


def greedy(
    model: torch.nn.Module, tok: Tokenizer, cache: DynamicCache, logits: torch.Tensor, seat: int,
    max_new: int, t0: float, stops: tuple[str, ...] = (),
) -> tuple[str, list[int], float]:
    """Generate from `logits` (the prompt's last position). Returns (text, ids, ttft_s). Stops at
    an end-of-turn token, a blank line after some text, or any string of `stops`."""
    ids: list[int] = []
    ttft = 0.0
    for i in range(max_new):
        token = int(torch.argmax(logits))
        if i == 0:
            ttft = time.perf_counter() - t0
        if token in tok.eos_ids:
            break
        ids.append(token)
        text = tok.decode(ids).lstrip()
        if "\n\n" in text or any(stop in text for stop in stops):  # a blank line after some text ends it
            break
        if i + 1 < max_new:
            logits = step(model, cache, token, seat)
            seat += 1
    return finish_text(tok.decode(ids), stops), ids, ttft
