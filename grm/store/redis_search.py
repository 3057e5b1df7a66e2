"""Ranked lexical search and per-tenant figures for the Redis backend, computed in the client
over one tenant's rows (one HVALS). The local store ranks with SQLite FTS5's BM25; this is the
same formula (Okapi BM25, k1 = 1.2, b = 0.75, FTS5's IDF floor, its row lengths) over the same
tokens (Unicode word characters, case-folded, as FTS5's unicode61 tokenizer splits plain text),
so a query ranks rows the same way, with the same scores, on both backends when one tenant holds
the store (tests/scale/test_redis_search.py). FTS5's statistics span every tenant of a local
store; here they span the tenant's own rows (no tenant's words weigh on another's ranking).

Cost: one pass over the tenant's rows per query (no server-side index: in an encrypted
namespace Redis never sees a word). The rows come from the backend's RowCache
(grm.store.redis_rows), which decodes, decrypts and counts the words of each row version once per
process, so a query costs one HGETALL and the BM25 sums: fine for thousands of rows, linear
beyond (bench/results/scale.md measures the local store only).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable
from typing import Protocol

from grm.store.record import Record

_WORD = re.compile(r"\w+")
K1, B = 1.2, 0.75
MAX_QUERY_TOKENS = 64  # as the local store
TAG_TOKENS = 1  # the local catalog indexes a tenant tag beside the text: FTS5 counts it in lengths


def tokens(text: str) -> list[str]:
    return [t.casefold() for t in _WORD.findall(text)]


class Doc(Protocol):
    """A row with its word counts (grm.store.redis_rows.Opened)."""

    rec: Record

    def words(self) -> Counter: ...


def bm25(rows: Iterable[Doc], query: str, kind: str | None = None, limit: int = 10) -> list[tuple[Doc, float]]:
    """Active rows (of `kind`, if given) whose text holds a word of `query`, best first by BM25
    (higher is better), ties by LSN. `rows` are all the tenant's rows: like FTS5's, the
    statistics (row count, document frequency, average length) count every row, whatever its
    state or kind, and a row's length counts the catalog's one tenant-tag token too."""
    # one phrase per distinct word as written, as the local store builds its MATCH ("Frost" and
    # "frost" are two phrases there, both matching frost), then case-folded as FTS5 folds them
    terms = [t.casefold() for t in list(dict.fromkeys(_WORD.findall(query)))[:MAX_QUERY_TOKENS]]
    if not terms or limit <= 0:
        return []
    docs = [(d, d.words()) for d in rows]
    if not docs:
        return []
    n = len(docs)
    lengths = [sum(c.values()) + TAG_TOKENS for _, c in docs]
    avg = sum(lengths) / n
    df = {t: sum(1 for _, c in docs if t in c) for t in terms}
    idf = {t: max(math.log((n - d + 0.5) / (d + 0.5)), 1e-6) for t, d in df.items()}  # FTS5's floor
    hits = []
    for (d, c), length in zip(docs, lengths):
        r = d.rec
        if r.state != "active" or not r.text or (kind is not None and r.kind != kind):
            continue
        score = sum(idf[t] * c[t] * (K1 + 1) / (c[t] + K1 * (1 - B + B * length / avg)) for t in terms if t in c)
        # (terms may repeat after folding: each phrase adds its share, as in FTS5)
        if score > 0:
            hits.append((d, score))
    hits.sort(key=lambda h: (-h[1], h[0].rec.lsn))
    return hits[:limit]


def tenant_kinds(rows: Iterable[Record]) -> dict[str, dict[str, dict[str, int]]]:
    """{tenant: {kind: {records, active, superseded, damaged, payload_bytes}}}, as the local
    store's stats()["tenants"] (a payload shared by rows of one kind is counted once)."""
    out: dict[str, dict[str, dict[str, int]]] = {}
    seen: set[tuple[str, str, str]] = set()
    for r in rows:
        s = out.setdefault(r.tenant, {}).setdefault(
            r.kind, {"records": 0, "active": 0, "superseded": 0, "damaged": 0, "payload_bytes": 0})
        s["records"] += 1
        s[r.state] = s.get(r.state, 0) + 1
        if r.payload is not None and (r.tenant, r.kind, r.payload) not in seen:
            seen.add((r.tenant, r.kind, r.payload))
            s["payload_bytes"] += r.payload_size
    return out
