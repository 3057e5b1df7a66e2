"""The model-backed update extractor (optional; `extractor="model"` in the runtime's config).

The rules (grm/policy/extract.py, grm/policy/updates.py) read the update phrasings they were
written for. For a sentence they read no update in but that sounds like one (a cue word: now,
changed, no longer, switched, instead, ...), this extractor asks a model to write the change as
`subject | old value | new value` after a few examples, and keeps the answer only when it is
checkable against the sentence: the new value (and the old one, when given) must appear in the
sentence verbatim, and without an old value the subject must share a word with it. Anything else proposes nothing, so
a model's invention never reaches memory; what it proposes goes through the same conflict rules
(rule 7 in grm/policy/rules.py: superseded with lineage, or held for review when ambiguous).

The model is a `complete(prompt) -> text` callable (the runtime passes greedy generation with
memory off), so this module stays model-free and is tested with a scripted one.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from grm.policy.extract import RuleExtractor, sentences
from grm.policy.fact import FactProposal, words

CUES = re.compile(r"\b(?:now|changed?|no longer|any ?more|switched|moved|instead|new|different|replaced|"
                  r"updated|became|turned into|from|rather than|quit|joined|left|handed|these days|"
                  r"after all|reset|re-?opened|used to)\b", re.IGNORECASE)
PROMPT = (
    "Each sentence says that something changed. Write the change as: subject | old value | new value "
    "(use - when the old value is not said).\n"
    "Sentence: I switched my bank from Chase to Ally.\nChange: my bank | Chase | Ally\n"
    "Sentence: The wifi password is different now: hunter3.\nChange: the wifi password | - | hunter3\n"
    "Sentence: We used to meet in room 4 but these days it's room 9.\nChange: our meeting room | room 4 | room 9\n"
    "Sentence: {sentence}\nChange:"
)
_FUNCTION = frozenset("my our the a an i we is are was it its".split())


def _in(value: str, sentence: str) -> bool:
    return re.search(rf"(?<!\w){re.escape(value.casefold())}(?!\w)", sentence.casefold()) is not None


def read_change(sentence: str, answer: str, intent: str = "inferred") -> FactProposal | None:
    """The proposal a model's `answer` ("subject | old | new") makes for `sentence`, if checkable."""
    line = answer.strip().split("\n", 1)[0]
    parts = [p.strip().strip(".\"'") for p in line.split("|")]
    if len(parts) != 3 or not all(parts):
        return None
    subject, old, new = parts
    old = "" if old == "-" else old
    if not _in(new, sentence) or (old and not _in(old, sentence)) or old.casefold() == new.casefold():
        return None
    mine = set(words(subject)) - _FUNCTION
    if not mine or (not old and not mine & set(words(sentence))) or len(subject.split()) > 6 or len(new.split()) > 8:
        return None
    said = f"{subject} is {new}"  # canonical, as the rules' updates are (grm/policy/updates.py)
    return FactProposal(subject, "is", new, said[0].upper() + said[1:], intent=intent, replaces=old)


class ModelUpdateExtractor:
    """The rule extractor, plus the model for update-sounding sentences the rules read no update in."""

    name = "model"  # evidence names the path: "extract:model"

    def __init__(self, complete: Callable[[str], str], intent: str = "inferred") -> None:
        self.complete, self.intent = complete, intent
        self.rules = RuleExtractor(intent)
        self.asked = 0  # model calls made (each one is a generation)

    def propose(self, text: str, evidence_id: str, now: float) -> list[FactProposal]:
        out = self.rules.propose(text, evidence_id, now)
        if any(p.replaces is not None for p in out):
            return out
        for sentence in sentences(text):
            if sentence.endswith("?") or not CUES.search(sentence):
                continue
            self.asked += 1
            p = read_change(sentence, self.complete(PROMPT.format(sentence=sentence)), self.intent)
            if p is not None:
                out = [q for q in out if q.key != p.key] + [p]
        return out
