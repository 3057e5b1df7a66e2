"""Ranked lexical search and per-tenant figures for the Redis backend, computed in the client
over one tenant's rows (one HVALS). The local store ranks with SQLite FTS5's BM25; this is the
same formula (Okapi BM25, k1 = 1.2, b = 0.75, FTS5's IDF floor) over the same tokens (Unicode
word characters, case-folded, as FTS5's unicode61 tokenizer splits them for plain text), so a
query ranks rows the same way on both backends.

Cost: one pass over the tenant's active rows with text per query (no server-side index): fine
for thousands of rows, linear beyond (bench/results/scale.md measures the local store only).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable

from grm.store.record import Record

_WORD = re.compile(r"\w+")
K1, B = 1.2, 0.75
MAX_QUERY_TOKENS = 64  # as the local store


def tokens(text: str) -> list[str]:
    return [t.casefold() for t in _WORD.findall(text)]


def bm25(rows: Iterable[Record], query: str, kind: str | None = None,
         limit: int = 10) -> list[tuple[Record, float]]:
    """Active rows (of `kind`, if given) whose text holds a word of `query`, best first by BM25
    (higher is better), ties by LSN."""
    terms = list(dict.fromkeys(tokens(query)))[:MAX_QUERY_TOKENS]
    if not terms or limit <= 0:
        return []
    docs = [(r, Counter(tokens(r.text))) for r in rows
            if r.state == "active" and r.text and (kind is None or r.kind == kind)]
    if not docs:
        return []
    n = len(docs)
    avg = sum(sum(c.values()) for _, c in docs) / n or 1.0
    df = {t: sum(1 for _, c in docs if t in c) for t in terms}
    idf = {t: max(math.log((n - d + 0.5) / (d + 0.5)), 1e-6) for t, d in df.items()}  # FTS5's floor
    hits = []
    for r, c in docs:
        length = sum(c.values())
        score = sum(idf[t] * c[t] * (K1 + 1) / (c[t] + K1 * (1 - B + B * length / avg)) for t in terms if t in c)
        if score > 0:
            hits.append((r, score))
    hits.sort(key=lambda h: (-h[1], h[0].lsn))
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
