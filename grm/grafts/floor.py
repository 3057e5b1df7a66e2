"""Abstention: whether what was routed for a question holds anything on it (model-free).

Routing always ranks something first; the score it ranks by (BM25 plus a dense re-rank, each
relative to the best candidate) says which memory is closest, not whether any is close. The
floor asks instead: how much of the question does the routed text cover, weighted by how rare
each of its words is in this store? `support` is the inverse-document-frequency mass of the
question's content words (function words dropped, plurals and possessives folded) found in the
routed texts, in any inflection ("moved" holds "move"), over the mass of all of them, the words
of its noun phrases ("my cat", "the wifi password") weighing 4x the rest ("called", "ride": how
it is asked); document frequencies come from the store's own
routable texts, so a word every memory holds ("code" in a store of codes) counts for little and
a word no memory holds (a name never stored) counts the most. The questions of a chat turn's
user line ("User: What is ...?") are not evidence and are left out.

A question abstains when nothing was routed, or when support is under the floor and none of its
identifiers (numbers, names: grm/route/lexical.identifiers) was found in a routed text. The
floor is calibrated on a tuning split of bench/fidelity.py and reported on a held-out one.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from grm.english.dates import DATE, MONTH_NAME, TIME, YEAR
from grm.english.words import POSSESSIVES, STOP_WORDS, stem
from grm.route.lexical import WORD, forms, identifiers

DEFAULT_FLOOR = 0.449  # calibrated on the tuning split of bench/fidelity.py; see bench/results/fidelity.md
ABSTAIN_LINE = "I don't have anything in memory about that."
OTHER_WEIGHT = 0.25  # a content word outside the question's noun phrases ("ride", "opens") weighs this much
# words naming what kind of answer is wanted, or asking for it as it is now ("my current
# address"): a statement says "my dog is Max", "I live at ...", never "name" or "current"
_ANSWER_KIND = frozenset({"name", "called", "current", "currently", "latest", "present"})
# a word naming the kind of value asked for ("What day ...?", "At what time ...?") is found in a
# text holding a value of that kind, whatever its words: "comes on Sunday" answers "what day"
_KIND_VALUE = {"day": DATE, "date": DATE, "time": TIME, "year": YEAR, "month": MONTH_NAME}
_DO_VERB = re.compile(r"\b(?:do|does|did)\s+(?:my|our|the|your|his|her|their)\s+[\w'’-]+(?:\s+[\w'’-]+){0,2}?\s+"
                      r"(?P<verb>[\w'’-]+)(?:\s+(?:in|at|to|on|for|with|from|up|by))?\s*\?\s*$", re.IGNORECASE)
# the words a noun phrase the question is about opens with ("my cat", "the wifi password", "which bike")
_OPENERS = POSSESSIVES | {"the", "what", "which", "whose"}
_QUESTION_SENTENCE = re.compile(r"[^.!?\n]*\?")
_ASK = re.compile(r"^\s*(?:what|which|who|whom|whose|when|where|why|how|do|does|did|is|are|was|were|can|could|"
                  r"would|will|have|has|tell me|remind me)\b", re.IGNORECASE)
_PERSONAL = re.compile(r"\b(?:my|our|mine|ours)\b|\b(?:where|when|who|which|what)\b.*\b(?:do|did|does|am|are|"
                       r"were|was|have|had|should|will)\s+(?:i|we)\b", re.IGNORECASE)


def terms(text: str) -> set[str]:
    """Content words of `text` (stemmed; function words dropped)."""
    out = {stem(w) for w in WORD.findall(text) if w.casefold() not in STOP_WORDS and w.strip("'-")}
    return {t for t in out if t not in STOP_WORDS}  # "What's", "who's" are function words too


def question_terms(question: str) -> set[str]:
    """Content words of a question, less the words that name the kind of answer it wants or ask
    for it as it is now ("What is my dog's name?", "my current weight": `_ANSWER_KIND`)."""
    return terms(question) - _ANSWER_KIND


def declarative(text: str) -> str:
    """`text` without the questions of its chat turns' user lines ("User: What is my code?":
    asking about a thing is not evidence of it). A document's questions stay (an FAQ's answer
    follows its question)."""
    if "User:" not in text:
        return text
    return "\n".join(_QUESTION_SENTENCE.sub(" ", ln) if ln.lstrip().startswith("User:") else ln
                     for ln in text.split("\n"))


def only_asks(text: str) -> bool:
    """A chat turn whose user line only asks (every sentence a question): weaker evidence than
    a statement, whatever its words have in common with a later question."""
    users = [ln for ln in text.split("\n") if ln.lstrip().startswith("User:")]
    return bool(users) and all(not terms(declarative(ln).replace("User:", "")) for ln in users)


def asks_memory(text: str) -> bool:
    """A chat line is a question about the user's own memory: a question with "my"/"our", or
    "where/when/who ... do|did we|I". "How do I keep plants alive?", "Who was Napoleon?" and
    small talk are left to the model."""
    t = text.strip()
    question = t.endswith("?") or _ASK.match(t) is not None
    return question and _PERSONAL.search(t) is not None


class DocumentFrequencies:
    """Document frequencies of content words over one store's routable texts."""

    def __init__(self, texts: Iterable[str]) -> None:
        self.n = 0
        self.df: dict[str, int] = {}
        for text in texts:
            self.n += 1
            for t in terms(declarative(text)):
                self.df[t] = self.df.get(t, 0) + 1

    @classmethod
    def counted(cls, n: int, df: dict[str, int]) -> DocumentFrequencies:
        """Frequencies counted elsewhere (grm/route/index.py keeps them in step with the store)."""
        out = cls(())
        out.n, out.df = n, df
        return out

    def idf(self, term: str) -> float:
        """BM25's inverse document frequency (>= 0; a word no text holds gets the most)."""
        df = self.df.get(term, 0)
        return math.log(1 + (self.n - df + 0.5) / (df + 0.5))


