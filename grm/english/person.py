"""The person a sentence speaks in: the user's words as the assistant says them back ("my" ->
"your", "I am" -> "you are"). The answer lead's rules (grm/runtime/lead.py) swap a question's
words with `SWAP`; a fact said back (grm/runtime/policy_glue.py) goes through `spoken_back`.
"""

from __future__ import annotations

import re

SWAP = {"my": "your", "our": "your", "i": "you", "me": "you", "we": "you", "mine": "yours", "am": "are",
        "myself": "yourself", "us": "you"}
# first-person words and the contractions they take, as a sentence says them ("US" is not "us")
_BACK = re.compile(r"\b(?:i\s+am|i'm|i've|i'd|i'll|myself|ourselves|mine|ours|my|our|me|us|we|i)\b", re.IGNORECASE)
_BACK_OF = {"i am": "you are", "i'm": "you're", "i've": "you've", "i'd": "you'd", "i'll": "you'll", "ours": "yours",
            "ourselves": "yourselves"}


def spoken_back(text: str) -> str:
    """`text` as the assistant says it back to the user: "My bank is Ally" -> "Your bank is
    Ally", "I am in Oslo" -> "You are in Oslo" ("9 am" and "the US" stay)."""
    def one(m: re.Match) -> str:
        w = m.group()
        if w == "US":
            return w
        return _BACK_OF.get(re.sub(r"\s+", " ", w.lower())) or SWAP[w.lower()]
    out = _BACK.sub(one, text)
    return out[:1].upper() + out[1:]
