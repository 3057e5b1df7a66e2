"""Greedy generation after a prefilled cache, and the Answer the API returns.

`Sequence` holds one answer's rules per token (end of turn, stop strings, the limit, streaming
with held-back text, cancel); `greedy` is its loop for one sequence, one forward call a token, and
grm/runtime/batch.py steps several in one forward call with the same rules."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Callable

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
    mounted: list[dict] = field(default_factory=list)  # [{id, score, source, span}], best first
    lossy: bool = False  # True if anything served was not exact (never for exact hits)
    abstained: bool = False  # memory held nothing on the question, and the answer says so
    fallback: str | None = None  # why the asked mode fell back to another (None: it did not)
    completion_tokens: int = 0  # tokens generated
    finish_reason: str = "stop"  # stop (end of turn or a stop string) | length | cancelled

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
    max_new: int, t0: float, stops: tuple[str, ...] = (), *, blank_line_ends: bool = True,
    on_token: Callable[[str], bool | None] | None = None,
) -> tuple[str, list[int], float]:
    """Generate from `logits` (the prompt's last position). Returns (text, ids, ttft_s). Stops at
    an end-of-turn token once some text is out (not before: an answer is never empty), any string
    of `stops`, and (`blank_line_ends`) a blank line after some text. `on_token(delta)` gets the answer's new text as it grows (held back while it could still
    be the start of a stop string); returning False cancels generation (a client gone). The
    rules per token are `Sequence`'s; this is its loop for one sequence, one forward call a token."""
    seq = Sequence(tok, seat, max_new, t0, stops, blank_line_ends=blank_line_ends, on_token=on_token)
    while (at := seq.push(logits)) is not None:
        logits = step(model, cache, seq.ids[-1], at)
    return seq.text, seq.ids, seq.ttft


class Sequence:
    """One answer generated greedily, a token at a time: `push(logits)` takes the logits of the
    position just read [vocab] and returns the seat the chosen token is to be read at next, or
    None once the answer is done (then `text`, `ids`, `ttft`, `finish_reason` are final). Who
    reads the token is the caller's: `greedy` (one forward call a token) or a batch
    (grm/runtime/batch.py: one forward call for every live sequence), with the same result."""

    def __init__(self, tok: Tokenizer, seat: int, max_new: int, t0: float, stops: tuple[str, ...] = (), *,
                 blank_line_ends: bool = True, on_token: Callable[[str], bool | None] | None = None) -> None:
        self.tok, self.seat, self.max_new, self.t0 = tok, seat, max_new, t0
        self.stops, self.blank_line_ends, self.on_token = stops, blank_line_ends, on_token
        self.ends = stops + (("\n\n",) if blank_line_ends else ())
        self.ids: list[int] = []
        self.ttft = 0.0
        self.sent = 0  # characters of the answer already given to on_token
        self.cancelled = False
        self.steps = 0  # tokens handed back to be read (forward calls this sequence took part in)
        self.text: str | None = None  # the answer as reported, once done
        self._detok = Detokenizer(tok)

    @property
    def done(self) -> bool:
        return self.text is not None

    @property
    def finish_reason(self) -> str:
        return "cancelled" if self.cancelled else "length" if len(self.ids) >= self.max_new else "stop"

    def _report(self, text: str) -> str:
        return finish_text(text, self.stops) if self.blank_line_ends else _cut(text, self.stops)

    def push(self, logits: torch.Tensor) -> int | None:
        tok, i = self.tok, len(self.ids)
        token = int(torch.argmax(logits))
        if token in tok.eos_ids and not tok.decode(self.ids).strip():
            token = _best_but_end(logits, tok.eos_ids)  # an answer is not empty while the model has a word
        if i == 0:
            self.ttft = time.perf_counter() - self.t0
        if token in tok.eos_ids:
            return self._finish()
        self.ids.append(token)
        text = self._detok.push(token).lstrip()
        done = any(stop in text for stop in self.ends)  # a blank line after some text ends it
        if self.on_token is not None:
            shown = self._report(text) if done else text
            if not done:  # hold back what could still start a stop string, and trailing blanks
                shown = shown[: len(shown) - _held_back(shown, self.ends)].rstrip()
            if len(shown) > self.sent:
                if self.on_token(shown[self.sent:]) is False:
                    self.cancelled = True
                    return self._finish()
                self.sent = len(shown)
        if done or i + 1 >= self.max_new:
            return self._finish()
        at, self.seat = self.seat, self.seat + 1
        self.steps += 1
        return at

    def _finish(self) -> None:
        self.text = self._report(self.tok.decode(self.ids))
        if self.on_token is not None and not self.cancelled and len(self.text) > self.sent:
            self.on_token(self.text[self.sent:])
        return None


class Detokenizer:
    """The text of a growing list of token ids, each token decoded once, not the whole answer per
    token (quadratic in its length). New text is the decoding of a short window that starts
    CONTEXT tokens before the undecoded ones (so a word's leading space comes out as the whole
    decoding gives it) minus the window's text without them; text that ends inside a character
    (U+FFFD) stays pending until the character is whole. Where a later token changes earlier text
    (a tokenizer's clean-up of spaces), it decodes everything once and goes on from there."""

    CONTEXT = 4

    def __init__(self, tok: Tokenizer) -> None:
        self.tok, self.ids = tok, []
        self.done, self.pending = "", ""
        self.read = 0  # ids before `read` are in `done`

    def push(self, token: int) -> str:
        self.ids.append(token)
        start = max(0, self.read - self.CONTEXT)
        before = self.tok.decode(self.ids[start:self.read])
        window = self.tok.decode(self.ids[start:])
        if not window.startswith(before):  # earlier text changed: resynchronize once
            self.done, self.pending, self.read = self.tok.decode(self.ids), "", len(self.ids)
            return self.done
        new = window[len(before):]
        if new.endswith("\ufffd"):
            self.pending = new
        else:
            self.done, self.pending, self.read = self.done + new, "", len(self.ids)
        return self.done + self.pending


def _best_but_end(logits: torch.Tensor, eos_ids) -> int:
    """The likeliest token that does not end the text (as `min_new_tokens` does): a model that
    would end before saying anything gives its best word instead of an empty answer."""
    masked = logits.flatten().clone()
    masked[[i for i in eos_ids if 0 <= i < masked.numel()]] = float("-inf")
    return int(torch.argmax(masked))


def _held_back(text: str, ends: tuple[str, ...]) -> int:
    """How many trailing characters of `text` could begin one of `ends`, or are a character whose
    bytes are not all generated yet (U+FFFD): not streamed yet."""
    best = len(text) - len(text.rstrip("\ufffd"))
    for end in ends:
        for n in range(min(len(end) - 1, len(text)), 0, -1):
            if text.endswith(end[:n]):
                best = max(best, n)
                break
    return best


def _cut(text: str, stops: tuple[str, ...]) -> str:
    """A chat answer as reported: cut at the first stop string, stripped (blank lines kept)."""
    for stop in stops:
        text = text.split(stop, 1)[0]
    return text.strip()
