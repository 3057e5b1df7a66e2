"""The tiering policy: keeps a store under its byte budget by moving cold K/V down the tiers
(exact -> archive -> text). grm/store/tiering.py says what the tiers are, measures them and plans
the moves; this module trains codebooks when it needs them and applies the moves, through the
StoreBackend interface only.

Lifecycle (who calls what, when):
1. A face (`grm tier`, `grm ingest --store-budget`, the server after a write, a chat after a turn)
   builds one `TieringPolicy(store, lm, dialect, budget)` per process, through the runtime
   (grm/runtime/tiering.py `Tiering`: the one place that builds and runs it); `uses` (a UseLog)
   counts mounts on the request path (`note_answer`), which the next run writes.
2. `due()` is a cheap check (the backend's stats, no row walk); `run()` applies, `run(dry_run=True)`
   says what would move and why and writes nothing. A long-lived process calls `run()` after a
   write, off the request path (the server queues it behind the requests on its one worker).
3. Codebooks: when a demotion is planned and the model has none in the store, they are trained
   once from the stored text if it holds at least `min_train_tokens` tokens; until then cold
   spans are dropped to text instead.

Where codebooks come from. One set per model identity (grm/archive/codebook_store.py, under the
system tenant) encodes every tenant's archived spans, as the plan moves every tenant's spans; so
it is trained on every tenant's stored text (its documents; a tenant without any: its grafts'
text), an equal share of `train_tokens` per tenant taken in turn, so no one tenant shapes the
codebooks everybody's archive is read with (a server under API keys used to train on its config
tenant alone, which held nothing: it archived nothing and dropped every span to text). The
trade-off: a centroid is a mean of thousands of K/V vectors of many tenants' text, so a tenant's
archived spans are decoded with statistics partly learned from other tenants' K/V. No API returns
codebooks, and nothing of one tenant's text is served to another; but statistics leak little, not
nothing (a k-means centroid of a small store can sit near one tenant's vectors). Per-tenant
codebooks would close that channel at a cost per tenant: minutes of training each on a CPU
(bench/results/tiering.md), their bytes stored per tenant, and no archive at all for a tenant
holding fewer than `min_train_tokens` tokens.

Crash safety: each move leaves the span servable after every write it makes (the crash tests in
tests/tier/test_crash.py cut the disk image after each one):
  demote  1. the archive record commits (ArchiveTier.archive, its own transaction): exact AND
             archived; 2. one put rewrites the row without its payload (tier "archive"). A crash
             between them leaves an exact span with an archive copy; the next run only drops it.
  evict   one transaction: the archive record deleted, the row marked tier "text".
  drop    one transaction: the row rewritten without payload (tier "text"), an archive copy deleted.
  gc      the payload files no row names any more go only after a checkpoint (grm/store/gc.py).
The text of every span stays in its row and its document, so a text-tier span is re-read.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from grm.archive.codebook_store import codebook_versions, save_codebooks
from grm.archive.salient import RULES
from grm.archive.tier import ArchiveConfig, ArchiveTier
from grm.errors import UserInputError
from grm.store.backend import StoreBackend
from grm.store.kinds import ARCHIVE, DOCUMENT, GRAFT
from grm.store.tiering import (Inventory, Move, TierConfig, UseLog, inventory, merged_uses, plan,
                               stored_budget)

log = logging.getLogger("grm.archive")
MAX_ROUNDS = 4  # plan -> apply rounds per run (a plan's demotion savings are estimates)
TRAIN_CHUNK = 512  # tokens of one tenant's text taken in its turn for the shared codebooks


@dataclass(frozen=True)
class PolicyConfig:
    keep_salient: str = "digits"  # salient tokens kept beside the codes (bench/results/archive_recall.md: 30/40 vs 0/40)
    salient_context: int = 4  # tokens either side of each salient one
    min_train_tokens: int = 4096  # stored text needed before codebooks are trained (k=256 wants 16 vectors each)
    train_tokens: int = 32768  # tokens of stored text the automatic codebooks are trained on, at most
    max_train: int = 20000  # vectors per codebook (bench/results/archive.md trained 51k by hand)
    k: int | None = None  # centroids per stage; None: 256, fewer for short text (grm/archive/train.py auto_k)
    iters: int = 15  # Lloyd rounds per k-means
    gc: bool = True  # remove the payload files moves leave behind (local store; after a checkpoint)

    def __post_init__(self) -> None:
        if self.keep_salient not in RULES:
            raise UserInputError(f"unknown keep-salient rule {self.keep_salient!r}: one of {', '.join(RULES)}")
        if self.salient_context < 0 or self.min_train_tokens < 16 or self.train_tokens < self.min_train_tokens:
            raise UserInputError("salient_context >= 0, min_train_tokens >= 16, train_tokens >= min_train_tokens")


@dataclass
class TierReport:
    dry_run: bool
    budget: int | None
    before: int = 0  # footprint bytes
    after: int = 0
    moves: list[dict] = field(default_factory=list)
    failed: list[dict] = field(default_factory=list)  # moves not made and why (the span stays where it was)
    trained: str | None = None  # codebook version trained by this run
    note: str = ""
    gc_freed: int = 0
    tiers: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        counts = {a: sum(m["action"] == a for m in self.moves) for a in ("demote", "evict", "drop")}
        return {"dry_run": self.dry_run, "budget": self.budget, "before_bytes": self.before,
                "after_bytes": self.after, "under_budget": self.budget is None or self.after <= self.budget,
                **counts, "trained_codebooks": self.trained, "gc_freed_bytes": self.gc_freed, "note": self.note,
                "tiers": self.tiers, "moves": self.moves, "failed": self.failed}


class TieringPolicy:
    """Keep `store` under its budget (see the module docstring). `budget` None: the budget stored
    by an earlier `--store-budget` (grm/store/tiering.py stored_budget), else nothing to do."""

    def __init__(self, store: StoreBackend, lm, dialect, budget: TierConfig | int | None = None,
                 config: PolicyConfig = PolicyConfig(), archive: ArchiveTier | None = None,
                 uses: UseLog | None = None) -> None:
        """`uses`: the process's UseLog, if the runtime already counts mounts in one."""
        self.store, self.lm, self.dialect, self.config = store, lm, dialect, config
        self._budget = TierConfig(budget) if isinstance(budget, int) else budget
        self.archive = archive or ArchiveTier(store, dialect, lm.identity, piece=lambda t: lm.tokenizer.decode([t]))
        self.uses = uses if uses is not None else UseLog()
        self._row_bytes: int | None = None  # the rows' share of the footprint, as the last walk measured it
        self._lock = threading.Lock()  # one run at a time

    @property
    def tier_config(self) -> TierConfig | None:
        if self._budget is not None:
            return self._budget
        stored = stored_budget(self.store)
        return TierConfig(stored) if stored else None

    def due(self) -> bool:
        """Whether the footprint passed the high-water mark: the backend's per-kind payload figures and
        log bytes, and the rows' bytes as the last walk of them measured (rows change slowly)."""
        cfg = self.tier_config
        if cfg is None:
            return False
        if self._row_bytes is None:
            self._row_bytes = inventory(self.store).row_bytes
        st = self.store.stats()
        used = sum(k.get("payload_bytes", 0) for t in st.get("tenants", {}).values() for k in t.values())
        return used + int(st.get("log_bytes", 0) or 0) + self._row_bytes > cfg.high_water * cfg.budget

    # ----- a run ---------------------------------------------------------------------------------
    def run(self, dry_run: bool = False, force: bool = False, pause: Callable[[], None] = lambda: None) -> TierReport:
        """`pause()` is called after each move and each training window: a long-lived process may
        serve others there (grm/serve/slices.py); each move leaves every span servable."""
        cfg = self.tier_config
        with self._lock:
            if not dry_run and self.uses.pending():
                self.uses.flush(self.store)
            inv = inventory(self.store)
            report = TierReport(dry_run, cfg.budget if cfg else None, inv.footprint, inv.footprint)
            if cfg is None:
                report.note = "no store budget: give --store-budget SIZE once (it is remembered)"
                report.tiers = inv.by_tier()
                return report
            for _ in range(1 if dry_run else MAX_ROUNDS):
                moves = self._plan(inv, cfg, report, force, pause)
                if not moves:
                    break
                if dry_run:
                    report.moves = [m.to_json() for m in moves]
                    report.after = inv.footprint - sum(m.saves for m in moves)
                    break
                for move in moves:
                    self._apply(move, report)
                    pause()
                inv = inventory(self.store)
                force = False
                if inv.footprint <= cfg.low_water * cfg.budget:
                    break
            if not dry_run and report.moves and self.config.gc:
                report.gc_freed = self._collect()
                inv = inventory(self.store)
            if not dry_run:
                report.after = inv.footprint
            report.tiers = inv.by_tier()
            self._row_bytes = inv.row_bytes
            if not dry_run and report.after > cfg.budget:
                report.note = (f"still over budget: {report.after} bytes kept (documents, facts, codebooks and "
                               "the log are never moved)")
        return report

    def _plan(self, inv: Inventory, cfg: TierConfig, report: TierReport, force: bool,
              pause: Callable[[], None]) -> list[Move]:
        uses = merged_uses(self.store, inv)
        last = self.store.last_lsn
        have = codebook_versions(self.store, self.lm.identity)
        moves = plan(inv, uses, cfg, last_lsn=last, can_archive=None, archive_fraction=self._fraction(), force=force)
        if have or not any(m.action == "demote" for m in moves):
            return moves
        text, tokens = self._training_text()
        if tokens < self.config.min_train_tokens:
            why = f"no codebooks yet: {tokens} tokens of stored text, {self.config.min_train_tokens} needed to train"
        elif report.dry_run:
            report.note = f"codebooks would be trained first, on {tokens} tokens of stored text"
            return moves
        else:
            report.trained = self._train(text, pause)
            return moves
        return plan(inv, uses, cfg, last_lsn=last, can_archive=why, force=force)

    def _fraction(self) -> float | None:
        """archive/exact payload bytes measured on the archive records stored so far (None: none)."""
        exact = arch = 0
        for r in self.store.records(None, ARCHIVE):
            if r.state == "active" and r.meta.get("exact_bytes"):
                exact += int(r.meta["exact_bytes"])
                arch += r.payload_size
        return arch / exact if exact and arch else None

    def _training_text(self) -> tuple[str, int]:
        """(text, tokens) to train the shared codebooks on: every tenant's stored text (the module
        docstring), TRAIN_CHUNK tokens of each tenant in turn until `train_tokens`."""
        texts: dict[str, list[str]] = {}
        for r in sorted(self.store.records(None, DOCUMENT), key=lambda r: r.lsn):
            if r.state == "active" and (d := self.store.read_payload(r)) is not None:
                texts.setdefault(r.tenant, []).append(d.decode("utf-8", "replace"))
        chats: dict[str, list[str]] = {}  # a tenant without documents: its grafts' text (chat turns, facts)
        for r in sorted(self.store.records(None, GRAFT), key=lambda r: r.lsn):
            if r.tenant not in texts and r.state == "active" and r.text:
                chats.setdefault(r.tenant, []).append(r.text)
        tok = self.lm.tokenizer
        queues = [tok.encode("\n\n".join(parts)) for _, parts in sorted({**texts, **chats}.items())]
        chunks: list[list[int]] = []
        taken, start = 0, 0
        while taken < self.config.train_tokens and any(len(q) > start for q in queues):
            for q in queues:
                piece = q[start:start + TRAIN_CHUNK][: self.config.train_tokens - taken]
                if piece:
                    chunks.append(piece)
                    taken += len(piece)
            start += TRAIN_CHUNK
        return "\n\n".join(tok.decode(c) for c in chunks), taken

    def _train(self, text: str, pause: Callable[[], None]) -> str:
        import torch

        from grm.archive.train import TrainConfig, train_codebooks

        with torch.no_grad():
            books = train_codebooks(self.lm, self.dialect, text, TrainConfig(
                k=self.config.k, iters=self.config.iters, max_train=self.config.max_train),
                progress=lambda done, total: pause())
        save_codebooks(self.store, books)
        log.info("tiering: trained codebooks %s for %s", books.version, self.lm.name)
        return books.version

    # ----- one move ------------------------------------------------------------------------------
    def _apply(self, move: Move, report: TierReport) -> None:
        s = move.span
        try:
            if move.action == "demote":
                done = self._demote(s.tenant, s.kind, s.key)
            elif move.action == "evict":
                done = self._evict(s.tenant, s.kind, s.key)
            else:
                done = self._drop(s.tenant, s.kind, s.key)
        except UserInputError as exc:  # codebooks of another geometry, ...: the span stays where it is
            done = str(exc)
        if done is True:
            report.moves.append(move.to_json())
        elif isinstance(done, str) and move.action == "demote" and self._drop(s.tenant, s.kind, s.key) is True:
            report.moves.append({**move.to_json(), "action": "drop", "to": "text", "why": f"{move.why}; not archived: {done}"})
        else:
            report.failed.append({**move.to_json(), "failed": done})

    def _demote(self, tenant: str, kind: str, key: str) -> bool | str:
        rec = self.store.get(tenant, kind, key)
        if rec is None or rec.state != "active" or rec.payload is None:
            return "no exact payload any more"
        versions = codebook_versions(self.store, self.lm.identity)
        books = self.archive.codebooks(versions[-1]) if versions else None
        if books is None:
            return "no codebooks of this model"
        cfg = ArchiveConfig(keep_salient=self.config.keep_salient, salient_context=self.config.salient_context)
        out = self.archive.archive(rec, books, cfg)  # step 1: the archive record commits (exact stays)
        if isinstance(out, str) and not out.startswith("already archived"):
            return out
        meta = {**rec.meta, "tier": "archive", "tier_born": int(rec.meta.get("tier_born", rec.lsn))}
        if kind == GRAFT:
            meta["archived"] = books.version
        # step 2: the exact payload goes (its file is collected after a checkpoint)
        self.store.put(tenant, kind, key, meta=meta, payload=None, parent=rec.parent, text=rec.text, state=rec.state)
        return True

    def _evict(self, tenant: str, kind: str, key: str) -> bool | str:
        rec, arc = self.store.get(tenant, kind, key), self.store.get(tenant, ARCHIVE, key)
        if arc is None:
            return "no archive record"
        if rec is not None and rec.payload is not None:
            return "holds exact K/V again"
        with self.store.transaction() as txn:
            txn.delete(tenant, ARCHIVE, key)
            if rec is not None:
                meta = {k: v for k, v in rec.meta.items() if k != "archived"}
                txn.put(tenant, kind, key, meta={**meta, "tier": "text",
                                                 "tier_born": int(rec.meta.get("tier_born", rec.lsn))},
                        payload=None, parent=rec.parent, text=rec.text, state=rec.state)
        return True

    def _drop(self, tenant: str, kind: str, key: str) -> bool | str:
        rec = self.store.get(tenant, kind, key)
        if rec is None or rec.state != "active":
            return "no such span"
        arc = self.store.get(tenant, ARCHIVE, key)
        with self.store.transaction() as txn:
            meta = {k: v for k, v in rec.meta.items() if k != "archived"}
            txn.put(tenant, kind, key, meta={**meta, "tier": "text", "tier_born": int(rec.meta.get("tier_born", rec.lsn))},
                    payload=None, parent=rec.parent, text=rec.text, state=rec.state)
            if arc is not None:
                txn.delete(tenant, ARCHIVE, key)
        return True

    def _collect(self) -> int:
        """Remove the payload files the moves orphaned (a local store; Redis has no files to collect)."""
        from grm.store.gc import collect

        try:
            return collect(self.store, retain_writes=None, compact=True).bytes_freed
        except UserInputError:
            return 0
