"""Tiers of stored K/V and the store's byte budget: what is where, what it costs, what moves next.
Rows only (no torch, no payload reads): `grm stats` and `grm tier --dry-run` use it without a model;
grm/archive/policy.py applies the moves it plans.

Tiers of a span (a block, or a graft that holds its own K/V):
  exact    its row names its exact payload (a bit-identical mount)
  archive  its exact payload is gone and an active archive record of the same key holds its RVQ
           codes (a lossy mount, grm/archive/tier.py)
  text     neither: the row keeps its text and token ids, and a mount re-reads them (recomputed)
Never moved ("kept"): fact grafts, documents (the byte-exact text every re-read comes from), the
sinks, codebooks, the policy plane's rows. A graft that shares a block's payload follows its block.

Rows of kind TIERING:
  (_system, tiering, "budget")  meta {"budget": bytes}: the budget last given (`--store-budget`);
                                a later run that gives none keeps the store under it.
  (tenant, tiering, "uses")     meta {"uses": {key: [mounts, last LSN]}}: mounts counted in memory
                                by `UseLog` on the request path, written by the policy off it.

Moves (each leaves the span servable at every step; grm/archive/policy.py says how):
  demote  exact -> archive (spans a mount path serves from the archive: sections, grafts)
  evict   archive -> text
  drop    exact -> text (chain blocks past the first, which exact mode re-reads to stay
          bit-identical, and every span while no codebooks exist)
A moved row keeps `tier_born`, its LSN before its first move, so a rewrite does not make it hot.

Heat (coldest moves first, as LRU/LFU cache tiers do): touch = max(born LSN, last mount LSN);
heat = touch + use_weight * min(mounts, use_cap): a mount is worth `use_weight` later writes.
Footprint = payload bytes the rows name (each payload once per tenant) + the log bytes the backend
reports + the rows themselves (text and meta JSON, ROW_COPIES times: the checkpoint holds each row
once, the SQLite catalog with its full-text index about 2.5 times; measured on a local store, 1.17 MB
of checkpoint and catalog for 340 KB of rows). The policy acts above high_water x budget and moves
spans until under low_water x budget. bench/results/tiering.md sets it beside `du` of the folder.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field

from grm.errors import UserInputError
from grm.store.kinds import ARCHIVE, BLOCK, GRAFT, SINKS, TIERING
from grm.store.tenant import SYSTEM_TENANT

TIERS = ("exact", "archive", "text")
KEPT_GRAFT_KINDS = ("fact",)  # graft kinds never moved: a fact is the memory's ground truth
BUDGET_KEY, USES_KEY = "budget", "uses"
ROW_COPIES = 3.5  # disk bytes per byte of row (text + meta JSON): checkpoint 1x + catalog and its index ~2.5x
ROW_OVERHEAD = 64  # bytes of a row besides its text and meta (LSN, state, sizes, digests)
_UNITS = {"": 1, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?\s*$", re.IGNORECASE)


def parse_size(text: str) -> int:
    """'20GB', '500MB', '1.5GiB', '64k', '1000' -> bytes (K/M/G/T are powers of 1024, with or
    without B or iB). UserInputError names what was wrong."""
    m = _SIZE.match(text) if isinstance(text, str) else None
    if m is None:
        raise UserInputError(f"not a size: {text!r} (e.g. 500MB, 20GB, 1.5GiB, 65536)")
    value = int(float(m.group(1)) * _UNITS[m.group(2).lower()])
    if value < 1:
        raise UserInputError(f"a store budget must be at least 1 byte, got {text!r}")
    return value


@dataclass(frozen=True)
class TierConfig:
    budget: int  # bytes the store is kept under (footprint, see the module docstring)
    high_water: float = 0.9  # act once the footprint passes this share of the budget ...
    low_water: float = 0.75  # ... and move spans until it is under this share (room for the next writes)
    use_weight: int = 64  # later writes one mount is worth in heat
    use_cap: int = 16  # mounts counted at most (an old favourite cools down eventually)
    archive_fraction: float = 0.1  # archive/exact bytes assumed before the store has measured any

    def __post_init__(self) -> None:
        if not isinstance(self.budget, int) or isinstance(self.budget, bool) or self.budget < 1:
            raise UserInputError(f"the store budget must be a positive number of bytes, got {self.budget!r}")
        if not 0 < self.low_water <= self.high_water <= 1:
            raise UserInputError(f"need 0 < low_water <= high_water <= 1, got {self.low_water}, {self.high_water}")
        if self.use_weight < 0 or self.use_cap < 0 or not 0 < self.archive_fraction <= 1:
            raise UserInputError("use_weight and use_cap must be >= 0, archive_fraction in (0, 1]")


@dataclass(frozen=True)
class Span:
    tenant: str
    kind: str  # BLOCK or GRAFT: the row that holds (or held) the exact K/V
    key: str
    tier: str  # one of TIERS
    exact_bytes: int  # its exact payload (0 once gone)
    archive_bytes: int  # its archive record's payload (0 if none)
    doc: str  # the document (or chat session) it came from
    born: int  # LSN of the row before any move
    tokens: int
    archivable: bool  # a mount path serves it from the archive (a section block, a graft)
    identity: str | None  # the model it was computed by

    @property
    def bytes(self) -> int:
        return self.exact_bytes + self.archive_bytes


@dataclass
class Inventory:
    spans: list[Span] = field(default_factory=list)
    kept_bytes: int = 0  # payload bytes never moved: documents, facts, sinks, codebooks, ...
    log_bytes: int = 0
    row_bytes: int = 0  # the rows on disk (checkpoint, catalog), estimated: see ROW_COPIES
    alias: dict[tuple[str, str], str] = field(default_factory=dict)  # (tenant, graft id) -> block key it mounts

    @property
    def footprint(self) -> int:
        return sum(s.bytes for s in self.spans) + self.kept_bytes + self.log_bytes + self.row_bytes

    def by_tier(self, tenant: str | None = None) -> dict:
        out = {t: {"spans": 0, "tokens": 0, "bytes": 0} for t in TIERS}
        for s in self.spans:
            if tenant is not None and s.tenant != tenant:
                continue
            row = out[s.tier]
            row["spans"] += 1
            row["tokens"] += s.tokens
            row["bytes"] += s.bytes
        return out

    def by_doc(self, tenant: str | None = None) -> dict:
        out: dict[str, dict] = {}
        for s in self.spans:
            if tenant is not None and s.tenant != tenant:
                continue
            row = out.setdefault(s.doc, {"exact_bytes": 0, "archive_bytes": 0, **{t: 0 for t in TIERS}})
            row["exact_bytes"] += s.exact_bytes
            row["archive_bytes"] += s.archive_bytes
            row[s.tier] += 1
        return dict(sorted(out.items()))

    def to_json(self, tenant: str | None = None) -> dict:
        return {"footprint_bytes": self.footprint, "kept_bytes": self.kept_bytes, "log_bytes": self.log_bytes,
                "row_bytes": self.row_bytes,
                "tiers": self.by_tier(tenant), "documents": self.by_doc(tenant)}


def _doc(meta: dict) -> str:
    if meta.get("session"):
        return f"chat {meta['session']}"
    if meta.get("doc"):
        return str(meta["doc"])
    sources = meta.get("sources") or []
    return str(sources[0]) if sources else str(meta.get("kind") or "?")


def inventory(store) -> Inventory:
    """Every span of every tenant with its tier and bytes, from the rows alone."""
    every = list(store.records())
    rows = [r for r in every if r.state == "active"]
    sinks = {r.key for r in rows if r.kind == SINKS}
    archives = {(r.tenant, r.key): r for r in rows if r.kind == ARCHIVE}
    row_bytes = sum(len((r.text or "").encode()) + len(json.dumps(r.meta, separators=(",", ":")))
                    + len(r.key) + len(r.parent or "") + ROW_OVERHEAD for r in every)
    inv = Inventory(log_bytes=int(store.stats().get("log_bytes", 0) or 0), row_bytes=int(row_bytes * ROW_COPIES))
    counted: set[tuple[str, str]] = set()  # (tenant, payload digest): content-addressed within a tenant
    span_keys: set[tuple[str, str]] = set()

    def once(r) -> int:
        if r is None or r.payload is None or (r.tenant, r.payload) in counted:
            return 0
        counted.add((r.tenant, r.payload))
        return r.payload_size

    for r in rows:
        if r.kind == GRAFT and r.meta.get("block"):
            inv.alias[(r.tenant, r.key)] = str(r.meta["block"])
            continue  # shares its block's payload: follows its block
        spanned = r.kind == BLOCK or (r.kind == GRAFT and r.meta.get("kind") not in KEPT_GRAFT_KINDS)
        if not spanned:
            if r.kind != ARCHIVE:
                inv.kept_bytes += once(r)
            continue
        arc = archives.get((r.tenant, r.key))
        exact, archived = once(r), once(arc)
        tier = "exact" if r.payload is not None else "archive" if arc is not None else "text"
        archivable = r.kind == GRAFT or r.parent in sinks or r.meta.get("layout") == "sections"
        inv.spans.append(Span(r.tenant, r.kind, r.key, tier, exact, archived, _doc(r.meta),
                              int(r.meta.get("tier_born", r.lsn)), int(r.meta.get("tokens", 0) or 0),
                              bool(archivable), r.meta.get("identity")))
        span_keys.add((r.tenant, r.key))
    for (tenant, key), arc in archives.items():  # archived with the source row deleted (`archive demote --drop-exact`)
        if (tenant, key) not in span_keys:
            kind = str(arc.meta.get("source_kind", BLOCK))
            inv.spans.append(Span(tenant, kind, key, "archive", 0, once(arc), _doc(arc.meta),
                                  int(arc.meta.get("tier_born", arc.lsn)), int(arc.meta.get("tokens", 0) or 0),
                                  True, arc.meta.get("identity")))
    return inv


# ----- the budget and the use counts (rows of kind TIERING) -----------------------------------------
def stored_budget(store) -> int | None:
    rec = store.get(SYSTEM_TENANT, TIERING, BUDGET_KEY)
    value = rec.meta.get("budget") if rec is not None and rec.state == "active" else None
    return int(value) if isinstance(value, int) and value > 0 else None


def save_budget(store, budget: int) -> None:
    if stored_budget(store) != budget:
        store.put(SYSTEM_TENANT, TIERING, BUDGET_KEY, meta={"budget": int(budget)})


def load_uses(store, tenant: str) -> dict[str, list[int]]:
    rec = store.get(tenant, TIERING, USES_KEY)
    uses = rec.meta.get("uses") if rec is not None else None
    return {k: [int(v[0]), int(v[1])] for k, v in uses.items()} if isinstance(uses, dict) else {}


class UseLog:
    """Mounts counted in memory: `note` is a dict update per mounted id (cheap enough for the
    request path); `flush` writes them, one row per tenant, when the policy runs (off it)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: dict[str, dict[str, list[int]]] = {}

    def note(self, tenant: str, keys: Iterable[str], lsn: int) -> None:
        with self._lock:
            mine = self._pending.setdefault(tenant, {})
            for key in keys:
                row = mine.setdefault(key, [0, 0])
                row[0] += 1
                row[1] = max(row[1], int(lsn))

    def note_answer(self, tenant: str, answer: object, lsn: int) -> None:
        """Count what an Answer (grm/runtime/generate.py) names in `mounted`."""
        self.note(tenant, [m["id"] for m in getattr(answer, "mounted", None) or [] if m.get("id")], lsn)

    def pending(self) -> int:
        with self._lock:
            return sum(len(v) for v in self._pending.values())

    def flush(self, store) -> int:
        """Merge the counted mounts into each tenant's uses row; returns the ids written."""
        with self._lock:
            pending, self._pending = self._pending, {}
        n = 0
        for tenant, fresh in pending.items():
            uses = load_uses(store, tenant)
            for key, (count, lsn) in fresh.items():
                old = uses.get(key, [0, 0])
                uses[key] = [old[0] + count, max(old[1], lsn)]
                n += 1
            store.put(tenant, TIERING, USES_KEY, meta={"uses": uses})
        return n