@dataclass(frozen=True)
class Grounding:
    """Whether memory holds anything on a question, and why."""

    support: float  # share of the question's IDF-weighted content words found in the routed texts
    identifiers: tuple[str, ...]  # the question's names/numbers found in a routed text
    missing: tuple[str, ...]  # the question's content words no routed text holds
    abstain: bool

    def to_json(self) -> dict:
        return {"support": round(self.support, 4), "identifiers": list(self.identifiers),
                "missing": list(self.missing), "abstain": self.abstain}


def topic_terms(question: str) -> set[str]:
    """The words of the question's noun phrases: those after my/our/the/what/which/whose up to
    the next function word, past participles dropped ("What is my cat called?" -> cat, "What
    bike do I ride?" -> bike), and the verb that ends a question after do/does/did and its noun
    phrase ("When does my mother-in-law arrive?" -> mother-in-law). What the question is about
    weighs more than how it is asked."""
    verb = m["verb"].casefold() if (m := _DO_VERB.search(question)) else None
    out: set[str] = set()
    on = False
    for w in WORD.findall(question):
        low = w.casefold()
        if low in _OPENERS:
            on = True
        elif low in STOP_WORDS:
            on = False
        elif on and not (len(low) > 4 and low.endswith("ed")) and low != verb:
            out.add(stem(w))
    return out


def support(question: str, texts: Sequence[str], freq: DocumentFrequencies) -> tuple[float, tuple[str, ...]]:
    """(support, the content words not found) of `question` in `texts` (see the module docstring).
    A question without content words ("what is it?") is supported by anything routed."""
    want = question_terms(question)
    if not want:
        return (1.0 if texts else 0.0), ()
    topic = topic_terms(question) & want or want
    have: set[str] = set()
    for text in texts:
        said = declarative(text)
        have |= terms(said) | {k for k in want & _KIND_VALUE.keys() if _KIND_VALUE[k].search(said)}

    held = {t for t in want if t in have or any(f in have for f in forms(t))}  # "moved" holds "move"

    def weight(t: str) -> float:
        return freq.idf(t) * (1.0 if t in topic else OTHER_WEIGHT)

    total = sum(weight(t) for t in want) or 1.0
    missing = tuple(sorted(want - held))
    return sum(weight(t) for t in held) / total, missing


def ground(question: str, texts: Sequence[str], freq: DocumentFrequencies, floor: float) -> Grounding:
    """Grounding of `question` in the routed `texts`; `floor` 0 never abstains on routed text."""
    value, missing = support(question, texts, freq)
    found = tuple(i for i in identifiers(question)
                  if any(re.search(rf"(?<![\w]){re.escape(i)}(?![\w])", declarative(t)) for t in texts))
    abstain = not texts or (value < floor and not found)
    return Grounding(value, found, missing, abstain)
