"""The lexical routing channel: SQLite FTS5 BM25 over stored text, plus a bonus for identifiers.

BM25 alone treats "the" and "Velmora" alike once they are rare enough; the words that pin a
memory down are identifiers: numbers, and capitalized words that do not start a sentence (proper
names). Each identifier of the query found verbatim in a candidate's text adds `identifier_bonus`
times the best BM25 score of the candidate set, so a candidate holding the query's names wins
over one that only shares its common words.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from grm.store import Record
from grm.store.backend import StoreBackend

MAX_CANDIDATES = 4096  # rows fetched at most when `keep` rejects most of the index's best ones
_WORD = re.compile(r"[\w'-]+", re.UNICODE)
_STOP = frozenset(
    "what which who whom whose when where why how is are was were be been being am the a an of in on at to "
    "for by with from and or but if then than so as do does did done i me my mine you your yours he him his "
    "she her hers it its we us our they them their this that these those there here can could would should "
    "will shall may might must have has had not no yes any some all just very too also about again still "
    "please tell let into out up over".split()
)


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
    for m in _WORD.finditer(text):
        word = m.group(0)
        prev = text[: m.start()].rstrip()
        sentence_start = not prev or prev[-1] in ".!?:\n"
        if any(ch.isdigit() for ch in word):
            out.append(word)
        elif word[0].isupper() and not sentence_start and word.lower() not in _STOP:
            out.append(word)
    return list(dict.fromkeys(out))


def search(store: StoreBackend, tenant: str, query: str, kind: str, config: LexicalConfig,
           keep: "callable[[Record], bool]" = lambda r: True) -> list[Hit]:
    """Candidates of `kind` for `query`, best first; `keep` filters records (e.g. by parent).
    Function words are dropped from the query first: "my" or "what" in common is not evidence."""
    words = [w for w in _WORD.findall(query) if w.casefold() not in _STOP]
    if not words:
        return []
    query, limit = " ".join(words), config.candidates
    while True:  # `keep` filters after the index ranks: widen until enough candidates survive it
        rows = store.search_text(tenant, query, kind=kind, limit=limit)
        found = [(r, s) for r, s in rows if keep(r)]
        if len(found) >= config.candidates or len(rows) < limit or limit >= MAX_CANDIDATES:
            break
        limit *= 4
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
