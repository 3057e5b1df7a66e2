"""The closed word classes of English, the one stop-word list, and the one plural fold.

The classes are what the answer lead's rules read a question by (grm/runtime/lead.py); the
stop-word list is every one of them and the other function words, the words a lexical match,
a subject match or an abstention check drops because having them in common is no evidence
("my", "what", "is"). A caller that needs a narrower or wider set builds it from these classes,
by name, beside the reason it needs it.
"""

from __future__ import annotations

from functools import lru_cache

WH = frozenset("what which who whom whose when where why how".split())
ARTICLES = frozenset("the a an".split())
POSSESSIVES = frozenset("my our your his her their its".split())
DETERMINERS = ARTICLES | POSSESSIVES | {"this", "that"}
PRONOUNS = frozenset("i we you they he she it".split())
BE = frozenset("is are was were".split())  # the finite forms a question is asked with
PREPOSITIONS = frozenset("to from in at on for with into by of".split())
DO = frozenset("do does did".split())
MODALS = frozenset("should can could will would must may might".split())
# Words no match is told apart by: every class above and the other function words (object
# pronouns, conjunctions, have, negation, a few adverbs and the request words of a question:
# "please tell me ...").
STOP_WORDS = WH | ARTICLES | POSSESSIVES | DETERMINERS | PRONOUNS | BE | PREPOSITIONS | DO | MODALS | frozenset(
    "am be been being done me mine yours him hers us them these those there here shall have has had "
    "and or but if then than so as not no yes any some all just very too also about again still "
    "please tell let out up over".split())


@lru_cache(maxsize=1 << 16)  # pure, and called per word of every text routing indexes
def stem(word: str) -> str:
    """The comparison form of a content word: case-folded, the possessive dropped, the plural
    folded ("Boxes" -> "box", "pharmacies" -> "pharmacy", "classes" -> "class", "doctor's" ->
    "doctor"; "class", "bus", "status", "tennis" kept). Crude by design: both sides of a
    comparison go through it, so it need only be consistent."""
    w = word.casefold().replace("’", "'")
    w = w[:-2] if w.endswith("'s") else w.rstrip("'")
    if len(w) > 4 and w.endswith("ies"):
        return w[:-3] + "y"
    if w.endswith(("sses", "xes", "ches", "shes")):
        return w[:-2]
    return w[:-1] if len(w) > 3 and w.endswith("s") and not w.endswith(("ss", "us", "is")) else w
