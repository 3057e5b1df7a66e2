"""The lexical routing channel: SQLite FTS5 BM25 over stored text (the query's words; a word no
candidate says as asked, at half weight in its other inflections, `forms`), plus a bonus for
identifiers.

BM25 alone treats "the" and "Velmora" alike once they are rare enough; the words that pin a
memory down are identifiers: numbers, and capitalized words that do not start a sentence (proper
names). Each identifier of the query found verbatim in a candidate's text adds `identifier_bonus`
times the best BM25 score of the candidate set, so a candidate holding the query's names wins
over one that only shares its common words.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from grm.english.words import STOP_WORDS
from grm.store import Record
from grm.store.backend import StoreBackend

MAX_CANDIDATES = 4096  # rows fetched at most when `keep` rejects most of the index's best ones
FORM_WEIGHT = 0.5  # a word matched in another inflection (`forms`) counts this much of an exact match
WORD = re.compile(r"[\w'-]+", re.UNICODE)


@dataclass(frozen=True)
class LexicalConfig:
    candidates: int = 50  # BM25 candidates fetched before re-scoring
    identifier_bonus: float = 0.5  # per identifier matched, times the best BM25 score

    def __post_init__(self) -> None:
        if self.candidates < 1 or self.identifier_bonus < 0:
            raise ValueError("candidates must be >= 1 and identifier_bonus >= 0")


@dataclass(frozen=True)
class Hit:
    record: Record
    score: float  # combined score, higher is better
    bm25: float
    identifiers: tuple[str, ...]  # query identifiers found in the record's text (why it was chosen)
    dense: float = 0.0  # dense-channel cosine, when that channel was asked


def identifiers(text: str) -> list[str]:
    """Numbers and proper-name-like words of `text` (not the first word of a sentence)."""
    out: list[str] = []
    sentence_start = True
    for m in WORD.finditer(text):
        word = m.group(0)
        prev = text[: m.start()].rstrip()
        sentence_start = not prev or prev[-1] in ".!?:\n"
        if any(ch.isdigit() for ch in word):
            out.append(word)
        elif word[0].isupper() and not sentence_start and word.lower() not in STOP_WORDS:
            out.append(word)
    return list(dict.fromkeys(out))


def forms(word: str) -> list[str]:
    """Other inflections of a word of 4+ letters: plural and singular, the verb in -s, -ed and
    -ing ("allergy": allergies; "insures": insure, insured, insuring; "lives": live, lived,
    living), so BM25, which matches whole tokens, finds a memory said in another form of the
    question's word. A form no text holds costs nothing."""
    w = word.casefold()
    if len(w) < 4 or not w.isalpha():
        return []
    if w.endswith("ies"):
        bases = {w[:-3] + "y"}
    elif w.endswith(("sses", "shes", "ches", "xes")):
        bases = {w[:-2]}
    elif w.endswith("s") and not w.endswith("ss"):
        bases = {w[:-1]}
    elif w.endswith("ied"):
        bases = {w[:-3] + "y"}
    elif w.endswith("ed"):
        bases = {w[:-1], w[:-2]}  # "insured": insure; "parked": park
    elif w.endswith("ing"):
        bases = {w[:-3] + "e", w[:-3]}  # "living": live; "parking": park
    else:
        bases = {w}
    out = set()
    for b in bases:
        if b.endswith("e"):
            out |= {b, b + "s", b + "d", b[:-1] + "ing"}
        elif b.endswith("y") and b[-2:-1] not in ("a", "e", "o", "u"):
            out |= {b, b[:-1] + "ies", b[:-1] + "ied", b + "ing"}
        else:
            out |= {b, b + ("es" if b.endswith(("s", "sh", "ch", "x")) else "s"), b + "ed", b + "ing"}
    return sorted(out - {w})


def search(store: StoreBackend, tenant: str, query: str, kind: str, config: LexicalConfig,
           keep: "callable[[Record], bool]" = lambda r: True) -> list[Hit]:
    """Candidates of `kind` for `query`, best first; `keep` filters records (e.g. by parent).
    Function words are dropped from the query first: "my" or "what" in common is not evidence."""
    words = [w for w in WORD.findall(query) if w.casefold() not in STOP_WORDS]
    if not words:
        return []
    query = " ".join(words)

    def ranked(text: str) -> list[tuple[Record, float]]:
        limit = config.candidates
        while True:  # `keep` filters after the index ranks: widen until enough candidates survive it
            rows = store.search_text(tenant, text, kind=kind, limit=limit)
            found = [(r, s) for r, s in rows if keep(r)]
            if len(found) >= config.candidates or len(rows) < limit or limit >= MAX_CANDIDATES:
                return found
            limit *= 4

    found = ranked(query)
    said = {t.casefold() for r, _ in found for t in WORD.findall(r.text or "")}
    other = list(dict.fromkeys(f for w in words if w.casefold() not in said for f in forms(w)))
    if other:  # a word no candidate says as asked, found in its other forms at FORM_WEIGHT of their BM25
        scores = {r.key: [r, s] for r, s in found}
        for r, s in ranked(" ".join(other)):
            scores.setdefault(r.key, [r, 0.0])[1] += FORM_WEIGHT * s
        found = sorted(((r, s) for r, s in scores.values()), key=lambda t: -t[1])
    found = found[: config.candidates]
    if not found:
        return []
    top = max(s for _, s in found) or 1.0
    pats = [(i, re.compile(rf"(?<![\w]){re.escape(i)}(?![\w])")) for i in identifiers(query)]
    hits = []
    for rec, bm25 in found:
        text = rec.text or ""
        matched = tuple(i for i, pat in pats if pat.search(text))
        hits.append(Hit(rec, bm25 + config.identifier_bonus * top * len(matched), bm25, matched))
    hits.sort(key=lambda h: -h.score)
    return hits


CHANNELS = ("combined", "lexical", "dense")


def combine(lexical: dict[str, Hit], dense: dict[str, tuple[Record, float]], channel: str,
            dense_weight: float, bounds: tuple[float, float] | None = None) -> list[Hit]:
    """Candidates of both channels ranked by `channel`, best first. Combined score = lexical
    score / best lexical score + dense_weight * cosine rescaled to [0, 1] over the candidate set
    (or over `bounds`, the lowest and highest cosine of a larger set `dense` was drawn from);
    "dense" ranks by that rescaled cosine alone. Without dense candidates it falls back to lexical."""
    if channel not in CHANNELS:
        raise ValueError(f"channel must be one of {CHANNELS}")
    if channel == "lexical" or not dense or (channel == "combined" and dense_weight == 0):
        return sorted(lexical.values(), key=lambda h: -h.score)
    lo, hi = bounds or (min(c for _, c in dense.values()), max(c for _, c in dense.values()))
    best_lex = max((h.score for h in lexical.values()), default=0.0) or 1.0
    hits = []
    for key, (rec, cos) in dense.items():
        lex = lexical.get(key)
        d = (cos - lo) / (hi - lo) if hi > lo else 0.0
        value = d if channel == "dense" else (lex.score / best_lex if lex else 0.0) + dense_weight * d
        hits.append(Hit(rec, value, lex.bm25 if lex else 0.0, lex.identifiers if lex else (), cos))
    hits.sort(key=lambda h: -h.score)
    return hits