# ----- planning ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Move:
    action: str  # demote | evict | drop
    span: Span
    saves: int  # bytes the footprint is expected to lose (an estimate for a demotion)
    why: str

    def to_json(self) -> dict:
        s = self.span
        return {"action": self.action, "tenant": s.tenant, "kind": s.kind, "key": s.key, "doc": s.doc,
                "from": s.tier, "to": "archive" if self.action == "demote" else "text", "tokens": s.tokens,
                "saves_bytes": self.saves, "why": self.why}


def heat(span: Span, uses: dict[tuple[str, str], list[int]], config: TierConfig) -> tuple[int, int, int]:
    count, last = uses.get((span.tenant, span.key), [0, 0])
    touch = max(span.born, last)
    return touch + config.use_weight * min(count, config.use_cap), touch, count


def merged_uses(store, inv: Inventory) -> dict[tuple[str, str], list[int]]:
    """(tenant, span key) -> [mounts, last LSN]: each tenant's uses row, a graft's mounts credited
    to the block it mounts."""
    out: dict[tuple[str, str], list[int]] = {}
    for tenant in sorted({s.tenant for s in inv.spans}):
        for key, (count, lsn) in load_uses(store, tenant).items():
            target = (tenant, inv.alias.get((tenant, key), key))
            row = out.setdefault(target, [0, 0])
            row[0] += count
            row[1] = max(row[1], lsn)
    return out


