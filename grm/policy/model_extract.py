"""The model-backed update reader (optional; the runtime's `extractor` "model" or "both").

`ModelUpdateReader` (a real model behind `--extractor model`): the model is shown the turn and
the facts memory holds that are nearest to it (`rank`: the runtime ranks fact grafts by the
model's own keys), and asked to copy the fact the turn changes and write it as it is now:
"Our Wi-Fi password is sunflower42 | Our Wi-Fi password is Bluejay!2024", or "none". Copying is
what a small model does reliably where numbering is not (a first version asked for the fact's
number: on FRESH-16 a 1.5B model named the wrong line and memory served "Your dentist is
Pepper"). The answer is kept only where it is checkable:
- the copied fact is one of the facts shown (its words, case and punctuation aside);
- the rewritten fact differs from it in one span, and that new span is said in the turn
  (so a value the model invents never reaches memory);
- asked again on that one fact and the turn ("does the message change this fact?"), the model
  says yes (`confirm`).
It proposes that fact's (subject, predicate) with the new value, replacing the old one, so the same
conflict rules (rule 7 in grm/policy/rules.py) supersede it with lineage. This reads what no rule
can: "changed the wifi pw to X" for "Our Wi-Fi password is ...", "Nana" for my grandmother, a
value of no fixed shape (a coffee order, a book).

The model is a `complete(prompt) -> text` callable (the runtime passes greedy generation with
memory off, through the model's chat template), so this module stays model-free and is tested
with a scripted one.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from grm.policy.fact import Fact, FactProposal

READ_PROMPT = (
    "Facts I remember about the user:\n{facts}\n\n"
    "The user now says: \"{text}\"\n\n"
    "If this message says that one of those facts has changed, copy that fact exactly as it is written above, "
    "then write | and then the fact as it is now, with the new value from the message. "
    "If the message changes none of them, answer: none"
)
CONFIRM_PROMPT = ("Fact: \"{fact}\"\nThe user says: \"{text}\"\n\n"
                  "Does the user's message say that this fact has changed? Answer yes or no.")
CANDIDATES = 8  # facts shown to the model: the nearest to the turn (`rank`), else the most recent
_WORD = re.compile(r"[\w$€£%@.!'/:-]+")


def _words(text: str) -> list[str]:
    return [w.strip(".,;:!?\"'").casefold() for w in _WORD.findall(text) if w.strip(".,;:!?\"'")]


def _said_in(value: str, text: str) -> bool:
    """`value` stands in `text` as said (case, surrounding punctuation, currency signs and
    thousands commas aside: "$1,975" is said in "rent goes to 1975")."""
    def plain(t: str) -> str:
        return re.sub(r"(?<=\d),(?=\d{3})|[$€£]", "", t.casefold())

    v = plain(value.strip().strip(".,;:!\"'"))
    return bool(v) and re.search(rf"(?<![\w]){re.escape(v)}(?![\w])", plain(text)) is not None


def _copied(line: str, facts: list[Fact]) -> Fact | None:
    """The fact `line` copies (same words, case and punctuation aside), if exactly one."""
    said = _words(line)
    found = [f for f in facts if _words(f.statement) == said]
    return found[0] if len(found) == 1 else None


def _changed_span(old: str, new: str) -> tuple[str, str] | None:
    """(old words, new words) of the one place `new` differs from `old`, in `new`'s own spelling;
    None where they are the same or differ in more than one place."""
    from difflib import SequenceMatcher

    a, b = _words(old), _WORD.findall(new)
    ops = [op for op in SequenceMatcher(None, a, [w.strip(".,;:!?\"'").casefold() for w in b], autojunk=False).get_opcodes()
           if op[0] != "equal"]
    if len(ops) != 1 or ops[0][0] == "delete":
        return None
    _, i1, i2, j1, j2 = ops[0]
    return " ".join(a[i1:i2]), " ".join(w.strip(".,;:!?\"'") for w in b[j1:j2])


def read_update(text: str, facts: list[Fact], answer: str, intent: str = "inferred") -> FactProposal | None:
    """The proposal the model's `answer` ("old fact | fact now") makes for the turn `text` over
    the `facts` shown, if checkable (module docstring; `confirm` is the caller's); else None."""
    line = answer.strip().split("\n", 1)[0].strip().strip("`")
    parts = [p.strip().strip("\"'") for p in line.split("|")]
    if len(parts) != 2 or not all(parts):
        return None
    fact = _copied(parts[0], facts)
    changed = _changed_span(fact.statement, parts[1]) if fact is not None else None
    if fact is None or changed is None:
        return None
    old, new = changed
    if not new or not _said_in(new, text) or len(new.split()) > 12 or len(parts[1].split()) > 40:
        return None
    value = fact.value
    at = value.casefold().find(old) if old else -1
    value = value[:at] + new + value[at + len(old):] if at >= 0 else new
    statement = parts[1] if parts[1].endswith((".", "!")) else parts[1] + "."
    return FactProposal(fact.subject, fact.predicate, value, statement[0].upper() + statement[1:], intent=intent,
                        replaces=fact.value)


class ModelUpdateReader:
    """Reads the update a turn makes to one of the facts held, through the model (module docstring).
    `complete(prompt) -> text` asks the model (the runtime: through its chat template, memory off);
    `rank(text, facts) -> facts`, nearest first (None: the most recent first)."""

    name = "model"

    def __init__(self, complete: Callable[[str], str], intent: str = "inferred",
                 rank: Callable[[str, list[Fact]], list[Fact]] | None = None) -> None:
        self.complete, self.intent, self.rank = complete, intent, rank
        self.asked = 0  # model calls made (each one is a generation)

    def gate(self, text: str) -> bool:
        """Whether a turn could be an update at all: a statement, not a question."""
        return bool(text.strip()) and not text.rstrip().endswith("?")

    def read(self, text: str, held: list[Fact], *, claimed: bool = False,
             disputed: frozenset[str | None] = frozenset()) -> FactProposal | None:
        facts = [f for f in held if f.state == "active" and f.mutable and f.predicate != "note"]
        if not facts:
            return None
        facts = (self.rank(text, facts) if self.rank is not None else facts[::-1])[:CANDIDATES]
        listed = "\n".join(f"- {f.statement.rstrip('.')}." for f in facts)
        self.asked += 1
        p = read_update(text, facts, self.complete(READ_PROMPT.format(facts=listed, text=text.strip())), self.intent)
        if p is None:
            return None
        old = next(f for f in facts if f.value == p.replaces and f.subject == p.subject)
        self.asked += 1
        said = self.complete(CONFIRM_PROMPT.format(fact=old.statement.rstrip("."), text=text.strip()))
        return p if said.strip().casefold().startswith("yes") else None
