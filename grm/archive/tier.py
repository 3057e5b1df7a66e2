"""The archive tier: demote exact blocks (or grafts) to RVQ index streams, mount them back, lossy.

Lifecycle (who calls what, when):
1. Codebooks for the model identity are trained and saved once (`grm archive train`,
   grm/archive/train.py, grm/archive/codebook_store.py).
2. A policy (`demote`, `grm archive demote`) picks stored spans and calls `ArchiveTier.archive`
   for each: the exact payload is read and verified, its keys rotated back to position-free
   (R(-seat-i) per token), every token but the last `recent` (0 by default) encoded with the
   codebooks, the salient ones among them (`keep_salient`, grm/archive/salient.py; none by default)
   also kept apart as int8 rows (or float16), and an archive record written (layout:
   grm/archive/archived.py).
3. The runtime mounts a span from the archive with `ArchiveTier.load(tenant, key, at_seat)`:
   verified, dequantized, keys rotated forward to their seat (one rotation per token, float64
   angles), the exact tail and pinned tokens re-seated by the delta (none at delta 0), the pinned
   rows put over their dequantized ones. The result is an
   `ArchivedMount` whose `lossy` is always True: a mount from the archive is never an exact hit,
   and it is counted in `counters["archive_hits"]`, never in the exact block hits.

Record (the store treats all of it as opaque):
  tenant  the source block's tenant          kind  "archive"
  key     the source block's key (its fingerprint), so a block and its archive pair up 1:1
  parent  the source block's parent fingerprint: `children(tenant, "archive", parent)` walks an
          archived chain exactly like `children(tenant, "block", parent)` walks the exact one
  text    the source block's text (byte-exact; the lexical channel can find archived spans)
  meta    the source block's meta (seat, tokens, doc, index, layout, dense key ...) plus
          identity, codebook, k, key_stages, value_stages, codec, tail, quantized, stream_bytes,
          tail_bytes, keep_salient, salient_context, salient_storage, pinned, pinned_bytes, fp16_bytes, source_kind,
          source (SHA-256 of the exact payload)

Reading fails closed: the record must be active and of this identity, its payload must re-hash to
the catalog digest (the store checks), parse, and bind the same identity, tenant, key, parent and
codebook version the record names; the codebooks must be that version of this identity (another
model's codebooks are refused), and the geometry must be the dialect's. Anything else is a miss
(None), counted and logged once: the caller recomputes from the text.

Exact payload on demotion: kept by default (the archive is a cold copy; the exact hit still wins
where it verifies). With `drop_exact` the block row is deleted (a graft row is rewritten without its
payload, marked "archived": the row is the graft) in the same transaction that commits the archive
record, after the archive bytes were parsed back and their indices compared:
there is never a moment with neither. The exact K/V can always be recomputed: the document stays
byte-exact as its `document` record and the archive record keeps the span's text. The dropped
block's payload file is left for fsck to collect (the store's delete rule).
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from grm.archive.archived import CODECS, ArchivedSpan
from grm.archive.codebook_store import archive_stats, load_codebooks
from grm.archive.harvest import rotate_per_token
from grm.archive.rvq import RVQCodebooks, RVQCodes, to_storage
from grm.archive.salient import RULES, STORAGES, salient_mask
from grm.dialects import Dialect
from grm.errors import UserInputError
from grm.kv import KV, reseat_kv
from grm.store import Record
from grm.store.backend import StoreBackend
from grm.store.kinds import ARCHIVE, BLOCK, GRAFT

KIND = ARCHIVE
DEMOTABLE_KINDS = (BLOCK, GRAFT)  # kinds whose payload is a bound KV (grm/kv/payload.py)
KEEP_EXACT_GRAFTS = ("fact",)  # graft kinds a policy sweep (keys=None) never demotes
log = logging.getLogger("grm.archive")


@dataclass(frozen=True)
class ArchiveConfig:
    # Last tokens of every span kept exact. 0 by default: the exact window of a context (the sinks and
    # its most recent tokens) is never archived anyway (the sinks are their own record, the question
    # or turn is live), and a per-span tail costs what it saves (bench/results/archive_recall.md:
    # 32 exact tokens per 512-token section took the stored ratio from 32.7x to 5.0x and recalled
    # 1/40 facts instead of 0/40).
    recent: int = 0
    key_stages: int | None = None  # RVQ stages for keys; None = every trained stage
    value_stages: int | None = None  # RVQ stages for values; None = every trained stage
    codec: str = "chaos"  # symbol codec of the index streams: "chaos" (suffix search) | "bitpack"
    drop_exact: bool = False  # delete the exact block row when its archive record commits
    # Salient tokens kept apart beside the streams (grm/archive/salient.py): "none" | "digits" | "names".
    # "none" by default, so the ratios stay those of bench/results/archive.md;
    # bench/results/archive_recall.md measures what each rule costs and brings back.
    keep_salient: str = "none"
    salient_context: int = 4  # tokens either side of each salient one kept too (see grm/archive/salient.py)
    salient_storage: str = "int8"  # their rows: "int8" (absmax, float16 scale per row) | "float16"

    def __post_init__(self) -> None:
        if not isinstance(self.recent, int) or self.recent < 0:
            raise UserInputError(f"the exact window must be >= 0 tokens, got {self.recent!r}")
        for name in ("key_stages", "value_stages"):
            v = getattr(self, name)
            if v is not None and (not isinstance(v, int) or v < 1):
                raise UserInputError(f"{name} must be >= 1 (or None for every trained stage), got {v!r}")
        if self.codec not in CODECS:
            raise UserInputError(f"unknown codec {self.codec!r}: one of {', '.join(CODECS)}")
        if self.keep_salient not in RULES:
            raise UserInputError(f"unknown keep-salient rule {self.keep_salient!r}: one of {', '.join(RULES)}")
        if not isinstance(self.salient_context, int) or self.salient_context < 0:
            raise UserInputError(f"the salient context must be >= 0 tokens, got {self.salient_context!r}")
        if self.salient_storage not in STORAGES:
            raise UserInputError(f"unknown salient storage {self.salient_storage!r}: one of {', '.join(STORAGES)}")


@dataclass(frozen=True)
class ArchivedMount:
    """K/V of an archived span, ready to splice in at `seat`. Always lossy."""

    kv: KV  # [layers, kv_heads, tokens, head_dim], keys rotated to seats seat..seat+tokens-1
    seat: int  # where the keys now sit
    record: Record  # the archive record served
    exact_tokens: int  # tokens of the exact tail (served bit-identical, re-seated)
    codebook: str  # codebook version the rest was dequantized with
    pinned_tokens: int = 0  # salient tokens of the quantized part served from their own rows (re-seated)
    lossy: bool = True  # a mount from the archive is never an exact hit


@dataclass
class DemoteReport:
    demoted: list[str] = field(default_factory=list)  # keys archived now
    skipped: dict[str, str] = field(default_factory=dict)  # key -> why it was not archived
    tokens: int = 0  # tokens of the spans archived now
    exact_bytes: int = 0  # their exact payload bytes
    archive_bytes: int = 0  # the archive payload bytes that replace (or shadow) them
    dropped_exact: int = 0  # exact block rows deleted

    def to_json(self) -> dict:
        return {"demoted": len(self.demoted), "skipped": len(self.skipped), "tokens": self.tokens,
                "exact_bytes": self.exact_bytes, "archive_bytes": self.archive_bytes,
                "dropped_exact": self.dropped_exact, "keys": self.demoted, "skipped_keys": self.skipped}


def _pinned_rows(keys: torch.Tensor, values: torch.Tensor, storage: str) -> tuple[str, list]:
    """(storage used, [keys, values, key scales, value scales]) of pinned rows: int8 with a float16
    scale per row or float16 (grm/archive/rvq.py to_storage), float32 where a value or scale would
    not fit float16."""
    (k, ks), (v, vs) = to_storage(keys.float(), storage), to_storage(values.float(), storage)
    if all(t is None or bool(torch.isfinite(t.float()).all()) for t in (k, v, ks, vs)):
        return storage, [k, v, ks, vs]
    return "float32", [keys.float().clone(), values.float().clone(), None, None]


def _rotate_layers(keys: torch.Tensor, dialect: Dialect, positions: torch.Tensor) -> torch.Tensor:
    """keys [layers, kv_heads, tokens, head_dim], token i of every layer rotated by positions[i]
    (layers without a rotary map are left as they are)."""
    out = []
    for layer in range(keys.shape[0]):
        inv = dialect.inv_freq[layer]
        out.append(keys[layer] if inv is None else rotate_per_token(keys[layer], inv, positions))
    return torch.stack(out)


class ArchiveTier:
    """Demote and mount archived spans for one model identity (see the module docstring)."""

    def __init__(self, store: StoreBackend, dialect: Dialect, identity: str,
                 piece: Callable[[int], str] | None = None) -> None:
        """`piece(token id)` is a token's text (the tokenizer's decode of it alone); it is needed
        only to keep salient tokens unquantized (ArchiveConfig.keep_salient)."""
        self.store, self.dialect, self.identity = store, dialect, identity
        self._piece, self._pieces = piece, {}
        self.counters = {"archive_hits": 0, "archive_misses": 0, "demoted": 0}
        self._books: dict[str, RVQCodebooks | None] = {}
        self._warned: set[str] = set()

    # ----- codebooks ---------------------------------------------------------------------------
    def codebooks(self, version: str) -> RVQCodebooks | None:
        """The stored codebooks of this identity at `version` (cached), or None."""
        if version not in self._books:
            self._books[version] = load_codebooks(self.store, self.identity, version)
        return self._books[version]

    def _check_books(self, books: RVQCodebooks) -> None:
        d = self.dialect
        if books.identity != self.identity:
            raise UserInputError("these codebooks belong to another model identity; train codebooks for this model")
        shape = (d.n_layers, d.kv_heads, d.head_dim)
        for t in (books.keys, books.values):
            if t.numel() and (t.shape[0], t.shape[1], t.shape[4]) != shape:
                raise UserInputError(f"codebooks of geometry {tuple(t.shape)} do not fit the model {shape}")

    # ----- demotion ----------------------------------------------------------------------------
    def pinned_positions(self, ids: Sequence[int], rule: str, context: int = 0) -> torch.Tensor:
        """Positions of the tokens `rule` (with `context` tokens either side) keeps rows of among
        `ids` (int64, increasing)."""
        if rule == "none":
            return torch.zeros(0, dtype=torch.int64)
        if self._piece is None:
            raise UserInputError("keeping salient tokens unquantized needs the model's tokenizer")
        for t in set(ids) - self._pieces.keys():
            self._pieces[t] = self._piece(t)
        pieces = [self._pieces[t] for t in ids]
        mask = salient_mask(pieces, rule, context)
        return torch.tensor([i for i, keep in enumerate(mask) if keep], dtype=torch.int64)

    def exact_kv(self, rec: Record) -> tuple[KV, int, bytes, list[int]] | None:
        """(K/V, seat, payload bytes, token ids bound in it) of an exact block or graft of this
        identity, verified; else None."""
        data = self.store.read_payload(rec)
        if data is None:
            return None
        try:
            kv, meta = KV.from_bytes(data)
            seat = int(meta.get("seat", ""))
            ids = [int(t) for t in json.loads(meta.get("ids") or "[]")]
        except (ValueError, KeyError, TypeError):
            return None
        bound = (meta.get("identity"), meta.get("tenant"), meta.get("fingerprint"))
        if bound != (self.identity, rec.tenant, rec.key):
            return None
        d = self.dialect
        if tuple(kv.keys.shape) != (d.n_layers, d.kv_heads, kv.tokens, d.head_dim):
            return None
        return kv, seat, data, ids

    def archive(self, rec: Record, books: RVQCodebooks, config: ArchiveConfig = ArchiveConfig()) -> Record | str:
        """Write the archive record of `rec` (a stored block); returns it, or why it was skipped.

        Raises UserInputError for codebooks of another identity or geometry, or stages the
        codebooks were not trained with."""
        self._check_books(books)
        ks = books.config.key_stages if config.key_stages is None else config.key_stages
        vs = books.config.value_stages if config.value_stages is None else config.value_stages
        if not (1 <= ks <= books.config.key_stages and 1 <= vs <= books.config.value_stages):
            raise UserInputError(f"asked K x{ks} / V x{vs}; the codebooks have K x{books.config.key_stages} "
                                 f"/ V x{books.config.value_stages}")
        if rec.kind not in DEMOTABLE_KINDS or rec.state != "active":
            return f"not an active {' or '.join(DEMOTABLE_KINDS)} record"
        if rec.payload is None and rec.meta.get("block"):
            return f"shares the payload of block {rec.meta['block']}: demote the block"
        if rec.payload is None:
            return "no exact payload (already archived with its exact K/V dropped)"
        # What the archive record says of salient tokens (context and storage mean nothing without a rule).
        plain = {"keep_salient": "none", "salient_context": 0, "salient_storage": "int8"}
        salient = plain if config.keep_salient == "none" else {
            "keep_salient": config.keep_salient, "salient_context": config.salient_context,
            "salient_storage": config.salient_storage}
        done = self.store.get(rec.tenant, KIND, rec.key)
        if done is not None and done.state == "active" and (
                (done.meta.get("codebook"), done.meta.get("key_stages"), done.meta.get("value_stages"),
                 done.meta.get("recent")) == (books.version, ks, vs, config.recent)
                and all(done.meta.get(k, plain[k]) == v for k, v in salient.items())):
            return "already archived with these codebooks, exact tail and salient rule"
        got = self.exact_kv(rec)
        if got is None:
            return "exact payload did not verify (or belongs to another model)"
        kv, seat, data, ids = got
        tail = min(config.recent, kv.tokens)
        n = kv.tokens - tail
        if n < 1:
            return f"{kv.tokens} tokens: all inside the {config.recent}-token exact window"
        if config.keep_salient != "none" and len(ids) != kv.tokens:
            return "the exact payload does not name its token ids, so no salient token can be kept"
        pos = self.pinned_positions(ids[:n], config.keep_salient, config.salient_context)
        head = kv.slice(0, n)
        free = KV(_rotate_layers(head.keys, self.dialect, -torch.arange(seat, seat + n)), head.values)
        codes = books.encode(free, ks, vs)
        parent = rec.parent or ""
        meta = {"identity": self.identity, "tenant": rec.tenant, "key": rec.key, "parent": parent, "seat": seat,
                "tokens": kv.tokens, "tail": tail, "quantized": n, "codebook": books.version, "k": books.config.k,
                "key_stages": ks, "value_stages": vs, "recent": config.recent,
                "source": hashlib.sha256(data).hexdigest(), **salient, "pinned": len(pos)}
        rows: list = [None] * 5
        if len(pos):
            meta["salient_storage"], stored = _pinned_rows(head.keys[:, :, pos], head.values[:, :, pos],
                                                           config.salient_storage)
            rows = [pos, *stored]
        span = ArchivedSpan(codes, kv.keys[:, :, n:].clone(), kv.values[:, :, n:].clone(), meta, *rows)
        payload = span.to_bytes(config.codec)
        back = ArchivedSpan.from_bytes(payload)  # parse our own bytes before anything relies on them
        if not (np.array_equal(back.codes.keys, codes.keys) and np.array_equal(back.codes.values, codes.values)
                and back.pinned_count == span.pinned_count):
            raise RuntimeError("archived index streams did not round-trip")  # a codec bug, never user data
        d = self.dialect
        fp16 = kv.tokens * d.n_layers * d.kv_heads * d.head_dim * 2 * 2
        row = {**rec.meta, **meta, "codec": config.codec, "stream_bytes": back.stream_bytes,
               "tail_bytes": int(span.tail_keys.nbytes + span.tail_values.nbytes),
               "pinned_bytes": span.pinned_bytes, "fp16_bytes": fp16,
               "exact_bytes": rec.payload_size, "source_kind": rec.kind}
        for name in ("tenant", "key", "parent"):
            row.pop(name)  # the row's own columns say these
        with self.store.transaction() as txn:
            out = txn.put(rec.tenant, KIND, rec.key, meta=row, payload=payload, parent=rec.parent, text=rec.text)
            if config.drop_exact and rec.kind == GRAFT:
                # A graft's row is its identity (seat, ids, routing keys, lineage): it stays, and only
                # its exact payload goes; GraftMemory.load mounts it from the archive from then on.
                txn.put(rec.tenant, rec.kind, rec.key, meta={**rec.meta, "archived": books.version},
                        parent=rec.parent, text=rec.text, state=rec.state)
            elif config.drop_exact:
                txn.delete(rec.tenant, rec.kind, rec.key)
        self.counters["demoted"] += 1
        return out

    # ----- mounting ----------------------------------------------------------------------------
    def read(self, tenant: str, key: str) -> tuple[Record, ArchivedSpan, RVQCodebooks] | None:
        """The verified archive record of (tenant, key), parsed, with its codebooks; None = miss."""
        rec = self.store.get(tenant, KIND, key)
        if rec is None or rec.state != "active":
            return None
        if rec.meta.get("identity") != self.identity:
            return None  # another model's record: never served, and not damage
        data = self.store.read_payload(rec)
        if data is None:
            return self._miss(rec, "payload missing or digest mismatch")
        try:
            span = ArchivedSpan.from_bytes(data)
        except ValueError as exc:
            return self._miss(rec, f"unreadable archive payload: {exc}")
        m = span.meta
        want = {"identity": self.identity, "tenant": tenant, "key": key, "parent": rec.parent or "",
                "codebook": rec.meta.get("codebook")}
        for name, value in want.items():
            if m.get(name) != value:
                return self._miss(rec, f"bound {name} does not match")
        books = self.codebooks(m["codebook"])
        if books is None:
            return self._miss(rec, f"codebooks {m['codebook']} of this model are missing or damaged")
        d, cfg = self.dialect, books.config
        if (m["k"] != cfg.k or m["key_stages"] > cfg.key_stages or m["value_stages"] > cfg.value_stages
                or tuple(span.tail_keys.shape) != (d.n_layers, d.kv_heads, m["tail"], d.head_dim)
                or span.codes.keys.shape[:2] != (d.n_layers, d.kv_heads)):
            return self._miss(rec, "geometry or stages do not fit the model and its codebooks")
        return rec, span, books

    def load(self, tenant: str, key: str, at_seat: int | None = None) -> ArchivedMount | None:
        """The archived span (tenant, key) dequantized with its keys at seats at_seat.. (default:
        its original seat), or None (a miss). Quantized keys are rotated from position-free to
        their seat in one rotation each; the exact tail moves by the seat delta (none at 0)."""
        got = self.read(tenant, key)
        if got is None:
            self.counters["archive_misses"] += 1
            return None
        rec, span, books = got
        seat, n = span.meta["seat"], span.meta["quantized"]
        target = seat if at_seat is None else int(at_seat)
        self.dialect.check_reseat(target - seat)
        free = books.decode(span.codes)  # float32, position-free
        dtype = span.tail_keys.dtype
        keys = _rotate_layers(free.keys, self.dialect, torch.arange(target, target + n)).to(dtype)
        tail = KV(span.tail_keys, span.tail_values)
        if span.meta["tail"]:
            tail = reseat_kv(tail, self.dialect, target - seat)  # no rotation at delta 0
        values = free.values.to(dtype)
        if span.pinned_count:
            pinned = reseat_kv(KV(*(t.to(dtype) for t in span.pinned_kv())), self.dialect, target - seat)
            keys[:, :, span.pinned], values[:, :, span.pinned] = pinned.keys, pinned.values
        kv = KV(torch.cat([keys, tail.keys], dim=2), torch.cat([values, tail.values], dim=2))
        self.counters["archive_hits"] += 1
        return ArchivedMount(kv, target, rec, span.meta["tail"], span.meta["codebook"], pinned_tokens=span.pinned_count)

    def _miss(self, rec: Record, why: str) -> None:
        if rec.key not in self._warned:
            self._warned.add(rec.key)
            log.warning("archive record %s/%s not served (%s); recomputing", rec.tenant, rec.key[:16], why)
        return None

    # ----- policy ------------------------------------------------------------------------------
    def demote(self, tenant: str, books: RVQCodebooks, keys: Sequence[str] | None = None,
               kinds: Iterable[str] = (BLOCK,), before_lsn: int | None = None, keep_newest: int = 0,
               config: ArchiveConfig = ArchiveConfig(),
               progress: Callable[[int, int], None] | None = None) -> DemoteReport:
        """Archive stored spans of `tenant`: the named `keys` (each must exist: UserInputError
        otherwise, before anything is written; an empty list is refused, never "everything"), or,
        with keys=None, every active record of `kinds` written before `before_lsn` (if given),
        except the `keep_newest` most recent ones and fact grafts (KEEP_EXACT_GRAFTS). Records of
        another model are skipped.
        progress(done, total) is called after each record."""
        kinds = tuple(kinds)
        for kind in kinds:
            if kind not in DEMOTABLE_KINDS:
                raise UserInputError(f"cannot demote kind {kind!r}: one of {', '.join(DEMOTABLE_KINDS)}")
        self._check_books(books)
        if keys is not None:
            if not keys:
                raise UserInputError("no keys given: an empty match never means everything")
            found = []
            for key in keys:
                rec = next((r for k in kinds if (r := self.store.get(tenant, k, key)) is not None
                            and r.state == "active"), None)
                if rec is None:
                    raise UserInputError(f"no stored {' or '.join(kinds)} {key!r} in tenant {tenant!r}")
                found.append(rec)
        else:
            found = sorted((r for k in kinds for r in self.store.records(tenant, k) if r.state == "active"),
                           key=lambda r: r.lsn)
            if before_lsn is not None:
                found = [r for r in found if r.lsn < before_lsn]
            if keep_newest > 0:
                found = found[:-keep_newest]
        report = DemoteReport()
        for i, rec in enumerate(found):
            if keys is None and rec.kind == GRAFT and rec.meta.get("kind") in KEEP_EXACT_GRAFTS:
                # Verbatim recall does not survive plain archiving (bench/results/archive_recall.md: 0/40
                # facts from archived sections vs 30/40 exact; --keep-salient digits brings it back to 30/40,
                # at a third of the ratio): facts are the memory's ground truth and stay exact unless named.
                out: Record | str = f"a {rec.meta.get('kind')} graft stays exact unless named"
            else:
                out = self.archive(rec, books, config)
            if progress:
                progress(i + 1, len(found))
            if isinstance(out, str):
                report.skipped[rec.key] = out
                continue
            report.demoted.append(rec.key)
            report.tokens += int(out.meta["tokens"])
            report.exact_bytes += rec.payload_size
            report.archive_bytes += out.payload_size
            report.dropped_exact += int(config.drop_exact)
        return report


def load_archived(store: StoreBackend, tenant: str, key: str, dialect: Dialect, identity: str,
                  at_seat: int | None = None) -> ArchivedMount | None:
    """One-shot `ArchiveTier(store, dialect, identity).load(...)` (re-reads the codebooks)."""
    return ArchiveTier(store, dialect, identity).load(tenant, key, at_seat)


def demote(store: StoreBackend, tenant: str, dialect: Dialect, identity: str, books: RVQCodebooks,
           **kw: object) -> DemoteReport:
    """One-shot `ArchiveTier(store, dialect, identity).demote(tenant, books, **kw)`."""
    return ArchiveTier(store, dialect, identity).demote(tenant, books, **kw)  # type: ignore[arg-type]


def tier_stats(store: StoreBackend, tenant: str | None = None) -> dict:
    """What the archive tier holds (catalog only, no payload reads): archived records, tokens,
    bytes, the codebooks they use, and ratios against fp16 K/V of the same tokens.

    archive_only_ratio = fp16 bytes of the quantized tokens / their index-stream bytes;
    payload_ratio      = fp16 bytes of every archived token / archive payload bytes (streams +
                         exact tails + pinned tokens + headers);
    all_in_ratio       = the same with the codebooks the records use added once (amortized over
                         what is stored, not over what could be)."""
    recs = [r for r in store.records(tenant, KIND) if r.state == "active"]
    sums = dict.fromkeys(("tokens", "quantized", "tail", "pinned", "stream_bytes", "tail_bytes", "pinned_bytes",
                          "fp16_bytes", "exact_bytes"), 0)
    for r in recs:
        for name in sums:
            sums[name] += int(r.meta.get(name, 0))
    payload = sum(r.payload_size for r in recs)
    used = sorted({(str(r.meta.get("identity")), str(r.meta.get("codebook"))) for r in recs})
    books = archive_stats(store)["codebooks"]
    size = {(b["identity"], b["version"]): int(b["payload_bytes"] or 0) for b in books}
    codebook_bytes = sum(size.get(u, 0) for u in used)
    per_token = sums["fp16_bytes"] / sums["tokens"] if sums["tokens"] else 0.0
    fp16_quantized = per_token * sums["quantized"]
    ratio = lambda num, den: round(num / den, 2) if den else None  # noqa: E731
    return {
        "records": len(recs), "tokens": sums["tokens"], "quantized_tokens": sums["quantized"],
        "exact_tokens": sums["tail"], "pinned_tokens": sums["pinned"], "payload_bytes": payload,
        "stream_bytes": sums["stream_bytes"], "exact_tail_bytes": sums["tail_bytes"],
        "pinned_bytes": sums["pinned_bytes"], "fp16_bytes": sums["fp16_bytes"],
        "exact_payload_bytes": sums["exact_bytes"], "codebook_bytes": codebook_bytes,
        "archive_only_ratio": ratio(fp16_quantized, sums["stream_bytes"]),
        "payload_ratio": ratio(sums["fp16_bytes"], payload),
        "all_in_ratio": ratio(sums["fp16_bytes"], payload + codebook_bytes),
        "codebooks_used": [{"identity": i, "version": v, "bytes": size.get((i, v))} for i, v in used],
        "codebooks_stored": [{"identity": b["identity"], "version": b["version"], "k": b["k"],
                              "key_stages": b["key_stages"], "value_stages": b["value_stages"], "storage": b["storage"],
                              "bytes": b["payload_bytes"], "train_tokens": b["train_tokens"]} for b in books],
    }