def plan(inv: Inventory, uses: dict[tuple[str, str], list[int]], config: TierConfig, *, last_lsn: int,
         can_archive: str | None, archive_fraction: float | None = None, force: bool = False) -> list[Move]:
    """The moves that bring the footprint under low_water x budget, coldest first: every cold exact
    span takes one step down (demote where a mount path serves the archive and codebooks exist
    (`can_archive` None) for this model, else drop), then archived spans are evicted to text. Empty
    while the footprint is under high_water x budget (unless `force`). `can_archive`: None, or why
    nothing can be archived now (said in each drop's `why`)."""
    footprint = inv.footprint
    if not force and footprint <= config.high_water * config.budget:
        return []
    need = footprint - int(config.low_water * config.budget)
    frac = archive_fraction or config.archive_fraction
    moves: list[Move] = []

    def why(span: Span, what: str) -> str:
        h, touch, count = heat(span, uses, config)
        return f"{what}; last touched {max(last_lsn - touch, 0)} writes ago, mounted {count}x"

    exact = sorted((s for s in inv.spans if s.tier == "exact"), key=lambda s: heat(s, uses, config))
    archived: list[tuple[Span, int]] = [(s, s.archive_bytes) for s in inv.spans if s.tier == "archive"]
    for s in exact:
        if need <= 0:
            break
        if s.archivable and can_archive is None:
            est = s.archive_bytes or int(s.exact_bytes * frac)
            saves = s.exact_bytes + s.archive_bytes - est
            moves.append(Move("demote", s, saves, why(s, "cold exact K/V")))
            archived.append((s, est))
        else:
            reason = ("a chain block: exact mode re-reads it bit-identically" if not s.archivable
                      else f"cold exact K/V, nothing to archive with ({can_archive})")
            saves = s.bytes
            moves.append(Move("drop", s, saves, why(s, reason)))
        need -= saves
    archived.sort(key=lambda p: heat(p[0], uses, config))
    for s, est in archived:
        if need <= 0:
            break
        moves.append(Move("evict", s, est, why(s, "archived and cold: re-read from its text when needed")))
        need -= est
    # a span demoted and then evicted by the same plan is dropped at once (no archive record written for nothing)
    evicted = {(m.span.tenant, m.span.key) for m in moves if m.action == "evict"}
    out = []
    for m in moves:
        key = (m.span.tenant, m.span.key)
        if m.action == "demote" and key in evicted:
            out.append(Move("drop", m.span, m.span.bytes, m.why + "; colder than the budget keeps even archived"))
        elif not (m.action == "evict" and m.span.tier == "exact"):
            out.append(m)
    return out
