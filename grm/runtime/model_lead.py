"""The answer lead from the model, for questions no rule of grm/runtime/lead.py covers.

The model is shown a few questions rewritten as the start of their answers (fixed examples of
forms the rules do not read: "Which ...", "In what year ...", "How large ..."), then the question,
and continues one line greedily. What it writes is kept only as far as it restates the question:
the lead is cut before the first word that is neither in the question nor a function word (a
model that starts answering - "opened in 2018" - keeps "opened in"), and refused if it keeps a
wh-word or fewer than three words. The examples' K/V is computed once per runtime; a lead costs
the question's tokens plus at most MAX_TOKENS generated tokens.
"""

from __future__ import annotations

import re
import time

import torch

from grm.english.person import SWAP
from grm.english.words import BE, DETERMINERS, DO, MODALS, PREPOSITIONS, PRONOUNS, WH
from grm.kv import KV, cache_from_kv, kv_from_cache, new_cache
from grm.kv.forward import prefill
from grm.models import LoadedModel

MAX_TOKENS = 24
EXAMPLES = (
    ("Which train goes to the airport?", "The train that goes to the airport is"),
    ("In what year was the bridge opened?", "The bridge was opened in"),
    ("How large is the city's fleet of buses?", "The city's fleet of buses numbers"),
    ("Whose car was parked outside?", "The car parked outside was"),
    ("At what time does the shop close?", "The shop closes at"),
    ("For how many years did she teach?", "She taught for"),
)
HEAD = "Rewrite each question as the start of its answer.\n\n"
# What a restatement may add that is not in the question: a clause's function words (the closed
# classes; not the stop words' negation, quantifiers and adverbs: "The shop is not" already
# answers) and the nouns an answer's frame names ("The number of ...", "... in the year").
RESTATING = DETERMINERS | PRONOUNS | BE | PREPOSITIONS | DO | MODALS | frozenset(
    "who which be been has have had these those and or as per number numbers count total amount year years day date "
    "time place name called named".split())


class ModelLead:
    """`lead(question)`: the start of its answer written by the model, or None."""

    def __init__(self, lm: LoadedModel) -> None:
        self.lm = lm
        self._head: KV | None = None

    def _examples(self) -> KV:
        if self._head is None:
            tok = self.lm.tokenizer
            text = HEAD + "".join(f"Question: {q}\nAnswer starts: {a}\n\n" for q, a in EXAMPLES)
            cache = new_cache()
            prefill(self.lm.model, cache, list(tok.sink_ids) + tok.encode(text), 0)
            self._head = kv_from_cache(cache)
        return self._head

    @torch.no_grad()
    def lead(self, question: str) -> str | None:
        from grm.runtime.generate import greedy

        q = question.strip()
        if "\n" in q or not q.endswith("?"):
            return None
        head = self._examples()
        tok, cache = self.lm.tokenizer, cache_from_kv(head)
        ids = tok.encode(f"Question: {q}\nAnswer starts:")
        logits = prefill(self.lm.model, cache, ids, head.tokens)
        text, _, _ = greedy(self.lm.model, tok, cache, logits, head.tokens + len(ids), MAX_TOKENS,
                            time.perf_counter(), ("\n", "Question:"))
        return restated(text, q)


def restated(text: str, question: str) -> str | None:
    """`text` cut before the first word that does not restate `question` (one of its words, maybe
    inflected - open/opened -, a first or second person swapped, or a function word); a word that
    ends a sentence ends it. None if a wh-word remains or fewer than three words do."""
    asked = {w.lower() for w in re.findall(r"[\w'-]+", question)}
    asked |= {SWAP[w] for w in asked if w in SWAP}
    kept = []
    for word in text.strip().split():
        bare = word.strip(".,;:!?\"").lower()
        if not (bare in RESTATING or any(_inflects(w, bare) for w in asked)):
            break
        kept.append(word.rstrip(".;:!?"))
        if word.rstrip(".;:!?") != word:
            break
    if len(kept) < 3 or any(w.lower().strip(",") in WH for w in kept):
        return None
    lead = " ".join(kept).rstrip(",")
    return lead[0].upper() + lead[1:]


def _inflects(asked: str, word: str) -> bool:
    """`word` is `asked` or an inflection of it (open, opens, opened; travel, travelled)."""
    return word == asked or (len(asked) >= 3 and word.startswith(asked) and len(word) - len(asked) <= 3)
