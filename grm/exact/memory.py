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

Surface for the other planes: `sinks()`, `put_block()` (bind + store one block's K/V),
`load_verified()` (one record, counted as a hit or a miss), `load_prefix()` / `match()`, `ingest()`,
and `stats()`; nothing else reaches into its counters.
"""

from __future__ import annotations

import hashlib
import json
import logging
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Callable

import torch

from grm.dialects import Dialect
from grm.exact.blocks import Block, split_blocks
from grm.exact.fingerprint import fingerprint
from grm.kv import KV, cache_from_kv, kv_from_cache, new_cache
from grm.kv.forward import prefill
from grm.models import LoadedModel
from grm.kv.payload import parse_header
from grm.store import Record
from grm.store.tenant import SYSTEM_TENANT
from grm.store.backend import ScatterReads, StoreBackend
from grm.store.kinds import BLOCK, DOCUMENT, SINKS

MAX_CHAIN = 4096  # blocks one prompt may match (bounds the walk down the chain tree)
READ_WORKERS = 2  # threads reading + hashing payloads of one prefix  # holds model-derived records only (the sinks); never user data
log = logging.getLogger("grm.exact")


@dataclass(frozen=True)
class ExactConfig:
    block_tokens: int = 512  # token budget of one block
    window_reserve: int = 256  # seats kept free at the end of the window for a question

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

    @property
    def tokens(self) -> int:
        return self.sink_tokens + self.block_tokens


@dataclass
class IngestResult:
    name: str
    blocks: int  # blocks of the document in the chain
    computed: int  # blocks computed now (0 when everything was already stored)
    tokens: int
    truncated_bytes: int = 0  # bytes past the model's window, not stored as chain blocks
    keys: list[str] = field(default_factory=list)  # the blocks' fingerprints, in document order


class ExactMemory:
    def __init__(self, store: StoreBackend, lm: LoadedModel, dialect: Dialect, tenant: str, config: ExactConfig) -> None:
        self.store, self.lm, self.dialect, self.tenant, self.config = store, lm, dialect, tenant, config
        self._sinks: KV | None = None
        self.sink_ids = list(lm.tokenizer.sink_ids)
        self.sink_fp = fingerprint(lm.identity, SYSTEM_TENANT, "", b"", self.sink_ids)
        self.counters = {"block_hits": 0, "block_misses": 0, "sink_recomputes": 0, "scatter_loads": 0,
                         "tiered_reads": 0}  # rows moved down by the tiering policy, read as text
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
        """One stored block of this tenant, served only if every check passes; counted as a hit or
        a miss (a miss is logged once per record)."""
        kv = self.verified(rec, self.tenant, rec.key, parent, seat, ids, text)
        if kv is not None:
            self.counters["block_hits"] += 1
        return kv

    def bind(self, tenant: str, fp: str, parent: str, seat: int, text: str, ids: list[int]) -> dict[str, str]:
        return {
            "identity": self.lm.identity, "tenant": tenant, "fingerprint": fp, "parent": parent,
            "seat": str(seat), "text": text, "ids": json.dumps(list(ids)),
        }

    def verified(self, rec: Record, tenant: str, fp: str, parent: str, seat: int, ids: list[int],
                 text: str = "", data: bytes | None = None) -> KV | None:
        """The record's K/V if every binding checks out, else None (a miss, logged once).
        `data`: the payload as the store's verified read returned it, if already read. A row the
        tiering policy moved down on purpose (no payload, meta "tier") is None without a warning:
        its text is read, or its archived copy mounted (grm/archive/policy.py)."""
        if rec.payload is None and rec.meta.get("tier") in ("archive", "text"):
            self.counters["tiered_reads"] += 1
            return None
        data = self.store.read_payload(rec) if data is None else data
        if data is None:
            return self._miss(rec, "payload missing or digest mismatch")
        try:
            kv, meta = KV.from_bytes(data)
        except (ValueError, KeyError, json.JSONDecodeError) as exc:
            return self._miss(rec, f"unreadable payload: {exc}")
        want = self.bind(tenant, fp, parent, seat, text, ids)
        for key, value in want.items():
            if meta.get(key) != value:
                return self._miss(rec, f"bound {key} does not match")
        d = self.dialect
        if tuple(kv.keys.shape) != (d.n_layers, d.kv_heads, len(ids), d.head_dim) or kv.keys.dtype != self.lm.model.dtype:
            return self._miss(rec, f"geometry {tuple(kv.keys.shape)} {kv.keys.dtype} does not fit the model")
        return kv

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
               document: bool = True) -> IngestResult:
        """Store the chain blocks of `text` (idempotent; resumes where a killed ingest stopped), and
        the document record unless `document` is False (the caller writes it)."""
        sinks = self.sinks()
        limit = self.dialect.max_positions - self.config.window_reserve - sinks.tokens
        blocks, fps, truncated = self._plan(text, limit)
        missing = next((i for i, fp in enumerate(fps) if not self.stored(fp)), len(fps))
        computed = 0
        if missing < len(fps):
            # Rebuild the cache up to the first missing block from memory, then compute the rest.
            prefix = self._walk(blocks[:missing], fps[:missing])
            cache = cache_from_kv(prefix.kv)
            start = len(prefix.blocks)
            if progress:
                progress(start)
            seat = prefix.tokens
            for i in range(start, len(blocks)):
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
            progress(len(blocks))
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
        limit = self.dialect.max_positions - self.config.window_reserve - len(self.sink_ids)
        return len(self._plan(text, limit)[0])

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
    def _walk_into(self, blocks: list[Block], fps: list[str], rows: list[Record | None], sinks: KV) -> Prefix | None:
        """The fast path of `_walk`: every stored block of the run is read straight into its place
        in one preallocated K/V (a scatter read per file: no intermediate bytes, no concatenation),
        each file's size and SHA-256 checked over what was read and its bound fields and geometry
        checked from its header before a byte of tensor data is read. None when any block does not
        verify this way (or the store cannot read so): `_walk` then decides, counts and logs."""
        n = next((i for i, r in enumerate(rows) if r is None), len(rows))
        if n == 0 or not isinstance(self.store, ScatterReads):
            return None
        d = self.dialect
        seats = [sinks.tokens]
        for b in blocks[:n]:
            seats.append(seats[-1] + len(b.ids))
        shape = (d.n_layers, d.kv_heads, seats[-1], d.head_dim)
        if self.lm.model.dtype != torch.float32 or tuple(sinks.keys.shape[:2]) != shape[:2]:
            return None
        keys, values = torch.empty(shape), torch.empty(shape)
        keys[:, :, : sinks.tokens] = sinks.keys
        values[:, :, : sinks.tokens] = sinks.values
        kn, vn = keys.numpy(), values.numpy()

        def plan(i: int) -> Callable[[bytes], list[memoryview] | None]:
            block, t0, t1 = blocks[i], seats[i], seats[i + 1]
            want = self.bind(self.tenant, fps[i], fps[i - 1] if i else self.sink_fp, t0, block.text, list(block.ids))
            geometry = (d.n_layers, d.kv_heads, t1 - t0, d.head_dim)

            def buffers(header: bytes) -> list[memoryview] | None:
                try:
                    h = parse_header(header)
                except ValueError:
                    return None
                if h.dtype != "F32" or h.shape != geometry or any(h.meta.get(k) != v for k, v in want.items()):
                    return None
                return [memoryview(arr[layer, head, t0:t1]).cast("B") for arr in (kn, vn)
                        for layer in range(d.n_layers) for head in range(d.kv_heads)]
            return buffers

        with ThreadPoolExecutor(max_workers=READ_WORKERS) as pool:
            ok = list(pool.map(lambda i: self.store.read_payload_into(rows[i], plan(i)), range(n)))
        if not all(ok):
            return None
        self.counters["scatter_loads"] += n
        covered = sum(len(b.text.encode()) for b in blocks[:n])
        return Prefix(KV(keys, values), sinks.tokens, seats[-1] - sinks.tokens, covered, list(rows[:n]), 0,
                      blocks[n - 1].ids[-1])

    def _walk(self, blocks: list[Block], fps: list[str]) -> Prefix:
        """Load known blocks in order until one fails a check."""
        sinks = self.sinks()
        rows = [self.store.get(self.tenant, BLOCK, fp) for fp in fps]
        fast = self._walk_into(blocks, fps, rows, sinks)
        if fast is not None:
            return fast
        parts, recs, seat, misses = [sinks], [], sinks.tokens, 0
        parent = self.sink_fp
        # Read (and digest-check) the payloads on READ_WORKERS threads: file reads and SHA-256 both
        # release the GIL, so verification overlaps across blocks; bindings are checked in order.
        known = [r for r in rows if r is not None]
        with ThreadPoolExecutor(max_workers=READ_WORKERS) as pool:
            payloads = dict(zip((r.key for r in known), pool.map(self.store.read_payload, known)))
        for block, fp, rec in zip(blocks, fps, rows):
            kv = None
            if rec is not None and payloads.get(rec.key) is not None:
                kv = self.verified(rec, self.tenant, fp, parent, seat, list(block.ids), block.text, payloads[rec.key])
            elif rec is not None:
                self._miss(rec, "payload missing or digest mismatch")
            if kv is None:
                misses += 1
                break
            parts.append(kv)
            recs.append(rec)
            seat += kv.tokens
            parent = fp
        covered = sum(len(b.text.encode()) for b in blocks[: len(recs)])
        last_id = blocks[len(recs) - 1].ids[-1] if recs else self.sink_ids[-1]
        return Prefix(KV.cat(parts), sinks.tokens, seat - sinks.tokens, covered, recs, misses, last_id)

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
