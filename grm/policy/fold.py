"""Folding: old turns into digest nodes, digests into era nodes, with a fidelity gate.

A fold takes a window of source turns (id, text, created) and writes a digest whose text is
built deterministically from the sources (the facts the rule extractor finds, as canonical
sentences, then each turn's first sentence, within `digest_max_chars`), or by a `digester` the
caller supplies (e.g. a model summary). Before anything is written, the digest must prove it
kept the facts: coverage = |facts of the sources that the rule extractor finds again in the
digest| / |facts of the sources| (1.0 when the sources hold no facts). Below `min_coverage`
(0.70) the fold aborts; the abort is a record, so the same window is never retried.

An era is an index node over several digests: its text is their texts joined, never a summary of
a summary. Folded sources (turns, and digests under an era) are *retired*: the router skips them,
but they are kept, and `descend(node)` expands a digest or era to its source ids.

Store layout (one tenant):

    node        key d-<w> (digest) or e-<w> (era), w = 16 hex of SHA-256 over the JSON list of
                child ids; text = the digest / era text; meta {v, type, children, sources,
                coverage, facts, kept, created, digester}
    fold_abort  key w-<w>: meta {sources, coverage, facts, missing [sentences], at}
    retired     key = a source or digest id: meta {node, at}
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from grm.errors import UserInputError
from grm.policy.config import PolicyConfig
from grm.policy.extract import RuleExtractor, canonical, clauses
from grm.policy.fact import norm
from grm.store import kinds
from grm.store.backend import StoreBackend
from grm.store.record import canonical_json

NODE, ABORT, RETIRED = kinds.FOLD_NODE, kinds.FOLD_ABORT, kinds.RETIRED
KEY_SENTENCE_CHARS = 200  # a turn's first sentence is cut to this many characters in a digest


@dataclass(frozen=True)
class SourceTurn:
    id: str  # the turn's (graft's) id, as the caller names it
    text: str
    created: float


@dataclass(frozen=True)
class FoldResult:
    status: str  # folded | aborted | skipped
    node: str | None  # the digest or era written
    sources: tuple[str, ...]
    coverage: float | None = None
    missing: tuple[str, ...] = ()  # canonical sentences of the facts a digest lost
    reason: str = ""


@dataclass(frozen=True)
class Node:
    id: str
    type: str  # digest | era
    text: str
    children: tuple[str, ...]  # digest: source ids; era: digest ids
    sources: tuple[str, ...]  # the source turns below it, in order
    coverage: float | None
    created: float
    retired: bool  # folded into an era


Digester = Callable[[Sequence[SourceTurn]], str]
Fact3 = tuple[str, str, str]


def window_hash(ids: Sequence[str]) -> str:
    return hashlib.sha256(canonical_json(list(ids)).encode()).hexdigest()[:16]


def _turns(turns: Iterable[object]) -> list[SourceTurn]:
    out = []
    for t in turns:
        s = t if isinstance(t, SourceTurn) else SourceTurn(*t)  # type: ignore[misc]
        if not isinstance(s.id, str) or not s.id or not isinstance(s.text, str):
            raise UserInputError(f"a source turn needs a non-empty string id and a text, got {t!r}")
        out.append(s)
    if len({s.id for s in out}) != len(out):
        raise UserInputError("source turn ids repeat within one window")
    return out


class Folder:
    def __init__(self, store: StoreBackend, config: PolicyConfig) -> None:
        self.store = store
        self.config = config
        self.tenant = config.tenant
        self.rules = RuleExtractor()  # coverage is always measured with the deterministic rules

    # ---- facts and digests -------------------------------------------------------------------

    def facts_of(self, text: str, evidence_id: str, now: float) -> dict[Fact3, str]:
        """(subject, predicate, value) -> canonical sentence, for every claim the rules find."""
        return {(norm(p.subject), norm(p.predicate), norm(p.value)): canonical(p)
                for p in self.rules.propose(text, evidence_id, now)}

    def digest_text(self, sources: Sequence[SourceTurn], facts: dict[Fact3, str]) -> str:
        """The extractive digest: fact sentences first, then each turn's first sentence."""
        budget, lines, seen = self.config.digest_max_chars, [], set()
        candidates = list(facts.values())
        for s in sources:
            first = clauses(s.text)
            if first:
                candidates.append(first[0][:KEY_SENTENCE_CHARS].strip() + ".")
        used = 0
        for line in candidates:
            key = norm(line)
            if key in seen or used + len(line) + 1 > budget:
                continue
            seen.add(key)
            lines.append(line)
            used += len(line) + 1
        return "\n".join(lines)

    # ---- folds -------------------------------------------------------------------------------

    def fold(self, turns: Iterable[object], *, now: float, digester: Digester | None = None) -> FoldResult:
        """Fold one window of source turns into a digest, or abort (persisted) below the gate."""
        sources = _turns(turns)
        ids = tuple(s.id for s in sources)
        if not sources:
            raise UserInputError("a fold needs at least one source turn")
        w = window_hash(ids)
        if self.store.get(self.tenant, ABORT, f"w-{w}") is not None:
            return FoldResult("skipped", None, ids, reason="this window aborted before; not retried")
        if self.store.get(self.tenant, NODE, f"d-{w}") is not None:
            return FoldResult("skipped", f"d-{w}", ids, reason="this window is already folded")
        done = [i for i in ids if self.is_retired(i)]
        if done:
            return FoldResult("skipped", None, ids, reason=f"already folded: {', '.join(done)}")
        facts: dict[Fact3, str] = {}
        for s in sources:
            facts.update(self.facts_of(s.text, s.id, s.created))
        text = digester(sources) if digester is not None else self.digest_text(sources, facts)
        if not isinstance(text, str):
            raise UserInputError(f"a digester must return text, got {type(text).__name__}")
        kept = set(self.facts_of(text, f"d-{w}", now))
        coverage = len(kept & facts.keys()) / len(facts) if facts else 1.0
        missing = tuple(sentence for key, sentence in facts.items() if key not in kept)
        if coverage < self.config.min_coverage:
            self.store.put(self.tenant, ABORT, f"w-{w}", meta={
                "sources": list(ids), "coverage": coverage, "facts": len(facts), "missing": list(missing), "at": now})
            return FoldResult("aborted", None, ids, coverage, missing,
                              f"coverage {coverage:.2f} < {self.config.min_coverage:.2f}")
        meta = {"v": 1, "type": "digest", "children": list(ids), "sources": list(ids), "coverage": coverage,
                "facts": len(facts), "kept": len(kept & facts.keys()), "created": now,
                "digester": "extractive" if digester is None else getattr(digester, "__name__", "custom")}
        self._write(f"d-{w}", text, meta, ids, now)
        return FoldResult("folded", f"d-{w}", ids, coverage, missing)

    def fold_era(self, digest_ids: Sequence[str], *, now: float) -> FoldResult:
        """Index `digest_ids` (active, unretired digests) under one era node."""
        ids = tuple(digest_ids)
        if len(ids) < 2 or len(set(ids)) != len(ids):
            raise UserInputError("an era needs at least two distinct digests")
        nodes = [self.node(i) for i in ids]
        bad = [i for i, n in zip(ids, nodes) if n is None or n.type != "digest"]
        if bad:
            raise UserInputError(f"not digests: {', '.join(bad)}")
        done = [n.id for n in nodes if n.retired]
        if done:
            return FoldResult("skipped", None, ids, reason=f"already in an era: {', '.join(done)}")
        sources = tuple(s for n in nodes for s in n.sources)
        meta = {"v": 1, "type": "era", "children": list(ids), "sources": list(sources), "coverage": None,
                "facts": None, "kept": None, "created": now, "digester": None}
        key = f"e-{window_hash(ids)}"
        self._write(key, "\n".join(n.text for n in nodes), meta, ids, now)
        return FoldResult("folded", key, sources)

    def _write(self, key: str, text: str, meta: dict, retire: Sequence[str], now: float) -> None:
        with self.store.transaction() as txn:
            txn.put(self.tenant, NODE, key, text=text or None, meta=meta)
            for i in retire:
                txn.put(self.tenant, RETIRED, i, parent=key, meta={"node": key, "at": now})

    def plan(self, turns: Iterable[object]) -> list[list[SourceTurn]]:
        """The windows `fold_pending` would fold: `fold_window` unretired turns at a time, oldest
        first, leaving the newest `fold_keep_recent`; a window that aborted before is skipped
        (its turns stay unfolded and routable)."""
        all_turns = _turns(turns)
        cfg = self.config
        cut = len(all_turns) - cfg.fold_keep_recent
        todo = [s for s in all_turns[:max(cut, 0)] if not self.is_retired(s.id)]
        out = []
        for i in range(0, len(todo) - cfg.fold_window + 1, cfg.fold_window):
            w = todo[i:i + cfg.fold_window]
            if self.store.get(self.tenant, ABORT, f"w-{window_hash([s.id for s in w])}") is None:
                out.append(w)
        return out

    def fold_pending(self, turns: Iterable[object], *, now: float, digester: Digester | None = None) -> list[FoldResult]:
        """Fold every planned window, then index every `era_fanout` unretired digests as an era."""
        results = [self.fold(w, now=now, digester=digester) for w in self.plan(turns)]
        free = [n.id for n in self.nodes("digest") if not n.retired]
        k = self.config.era_fanout
        for i in range(0, len(free) - k + 1, k):
            results.append(self.fold_era(free[i:i + k], now=now))
        return results

    # ---- reads (the router's side) -----------------------------------------------------------

    def is_retired(self, item_id: str) -> bool:
        rec = self.store.get(self.tenant, RETIRED, item_id)
        return rec is not None and rec.state == "active"

    def retired(self) -> set[str]:
        """Ids the router should skip: folded source turns and digests indexed by an era."""
        return {r.key for r in self.store.records(self.tenant, RETIRED) if r.state == "active"}

    def folded_into(self, item_id: str) -> str | None:
        """The digest or era that folded `item_id`, or None."""
        rec = self.store.get(self.tenant, RETIRED, item_id)
        return rec.meta["node"] if rec is not None and rec.state == "active" else None

    def node(self, node_id: str) -> Node | None:
        rec = self.store.get(self.tenant, NODE, node_id)
        if rec is None:
            return None
        m = rec.meta
        return Node(rec.key, m["type"], rec.text or "", tuple(m["children"]), tuple(m["sources"]),
                    m.get("coverage"), float(m["created"]), self.is_retired(rec.key))

    def nodes(self, type: str | None = None) -> list[Node]:
        """Digests and eras, oldest first."""
        recs = sorted(self.store.records(self.tenant, NODE), key=lambda r: r.lsn)
        out = [self.node(r.key) for r in recs]
        return [n for n in out if n is not None and (type is None or n.type == type)]

    def aborts(self) -> list[dict]:
        return [dict(r.meta, id=r.key) for r in sorted(self.store.records(self.tenant, ABORT), key=lambda r: r.lsn)]

    def descend(self, node_id: str) -> list[str]:
        """The source turn ids under a digest or era (in order); [] for an unknown id."""
        node = self.node(node_id)
        return list(node.sources) if node is not None else []
