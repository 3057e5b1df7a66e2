"""Exact block memory: store the K/V of blocks read in a chain, load them back fail-closed.

A chain starts at the sinks (stored once per model identity under the system tenant) and each
block is read after the previous one at the next seats; its fingerprint binds (identity, tenant,
parent fingerprint, bytes, token ids), and its catalog row keeps its text and token ids.

Matching is by exact bytes: a prompt walks the chain from the sinks, taking at each step the
stored child whose text is a byte prefix of what is left of the prompt and whose (bytes, ids)
fingerprint to its key; only what follows the last matched block is tokenized. So a document
followed by anything ("...end.\n" + "\n\nQuestion: ...") hits all of its blocks, whatever the
tokenizer would have merged across the boundary; the cold reference for bit-identity is the same
segmented token sequence (blocks' ids, then the rest's). A matched block is served only if every
check passes: catalog digest (the store re-hashes the payload), the payload's bound identity,
tenant, fingerprint, seat, text and token ids, and tensor geometry. The first check that fails
ends the walk: that block and everything after it are recomputed (with the same token ids).
The blocks of a walk are loaded in parallel, straight into their place on the model's device
(grm/exact/load.py); a runtime with a host tier (grm/exact/tier.py) serves repeated blocks from
RAM, verified when they were read.

Surface for the other planes: `sinks()`, `put_block()` (bind + store one block's K/V),
`load_verified()` (one record, counted as a hit or a miss), `load_prefix()` / `match()`, `ingest()`,
and `stats()`; nothing else reaches into its counters.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass, field
from typing import Callable

from grm.dialects import Dialect
from grm.exact.blocks import Block, split_blocks
from grm.exact.fingerprint import fingerprint
from grm.exact.load import READ, TIER, BlockRead, load_blocks, parse_checked, read_workers
from grm.exact.tier import HostTier, TierKey
from grm.kv import KV, cache_from_kv, kv_from_cache, new_cache
from grm.kv.device import pinned, room
from grm.kv.forward import prefill
from grm.kv.place import HostBuffers, placement_for
from grm.models import LoadedModel
from grm.route.dense import QueryKeys
from grm.store import Record
from grm.store.tenant import SYSTEM_TENANT
from grm.store.backend import StoreBackend
from grm.store.kinds import BLOCK, DOCUMENT, SINKS

MAX_CHAIN = 4096  # blocks one prompt may match (bounds the walk down the chain tree)
log = logging.getLogger("grm.exact")


@dataclass(frozen=True)
class ExactConfig:
    block_tokens: int = 512  # token budget of one block
    window_reserve: int = 256  # seats kept free at the end of the window for a question
    read_workers: int | None = None  # threads reading + verifying blocks of one load; None = every core

    def __post_init__(self) -> None:
        if self.block_tokens < 8:
            raise ValueError("block_tokens must be >= 8")


@dataclass
class Prefix:
    """What memory served of a prompt: the K/V of sinks + matched blocks, and what it covers."""

    kv: KV
    sink_tokens: int
    block_tokens: int  # tokens of matched blocks
    matched_bytes: int  # bytes of the prompt covered by matched blocks (served or pending)
    blocks: list[Record] = field(default_factory=list)
    misses: int = 0  # candidate blocks that failed a check (recomputed)
    last_id: int = 0  # the last token id the prefix covers
    # Blocks the prompt matched by bytes after the first one that failed a check: recomputed one
    # block per forward call, as at ingest, so the result is bit-identical to a clean load.
    pending: list[Block] = field(default_factory=list)
    matched_tokens: int = 0  # tokens of matched blocks (served or pending)
    rest: str = ""  # the prompt's text after the matched blocks, tokenized on its own
    seconds: dict[str, float] = field(default_factory=dict)  # where the load's time went (grm/exact/load.py)
    # The load's K/V that `kv` is the first seats of, with room after them: lent to the one arena
    # built over `kv` (grm/kv/device.py `mount`), which reads the rest of the prompt into it in
    # place; `kv` is not read once that arena is written to.
    full: KV | None = None

    @property
    def tokens(self) -> int:
        return self.sink_tokens + self.block_tokens


@dataclass
class IngestResult:
    name: str
    blocks: int  # distinct blocks the document is stored as (chain blocks and sections: a block both share counts once)
    computed: int  # of those, computed now (0 when everything was already stored); the rest were found stored
    tokens: int
    truncated_bytes: int = 0  # bytes past the model's window, not stored as chain blocks
    keys: list[str] = field(default_factory=list)  # the blocks' fingerprints, in document order


class ExactMemory:
    def __init__(self, store: StoreBackend, lm: LoadedModel, dialect: Dialect, tenant: str, config: ExactConfig,
                 tier: HostTier | None = None, buffers: HostBuffers | None = None) -> None:
        self.store, self.lm, self.dialect, self.tenant, self.config = store, lm, dialect, tenant, config
        self.tier = tier  # verified blocks kept in host RAM (shared by a runtime's tenants), or None
        self.buffers = buffers if buffers is not None else HostBuffers()  # host memory loads reuse
        self.workers = read_workers(config.read_workers)
        self._sinks: KV | None = None
        self.sink_ids = list(lm.tokenizer.sink_ids)
        self.sink_fp = fingerprint(lm.identity, SYSTEM_TENANT, "", b"", self.sink_ids)
        self.query_keys = QueryKeys()  # routing keys of recent queries, shared by sections and grafts
        self.counters = {"block_hits": 0, "block_misses": 0, "sink_recomputes": 0, "scatter_loads": 0,
                         "tier_hits": 0, "tiered_reads": 0}  # rows moved down by the tiering policy, read as text
        self._warned: set[str] = set()  # records already logged as misses (count every time, log once)

    # ----- sinks -------------------------------------------------------------------------------
    def sinks(self) -> KV:
        """K/V of the sinks: from RAM, else from the store (verified), else computed and stored."""
        if self._sinks is None:
            rec = self.store.get(SYSTEM_TENANT, SINKS, self.sink_fp)
            kv = self.verified(rec, SYSTEM_TENANT, self.sink_fp, "", 0, self.sink_ids) if rec else None
            if kv is None:
                self.counters["sink_recomputes"] += 1
                cache = new_cache()
                prefill(self.lm.model, cache, self.sink_ids, 0)
                kv = kv_from_cache(cache)
                meta = self.bind(SYSTEM_TENANT, self.sink_fp, "", 0, "", self.sink_ids)
                self.store.put(SYSTEM_TENANT, SINKS, self.sink_fp, meta={"seat": 0, "tokens": len(self.sink_ids)},
                               payload=kv.to_bytes(meta))
            self._sinks = kv
        return self._sinks

    def stats(self) -> dict[str, int]:
        """Hit/miss accounting: blocks served, blocks that failed a check, sinks recomputed, scatter loads."""
        return dict(self.counters)

    # ----- binding and verification ------------------------------------------------------------
    def put_block(self, kv: KV, fp: str, parent: str, seat: int, text: str, ids: list[int],
                  meta: dict | None = None) -> None:
        """Store one block's K/V bound to (identity, tenant, fingerprint, parent, seat, text, ids);
        its catalog row keeps the text and token ids that byte-exact matching needs."""
        bound = self.bind(self.tenant, fp, parent, seat, text, ids)
        self.store.put(self.tenant, BLOCK, fp, parent=parent, text=text, payload=kv.to_bytes(bound),
                       meta={"seat": seat, "tokens": len(ids), "ids": list(ids), **(meta or {})})

    def load_verified(self, rec: Record, parent: str, seat: int, ids: list[int], text: str) -> KV | None:
        """One stored block of this tenant, served only if every check passes (from the host tier
        when it holds it, verified when it was read); counted as a hit or a miss (a miss is
        logged once per record)."""
        key = self._tier_key(rec, parent, seat)
        cached = self.tier is not None and rec.state == "active" and rec.payload is not None
        kv = self.tier.get(key) if cached else None
        if kv is not None:
            self.counters["tier_hits"] += 1
        else:
            kv = self.verified(rec, self.tenant, rec.key, parent, seat, ids, text)
            if kv is not None and cached:
                self.tier.put(key, pinned(KV(kv.keys.contiguous(), kv.values.contiguous())))
        if kv is not None:
            self.counters["block_hits"] += 1
        return kv

    def bind(self, tenant: str, fp: str, parent: str, seat: int, text: str, ids: list[int]) -> dict[str, str]:
        return {
            "identity": self.lm.identity, "tenant": tenant, "fingerprint": fp, "parent": parent,
            "seat": str(seat), "text": text, "ids": json.dumps(list(ids)),
        }

    def verified(self, rec: Record, tenant: str, fp: str, parent: str, seat: int, ids: list[int],
                 text: str = "") -> KV | None:
        """The record's K/V if every binding checks out, else None (a miss, logged once). A row the
        tiering policy moved down on purpose (no payload, meta "tier") is None without a warning:
        its text is read, or its archived copy mounted (grm/archive/policy.py)."""
        if rec.payload is None and rec.meta.get("tier") in ("archive", "text"):
            self.counters["tiered_reads"] += 1
            return None
        data = self.store.read_payload(rec)
        if data is None:
            return self._miss(rec, "payload missing or digest mismatch")
        d = self.dialect
        kv, why = parse_checked(data, self.bind(tenant, fp, parent, seat, text, ids),
                                (d.n_layers, d.kv_heads, len(ids), d.head_dim), self.lm.model.dtype)
        return kv if kv is not None else self._miss(rec, why)

    def count_miss(self) -> None:
        """A record that could not be served and was not seen by `verified` (e.g. a fingerprint
        that does not match its key): counted as a miss."""
        self.counters["block_misses"] += 1

    def _miss(self, rec: Record, why: str) -> None:
        self.counters["block_misses"] += 1
        if rec.key not in self._warned:
            self._warned.add(rec.key)
            log.warning("memory record %s/%s not served (%s); recomputing", rec.kind, rec.key[:16], why)
        return None

    # ----- ingest ------------------------------------------------------------------------------
    def ingest(self, text: str, name: str, progress: Callable[[int], None] | None = None,
               document: bool = True, first: int | None = None) -> IngestResult:
        """Store the chain blocks of `text` (idempotent; resumes where a killed ingest stopped), and
        the document record unless `document` is False (the caller writes it). `first`: store only
        the first N blocks (the `seen` layout: a prompt that reads the document stores the rest,
        `continuation`); the result still names every planned block."""
        sinks = self.sinks()
        limit = self.dialect.max_positions - self.config.window_reserve - sinks.tokens
        blocks, fps, truncated = self._plan(text, limit)
        todo = len(fps) if first is None else min(first, len(fps))
        missing = next((i for i, fp in enumerate(fps[:todo]) if not self.stored(fp)), todo)
        computed = 0
        if missing < todo:
            # Rebuild the cache up to the first missing block from memory, then compute the rest.
            prefix = self._walk(blocks[:missing], fps[:missing])
            cache = cache_from_kv(prefix.kv)
            start = len(prefix.blocks)
            if progress:
                progress(start)
            seat = prefix.tokens
            for i in range(start, todo):
                block, fp = blocks[i], fps[i]
                parent = fps[i - 1] if i else self.sink_fp
                prefill(self.lm.model, cache, list(block.ids), seat)
                kv = kv_from_cache(cache, seat, seat + len(block.ids))
                self.put_block(kv, fp, parent, seat, block.text, list(block.ids),
                               {"doc": name, "index": i, "layout": "chain"})
                seat += len(block.ids)
                computed += 1
                if progress:
                    progress(1)
        elif progress:
            progress(todo)
        if document:
            self.put_document(text, name, "chain", fps)
        return IngestResult(name, len(blocks), computed, sum(len(b.ids) for b in blocks), truncated, fps)

    def put_document(self, text: str, name: str, layout: str, blocks: list[str],
                     sections: list[str] | None = None) -> None:
        """The document itself, byte-exact, naming its chain blocks and/or sections (the one place
        a document record is written, so a `both` ingest lists both)."""
        data = text.encode()
        meta = {"name": name, "layout": layout, "blocks": blocks, "bytes": len(data)}
        if sections is not None:
            meta["sections"] = sections
        self.store.put(self.tenant, DOCUMENT, hashlib.sha256(data).hexdigest(), payload=data, meta=meta)

    def continuation(self, prompt: str, matched: tuple[list[Block], list[str], int]
                     ) -> tuple[tuple[list[Block], list[str], int], list[tuple[Block, str, dict]]]:
        """A `seen` document's chain for a prompt that starts with it: (the path to load: its
        stored leading chain blocks where they and the planned blocks the prompt goes on with cover
        at least the bytes `matched` covers, else `matched` itself; the planned blocks after them,
        not yet stored, that the prompt goes on with, each as (block, key, meta to store it with)).
        Reading and storing those as ingest would makes the next such prompt hit the whole
        document. The stored path replaces the match where a section tied with the chain's first
        block (same text, other token ids: a section is tokenized alone) and was matched instead.
        Found by the document rows' planned keys, a document only where the prompt starts with
        its stored first chain block's text (one row read for any other document); the blocks are
        re-planned from the document's verified text and used only if they fingerprint to the
        planned keys."""
        if not matched[1]:
            return matched, []
        data = prompt.encode()
        limit = self.dialect.max_positions - self.config.window_reserve - len(self.sink_ids)
        for doc in self.store.records(self.tenant, DOCUMENT):
            planned = doc.meta.get("blocks")
            if doc.state != "active" or doc.meta.get("layout") != "seen" or not isinstance(planned, list):
                continue
            first = self._text_of(planned[0]) if planned else None
            if first is None or not prompt.startswith(first):
                continue  # another document (or its first block is gone): the prompt does not start with it
            k = next((i for i, key in enumerate(planned) if not self.stored(key)), len(planned))
            if k == 0 or k == len(planned) or (planned[:len(matched[1])] != matched[1] and k < len(matched[1])):
                continue  # nothing stored, nothing left to store, or another path
            raw = self.store.read_payload(doc)
            if raw is None:
                continue
            blocks, keys, _ = self._plan(raw.decode("utf-8"), limit)
            if keys != planned:  # planned under another block size: not this runtime's chain
                continue
            pos = 0
            for i in range(k):
                piece = blocks[i].text.encode()
                if not data.startswith(piece, pos):
                    break
                pos += len(piece)
            else:
                covered, out = pos, []
                for i in range(k, len(blocks)):
                    piece = blocks[i].text.encode()
                    if not data.startswith(piece, pos):
                        break
                    out.append((blocks[i], keys[i], {"doc": doc.meta.get("name", ""), "index": i, "layout": "chain"}))
                    pos += len(piece)
                if pos < matched[2]:  # the match (a longer first section) covers more than the chain would
                    continue
                # the chain, stored and to store, covers at least what was matched: load its stored part
                # (a section longer than the first block then costs its extra tokens once, on this prompt)
                return (blocks[:k], keys[:k], covered), out
        return matched, []

    def _text_of(self, key: str) -> str | None:
        """The text of this tenant's stored block `key` (None: not stored)."""
        rec = self.store.get(self.tenant, BLOCK, key)
        return None if rec is None else rec.text

    def chain_fingerprint(self, parent: str, text: str, ids: list[int]) -> str:
        """The key of a block of this tenant read after `parent` (a block key or the sinks')."""
        return fingerprint(self.lm.identity, self.tenant, parent, text.encode(), list(ids))

    def stored(self, fp: str) -> bool:
        """Whether block `fp` is stored in a form byte-exact matching can serve (its row keeps its
        token ids; rows written before they were kept are recomputed and rewritten) and is not
        marked damaged (re-ingest recomputes a damaged block, and the write heals it)."""
        rec = self.store.get(self.tenant, BLOCK, fp)
        return rec is not None and isinstance(rec.meta.get("ids"), list) and not self.store.is_damaged(rec)

    def plan_blocks(self, text: str) -> int:
        """How many blocks `text` becomes (for progress bars)."""
        return len(self.plan_keys(text))

    def plan_keys(self, text: str) -> list[str]:
        """The keys of the chain blocks `ingest` stores for `text`, in order (stored or not)."""
        limit = self.dialect.max_positions - self.config.window_reserve - len(self.sink_ids)
        return self._plan(text, limit)[1]

    def _plan(self, text: str, limit: int) -> tuple[list[Block], list[str], int]:
        blocks: list[Block] = []
        fps: list[str] = []
        used = 0
        parent = self.sink_fp
        all_blocks = split_blocks(text, self.lm.tokenizer, self.config.block_tokens)
        for block in all_blocks:
            if used + len(block.ids) > limit:
                break
            fp = fingerprint(self.lm.identity, self.tenant, parent, block.text.encode(), list(block.ids))
            blocks.append(block)
            fps.append(fp)
            used += len(block.ids)
            parent = fp
        truncated = sum(len(b.text.encode()) for b in all_blocks[len(blocks):])
        return blocks, fps, truncated

    # ----- serving -----------------------------------------------------------------------------
    def _walk(self, blocks: list[Block], fps: list[str]) -> Prefix:
        """Load known blocks in order until one fails a check (grm/exact/load.py: in parallel,
        straight into place, through the host tier when there is one)."""
        sinks = self.sinks()
        rows = [self.store.get(self.tenant, BLOCK, fp) for fp in fps]
        n = next((i for i, r in enumerate(rows) if r is None), len(rows))
        reads, seat = [], sinks.tokens
        for i in range(n):
            block, parent = blocks[i], fps[i - 1] if i else self.sink_fp
            want = self.bind(self.tenant, fps[i], parent, seat, block.text, list(block.ids))
            reads.append(BlockRead(rows[i], want, seat, seat + len(block.ids)))
            seat += len(block.ids)
        if not reads:  # nothing stored to load: the sinks as they are (moved to the device when first used)
            return Prefix(sinks, sinks.tokens, 0, 0, [], int(bool(rows)), self.sink_ids[-1])
        d, model = self.dialect, self.lm.model
        placement = placement_for(model.device, (d.n_layers, d.kv_heads, seat, d.head_dim), model.dtype,
                                  self.buffers, room(seat))
        loaded = load_blocks(self.store, reads, sinks, placement, self.tier,
                             lambda r: self._tier_key(r.record, r.want["parent"], r.t0),
                             lambda r: (d.n_layers, d.kv_heads, r.t1 - r.t0, d.head_dim), model.dtype,
                             self.workers)
        self.counters["scatter_loads"] += loaded.ways[READ]
        self.counters["tier_hits"] += loaded.ways[TIER]
        misses = 0
        if loaded.failure is not None:
            misses = 1
            self._miss(reads[loaded.failure[0]].record, loaded.failure[1])
        elif n < len(rows):
            misses = 1  # matched in the catalog, gone by the time it was read
        served = blocks[: loaded.served]
        covered = sum(len(b.text.encode()) for b in served)
        last_id = served[-1].ids[-1] if served else self.sink_ids[-1]
        return Prefix(loaded.kv, sinks.tokens, loaded.kv.tokens - sinks.tokens, covered,
                      list(rows[: loaded.served]), misses, last_id, seconds=loaded.seconds, full=loaded.full)

    def _tier_key(self, rec: Record, parent: str, seat: int) -> TierKey:
        """What names a block's verified K/V in the host tier: its row's payload and its binding."""
        return TierKey(self.tenant, rec.key, rec.payload or "", rec.payload_size, parent, seat)

    def match(self, prompt: str) -> tuple[list[Block], list[str], int]:
        """Stored chain blocks the prompt starts with, found in the catalog (nothing loaded):
        (blocks with their stored token ids, fingerprints, bytes covered). A block matches where
        the prompt's bytes at that point start with its text and (parent, text, ids) fingerprint to
        its key. Of all matching paths down the chain tree (a section and a chain block may both
        start a prompt) the one covering the most bytes wins. The prompt is not tokenized."""
        data = prompt.encode()
        best: dict[str, tuple[int, list[tuple[Block, str]]]] = {}  # node -> (bytes, path) below it

        def below(parent: str, pos: int, depth: int) -> tuple[int, list[tuple[Block, str]]]:
            if parent in best:
                return best[parent]
            out: tuple[int, list[tuple[Block, str]]] = (0, [])
            if pos < len(data) and depth < MAX_CHAIN:
                for rec in self.store.children(self.tenant, BLOCK, parent):
                    piece = rec.text.encode() if rec.text else b""
                    if not piece or not data.startswith(piece, pos):
                        continue
                    ids = rec.meta.get("ids")
                    if not isinstance(ids, list) or not ids or not all(isinstance(t, int) for t in ids):
                        continue  # a row from before ids were kept: recomputed (and rewritten by ingest)
                    if fingerprint(self.lm.identity, self.tenant, parent, piece, ids) != rec.key:
                        continue
                    n, path = below(rec.key, pos + len(piece), depth + 1)
                    if len(piece) + n > out[0]:
                        out = (len(piece) + n, [(Block(rec.text, tuple(ids)), rec.key), *path])
            best[parent] = out
            return out

        covered, path = below(self.sink_fp, 0, 0)
        return [b for b, _ in path], [k for _, k in path], covered

    def load_prefix(self, prompt: str, matched: tuple[list[Block], list[str], int] | None = None) -> Prefix:
        """The longest run of stored blocks the prompt starts with, verified; `rest` is the text
        after the matched blocks (the caller tokenizes it alone). `matched`: `match(prompt)`'s
        result when the caller already has it (the catalog is walked once per prompt)."""
        blocks, fps, pos = self.match(prompt) if matched is None else matched
        prefix = self._walk(blocks, fps)
        prefix.pending = blocks[len(prefix.blocks):]
        prefix.matched_bytes = pos
        prefix.matched_tokens = sum(len(b.ids) for b in blocks)
        prefix.rest = prompt.encode()[pos:].decode("utf-8")  # blocks end on character boundaries
        self.counters["block_hits"] += len(prefix.blocks)
        return prefix
