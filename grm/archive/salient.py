"""Which tokens of an archived span are also kept apart, beside its index streams, as their own
K/V rows (int8 with a scale per row, or float16): the salient ones, by a rule on each token's text.

Why: quantized keys lose verbatim recall. bench/results/archive_recall.md asks 40 invented facts
of sections archived K x4 / V x3 and gets 0 right, against 30 from the exact K/V; the answers
stay fluent but lose the number. Keeping the few tokens that carry numbers and names as rows of
their own, with the words around them, brings it back at a fraction of the fp16 bytes; that file
measures each rule, context and storage through the tier (`grm archive demote --keep-salient RULE
[--salient-context N] [--salient-storage FORM]`).

Rules (RULES):
  none    no token
  digits  every token whose text holds a digit
  names   digits, and every token of a word that starts with an uppercase letter (a word starts
          at the span's first token, at every token whose text does not begin with a letter or
          digit, and after every token whose text does not end with one; the tokens that
          continue it inherit its capital)
and, with `context` N, the N tokens either side of each of those: the words around a number are
what a question about it matches (bench/results/archive_recall.md: digits alone 13/40, digits
with 4 tokens of context 30/40, the exact K/V's score; on a second, held-out fact set 17/40 and
36/40 against 37/40 exact).
"""

from __future__ import annotations

from collections.abc import Sequence

RULES = ("none", "digits", "names")
STORAGES = ("int8", "float16")  # how their K/V rows are stored (grm/archive/archived.py)


def salient_mask(pieces: Sequence[str], rule: str, context: int = 0) -> list[bool]:
    """One flag per token text in `pieces` (a span's tokens decoded one by one): keep its row?"""
    if rule not in RULES:
        raise ValueError(f"unknown keep-salient rule {rule!r}: one of {', '.join(RULES)}")
    if context < 0:
        raise ValueError(f"salient context must be >= 0 tokens, got {context}")
    if rule == "none":
        return [False] * len(pieces)
    keep, capital, before = [], False, ""
    for piece in pieces:
        if not (piece[:1].isalnum() and before[-1:].isalnum()):  # a new word
            capital = next((c for c in piece if c.isalnum()), "").isupper()
        keep.append(any(c.isdigit() for c in piece) or (rule == "names" and capital))
        before = piece
    if context:
        for i in [i for i, k in enumerate(keep) if k]:
            for j in range(max(0, i - context), min(len(keep), i + context + 1)):
                keep[j] = True
    return keep
