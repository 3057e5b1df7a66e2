"""Graft memory: harvest spans into grafts, route a query to them, load them fail-closed, slice them.

Lifecycle: the runtime builds one `GraftMemory` over its `ExactMemory` (which owns the sinks and
the payload binding checks). Sections ingest calls `adopt_blocks` (a document graft per section,
sharing the section's payload); a chat turn calls `harvest` with the span it read; a question
calls `route`, then `grounding` (abstain when nothing routed holds anything on it), then `load`
(through the paging planes) for what it mounts. Grafts are never
edited: `retire` and `slice` write new record versions / new records, lineage kept.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from dataclasses import dataclass, replace

from grm.errors import UserInputError
from grm.exact import ExactMemory
from grm.grafts.floor import DEFAULT_FLOOR, DocumentFrequencies, Grounding, declarative, ground, only_asks, terms
from grm.grafts.graft import GRAFT_KINDS, KIND, PAYLOAD_PARENT, Graft, graft_id
from grm.kv import KV
from grm.kv.forward import read_after_sinks
from grm.english.words import STOP_WORDS, stem
from grm.route import Channels, Hit, LexicalConfig, combine, search
from grm.route.lexical import WORD
from grm.route.dense import encode_key, key_width, span_keys, words_key
from grm.route.index import DENSE_CANDIDATES, DenseIndex, DenseScores, candidates
from grm.route.meaning import MeaningIndex, QueryVectors
from grm.store import Record
from grm.store.kinds import BLOCK

log = logging.getLogger("grm.grafts")
QUESTION_TURN_WEIGHT = 0.5
TURN_LABELS = frozenset({"user", "assistant"})  # how a harvested chat turn names its speakers: not its words
MEANING_KINDS = ("evidence", "fact")  # grafts given a meaning vector (short turns; sections are routed by words)
SAID_TOKENS = 2048  # at most this many tokens of turns read ahead of their storing (`GraftMemory.read_said`) kept
KEY_TAIL_CHARS = 500  # a turn that will not be stored is keyed by at most its last this many characters


def key_tail(words: str) -> str:
    """The last KEY_TAIL_CHARS characters of `words`, begun at the first line start inside them
    (else at the first space): what keys a long turn that is not stored (`GraftMemory.read_said`)."""
    tail = words[-KEY_TAIL_CHARS:]
    for sep in ("\n", " "):
        cut = tail.find(sep)
        if 0 <= cut < len(tail) - 1 and tail[cut + 1:].strip():
            return tail[cut + 1:].strip()
    return tail.strip()


@dataclass(frozen=True)
class RouteConfig:
    k: int = 3  # at most this many grafts mounted for a query
    seat_budget: int = 1536  # at most this many seats of mounted grafts
    # mount only grafts scoring >= this fraction of the best one, or holding one of the query's
    # identifiers (a name or number pins a memory down whatever its score): a weak second graft
    # mostly distracts a small model (turn-50 script: 7/8 at 0.6, see bench/results/grafts.md)
    relative_floor: float = 0.75
    # combined channel: mount only grafts the lexical channel found (the dense channel re-ranks
    # them); without it, a turn with nothing in common with memory still mounts the densest
    # neighbours, and one wrong answer they provoke is harvested and provokes the next (measured)
    require_lexical: bool = True
    # abstain when the routed grafts cover less than this share of the question's IDF-weighted
    # content words and hold none of its names/numbers (grm/grafts/floor.py); 0 never abstains
    # on something routed
    abstain_floor: float = DEFAULT_FLOOR
    channels: Channels = Channels()  # the channel (combined by default) and its scoring
    # later mentions: per routed graft, at most this many evidence turns written after it that name
    # one of its rare words (held by at most `rare` routable grafts: a name, a code, the old value),
    # mounted after it ("not 4817 anymore, changed the combo to 2093" after "my locker code is
    # 4817"); 0 turns it off (`GraftMemory.later`)
    later: int = 0
    rare: int = 3
    # the meaning channel (grm/route/meaning.py): per query, at most this many turns or facts whose
    # meaning is nearest the question's are mounted beside the lexical route (a plain-words update
    # shares no word with its question), and each routed turn brings the later turn nearest it in
    # meaning (`GraftMemory.later`); both only above `meaning_floor` (a centred cosine). 0 = off:
    # no vectors are computed either
    meaning: int = 0
    meaning_floor: float = 0.2
    # with the meaning channel: a turn or fact routed by its words alone is mounted only where its
    # meaning is at least `meaning_floor` for the query too, or it holds one of the query's names
    # or numbers (`GraftMemory._by_meaning`); grafts without a meaning vector (document sections)
    # are routed by their words as before
    agree: bool = False
    # with the meaning channel: where a routed turn has a later turn linked to it in meaning (a
    # statement and what was said after it on the same thing), mount only the best such pair, the
    # later turn last (`GraftMemory.later`): other turns beside a statement and its update make a
    # small reader answer with the statement's value (bench/update_reading.py, `memory + 3 others`)
    pair: bool = False
    # with the meaning channel: a routed turn that has a later turn linked to it in meaning is left
    # out and that later turn mounted in its place (what a memory that knew the update replaces the
    # statement would mount: `update + 3 others` in bench/update_reading.py)
    replace: bool = False

    def __post_init__(self) -> None:
        if self.k < 1 or self.seat_budget < 1:
            raise ValueError("k and seat_budget must be >= 1")
        if self.later < 0 or self.rare < 2 or self.meaning < 0:
            raise ValueError("later and meaning must be >= 0 and rare >= 2")
        if not -1 <= self.meaning_floor <= 1:
            raise ValueError("meaning_floor is a cosine: in [-1, 1]")
        if not 0 <= self.abstain_floor <= 1:
            raise ValueError("abstain_floor must be in [0, 1]")
        if not 0 <= self.relative_floor <= 1:
            raise ValueError("relative_floor must be in [0, 1]")


@dataclass(frozen=True)
class Routed:
    """A graft chosen for a query, and why: its combined score and each channel's part."""

    graft: Graft
    score: float
    bm25: float
    identifiers: tuple[str, ...]
    dense: float
    meaning: float | None = None  # the centred cosine of its meaning, where that is why it was routed

    def to_json(self) -> dict:
        return {"id": self.graft.id, "score": round(self.score, 4)}

    def why(self) -> dict:
        out = {"id": self.graft.id, "score": round(self.score, 4), "bm25": round(self.bm25, 4),
               "dense_cosine": round(self.dense, 4), "identifiers": list(self.identifiers)}
        return out if self.meaning is None else {**out, "meaning_cosine": round(self.meaning, 4)}


class GraftMemory:
    def __init__(self, exact: ExactMemory, config: RouteConfig = RouteConfig(), archive=None) -> None:
        """`archive`: an ArchiveTier (grm/archive/tier.py) to mount document grafts from once their
        block was demoted and its exact payload dropped: lossy, and reported so (`lossy_ids`)."""
        self.exact, self.config, self.archive = exact, config, archive
        self.store, self.tenant, self.lm = exact.store, exact.tenant, exact.lm
        self.lossy_ids: set[str] = set()  # grafts whose last load came from the archive tier
        self._index: DenseIndex | None = None
        self._meaning: MeaningIndex | None = None  # watches the index (RouteConfig.meaning)
        self.query_vectors = QueryVectors()
        self._said: OrderedDict[tuple[int, ...], KV] = OrderedDict()  # `read_said`'s reads, oldest first

    def index(self) -> DenseIndex:
        """The in-memory index of this tenant's routable grafts (grm/route/index.py): dense keys,
        kinds and word counts, built on first use and kept in step with the store by its LSN."""
        if self._index is None:
            self._index = DenseIndex(self.store, self.tenant, KIND,
                                     key_width(self.exact.dialect, self.config.channels.dense),
                                     lambda r: self._mine(r) and not r.meta.get("retired"),
                                     lambda text: terms(declarative(text)))
            if self.config.meaning:
                self._meaning = MeaningIndex(only_asks)
                self._index.watch(self._meaning)
        return self._index

    # ----- reading records ---------------------------------------------------------------------
    def _mine(self, rec: Record | None) -> bool:
        return rec is not None and rec.state == "active" and rec.meta.get("identity") == self.lm.identity

    def get(self, gid: str) -> Graft:
        """The graft `gid` of this tenant and model; UserInputError if there is none."""
        rec = self.store.get(self.tenant, KIND, gid) if isinstance(gid, str) and gid else None
        if rec is None or rec.meta.get("identity") != self.lm.identity:
            raise UserInputError(f"unknown graft id {gid!r} (see `grm grafts list`)")
        return Graft.from_record(rec)

    def grafts(self, kind: str | None = None, include_retired: bool = False) -> list[Graft]:
        """This tenant's grafts of this model, oldest first."""
        if include_retired:
            rows = (r for r in self.store.records(self.tenant, KIND) if self._mine(r))
        else:  # the index knows which rows are routable: read only those
            rows = (r for r in (self.store.get(self.tenant, KIND, k) for k in self.index().keys(kind))
                    if self._mine(r))
        out = [Graft.from_record(r) for r in rows]
        out = [g for g in out if (kind is None or g.kind == kind) and (include_retired or not g.retired)]
        return sorted(out, key=lambda g: (g.created, g.record.lsn))

    def load(self, gid: str) -> KV | None:
        """The graft's K/V as stored (keys at its origin seat), verified; None = miss. A graft whose
        exact payload is gone (its block demoted with --drop-exact, or the graft itself) is mounted
        from the archive tier when one is attached: dequantized, so its id lands in `lossy_ids`."""
        rec = self.store.get(self.tenant, KIND, gid)
        if not self._mine(rec):
            return None
        g = Graft.from_record(rec)
        ex = self.exact
        kv, exact = None, rec  # exact: the record holding the exact payload, if any
        if g.block is not None:
            exact = self.store.get(self.tenant, BLOCK, g.block)
            if exact is not None:
                kv = ex.verified(exact, self.tenant, exact.key, exact.parent or "", g.seat, list(g.ids), g.text)
        elif rec.payload is not None:
            kv = ex.verified(rec, self.tenant, g.id, PAYLOAD_PARENT, g.seat, list(g.ids), g.text)
        else:
            exact = None
        if kv is None and self.archive is not None:
            mount = self.archive.load(self.tenant, g.block or g.id, at_seat=g.seat)
            if mount is not None and mount.kv.tokens == g.tokens:
                self.lossy_ids.add(gid)
                return mount.kv
        if kv is None and exact is None:
            ex.count_miss()
        self.lossy_ids.discard(gid)
        return kv

    # ----- writing -----------------------------------------------------------------------------
    def _routing_keys(self, kv: KV | None, ids: list[int], standalone_seat: int | None) -> str:
        """Dense keys of a span READ ALONE after the sinks: from `kv` when that is already how it
        was read (`standalone_seat` given), else from one forward pass over `ids`."""
        ex = self.exact
        if kv is None or standalone_seat is None:
            sinks = ex.sinks()
            kv, standalone_seat = read_after_sinks(self.lm.model, sinks, ids), sinks.tokens
        return encode_key(span_keys(kv, ex.dialect, standalone_seat, self.config.channels.dense))

    def harvest(self, kv: KV, seat: int, text: str, ids: list[int], kind: str = "evidence", *,
                sources: tuple[str, ...] = (), salt: str = "", extra: dict | None = None,
                standalone: bool = False, parent: str | None = None, span: tuple[int, int] | None = None) -> Graft:
        """Store `kv` (the span `ids`/`text`, keys as read at seats seat..) as a graft, durably.
        `standalone`: the span was read alone right after the sinks, so its routing keys come from
        `kv` itself; otherwise the span is read alone once more to compute them."""
        if kind not in GRAFT_KINDS:
            raise UserInputError(f"bad graft kind {kind!r}: one of {', '.join(GRAFT_KINDS)}")
        if kv.tokens != len(ids) or not ids:
            raise ValueError(f"a graft needs its K/V ({kv.tokens} tokens) to match its ids ({len(ids)})")
        ex = self.exact
        known = self.find(kind, seat, text, ids, salt)
        if known is not None:
            return known  # idempotent: the same span harvested again
        gid = graft_id(self.lm.identity, self.tenant, kind, seat, text, ids, salt)
        dense = self._routing_keys(kv, ids, seat if standalone else None)
        meta = {"identity": self.lm.identity, "kind": kind, "seat": seat, "tokens": len(ids), "ids": list(ids),
                "created": time.time(), "sources": list(sources), "dense": dense, **(extra or {})}
        if self.config.meaning and kind in MEANING_KINDS:
            # through the query cache: a chat turn routed a moment before is not read again
            vec = self.query_vectors.get(self.lm.model, self.lm.tokenizer, text)
            if vec is not None:
                meta["meaning"] = encode_key(vec)
        if span is not None:
            meta["span"] = list(span)
        payload = kv.to_bytes(ex.bind(self.tenant, gid, PAYLOAD_PARENT, seat, text, ids))
        self.store.put(self.tenant, KIND, gid, parent=parent, text=text, payload=payload, meta=meta)
        return self.get(gid)

    def read_said(self, labelled: str, words: str, stored: bool = True) -> None:
        """Read a user's turn as it will be stored (`labelled`: the `words` with their speaker label,
        "User: <words>\n\n") alone after the sinks, once, before it is routed: the words' part of
        that read (the label and what follows the words left out, where they are tokens of their
        own) becomes the routing key QueryKeys gives for `words`, and the read is kept for
        `read_alone` to store, so the words are read neither alone for their key nor again for their
        graft. The last few reads are kept (SAID_TOKENS in all); one longer than that is not.
        Words whose key is kept already (the same message sent again) are not read.
        `stored=False`: the turn will not be stored as a graft (a pasted document, stored as a
        document instead), so the read is for its key alone, and a long one reads only its last
        KEY_TAIL_CHARS characters (from a line start where they hold one: the question after the
        pasted text): its key without reading the whole paste once more for it."""
        ex, tok, words = self.exact, self.lm.tokenizer, words.strip()
        at = labelled.rfind(words)
        if not words or at < 0:
            raise ValueError("the labelled turn must hold its words")
        config, word_ids = self.config.channels.dense, tok.encode(words)
        if ex.query_keys.known(word_ids, config):
            return
        if not stored and len(words) > KEY_TAIL_CHARS:
            tail = key_tail(words)
            labelled = labelled[:at] + tail + labelled[at + len(words):]
            words = tail
        ids, sinks = tok.encode(labelled), ex.sinks()
        kv = read_after_sinks(self.lm.model, sinks, ids)
        label, after = tok.encode(labelled[:at].rstrip()), tok.encode(labelled[at + len(words):])
        start = len(label) if label and ids[:len(label)] == label else 0
        end = len(ids) - len(after) if after and ids[-len(after):] == after else len(ids)
        ex.query_keys.put(word_ids, config, words_key(kv, (start, end), ex.dialect, sinks.tokens, config))
        if stored and len(ids) <= SAID_TOKENS:
            self._said[tuple(ids)] = kv
            while sum(k.tokens for k in self._said.values()) > SAID_TOKENS:
                self._said.popitem(last=False)

    def read_alone(self, text: str, kind: str, *, ids: list[int] | None = None, salt: str = "",
                   extra: dict | None = None) -> Graft:
        """`text` (its tokens `ids`, else `text` encoded) read alone right after the sinks and stored
        as a graft; the stored one, not read again, when the same span of the same kind was stored
        with the same salt, and the read `read_said` kept of the same tokens, not read again either.
        How a fact's statement, a digest, a served exchange and a chat turn harvested
        `standalone`/`user` become memory."""
        ids = self.lm.tokenizer.encode(text) if ids is None else ids
        sinks = self.exact.sinks()
        known = self.find(kind, sinks.tokens, text, ids, salt)
        if known is not None:
            return known
        kv = self._said.pop(tuple(ids), None)
        if kv is None:
            kv = read_after_sinks(self.lm.model, sinks, ids)
        return self.harvest(kv, sinks.tokens, text, ids, kind, salt=salt, extra=extra, standalone=True)

    def find(self, kind: str, seat: int, text: str, ids: list[int], salt: str = "") -> Graft | None:
        """The graft `harvest` stores for this span (same kind, seat, text, ids and salt), if it is
        stored already: a caller can skip computing the K/V."""
        rec = self.store.get(self.tenant, KIND, graft_id(self.lm.identity, self.tenant, kind, seat, text, ids, salt))
        return None if rec is None or rec.meta.get("identity") != self.lm.identity else Graft.from_record(rec)

    def adopt_blocks(self, doc_name: str, block_keys: list[str]) -> list[Graft]:
        """A document graft for each section block (read alone after the sinks), sharing its
        payload and its dense key; idempotent."""
        out = []
        for key in block_keys:
            block = self.store.get(self.tenant, BLOCK, key)
            if block is None or block.parent != self.exact.sink_fp:
                continue
            ids = block.meta.get("ids")
            if not isinstance(ids, list):  # a row from before ids were kept: its own reading
                ids = self.lm.tokenizer.encode(block.text or "")
            seat = int(block.meta.get("seat", 0))
            gid = graft_id(self.lm.identity, self.tenant, "document", seat, block.text or "", ids, key)
            if self.store.get(self.tenant, KIND, gid) is None:
                dense = block.meta.get("dense") or self._routing_keys(None, ids, None)
                self.store.put(self.tenant, KIND, gid, text=block.text, meta={
                    "identity": self.lm.identity, "kind": "document", "seat": seat, "tokens": len(ids), "ids": ids,
                    "created": time.time(), "sources": [doc_name], "block": key, "dense": dense})
            out.append(self.get(gid))
        return out

    def slice(self, gid: str, spans: list[tuple[int, int]]) -> list[Graft]:
        """Cut graft `gid` into child grafts along token spans [start, end): each gets its own
        payload slice (keys keep their seats), routing keys and lineage to the parent."""
        g = self.get(gid)
        if not spans:
            raise UserInputError("slice needs at least one span")
        for a, b in spans:
            if not (0 <= a < b <= g.tokens):
                raise UserInputError(f"span [{a}, {b}) is not inside graft {gid[:12]} ({g.tokens} tokens)")
        kv = self.load(gid)
        if kv is None:
            raise UserInputError(f"graft {gid[:12]} has no payload that verifies; cannot slice it")
        if gid in self.lossy_ids:  # slices are stored as exact payloads: never from dequantized K/V
            raise UserInputError(f"graft {gid[:12]} is archived (lossy K/V only); cannot slice it")
        tok = self.lm.tokenizer
        children = []
        for a, b in spans:
            ids = list(g.ids[a:b])
            text = tok.decode(ids)
            children.append(self.harvest(kv.slice(a, b), g.seat + a, text, ids, g.kind, sources=(g.id,),
                                         salt=f"slice:{g.id}:{a}:{b}", parent=g.id, span=(a, b)))
        return children

    def retire(self, gids: list[str], into: str) -> None:
        """Mark grafts as folded into `into` (kept, never routed): a new version of each record."""
        for gid in gids:
            rec = self.store.get(self.tenant, KIND, gid)
            if rec is None:
                continue
            meta = dict(rec.meta, retired=True, folded_into=into)
            self.store.put(self.tenant, KIND, gid, parent=rec.parent, text=rec.text, meta=meta,
                           payload=self.store.read_payload(rec) if rec.payload else None)

    # ----- routing -----------------------------------------------------------------------------
    def route(self, query: str, *, exclude: frozenset[str] = frozenset(), channel: str | None = None,
              k: int | None = None, seat_budget: int | None = None) -> list[Routed]:
        """The grafts to mount for `query`, best first, that fit the seat budget, each with its
        scores. Retired grafts, other models' grafts and `exclude` are never chosen."""
        if not query or not query.strip():
            raise UserInputError("empty query")
        cfg = self.config
        channel = channel or cfg.channels.channel
        k = k or cfg.k
        budget = seat_budget or cfg.seat_budget

        def keep(rec: Record) -> bool:
            return self._mine(rec) and not rec.meta.get("retired") and rec.key not in exclude

        lexical = {} if channel == "dense" else {
            h.record.key: h for h in search(self.store, self.tenant, query, KIND, cfg.channels.lexical, keep=keep)}
        dense, bounds = ({}, None) if channel == "lexical" else self._dense_scores(
            query, lexical, exclude, keep, only_lexical=channel == "combined" and cfg.require_lexical,
            at_least=max(DENSE_CANDIDATES, 8 * k))
        hits: list[Hit] = combine(lexical, dense, channel, cfg.channels.dense_weight, bounds)
        if channel == "combined" and cfg.require_lexical:
            hits = [h for h in hits if h.record.key in lexical]
        # a turn that only asked ("User: What is my locker code?") shares the next question's
        # words without being evidence of the answer: it ranks at QUESTION_TURN_WEIGHT
        hits = sorted((replace(h, score=h.score * QUESTION_TURN_WEIGHT)
                       if h.record.meta.get("kind") == "evidence" and only_asks(h.record.text or "") else h
                       for h in hits), key=lambda h: -h.score)
        floor = hits[0].score * cfg.relative_floor if hits and hits[0].score > 0 else float("-inf")
        out, used, chosen, parents = [], 0, set(), set()
        for h in hits:
            if len(out) == k:
                break
            if h.score < floor and not h.identifiers:
                continue
            g = Graft.from_record(h.record)
            if used + g.tokens > budget or g.id in parents or (g.parent and g.parent in chosen):
                continue  # over the seat budget, or the parent or a slice of a graft already chosen
            chosen.add(g.id)
            if g.parent:
                parents.add(g.parent)
            out.append(Routed(g, h.score, h.bm25, h.identifiers, h.dense))
            used += g.tokens
        return self._by_meaning(query, out, budget - used, keep)

    def _meaning_scores(self, vec) -> list:
        """[(row, centred cosine)] of every graft with a meaning vector, best first (the index
        brought up to the store's LSN first)."""
        index = self.index()
        with index.lock:
            index.refresh()
            return self._meaning.scores(vec) if self._meaning is not None else []

    def _by_meaning(self, query: str, routed: list[Routed], budget: int, keep) -> list[Routed]:
        """`routed` and after it (mounted further from the question) up to `RouteConfig.meaning`
        grafts whose meaning is nearest the query's, at a centred cosine of at least
        `meaning_floor`: not a turn that only asks, not a slice's parent or child of one routed,
        within `budget` seats (grm/route/meaning.py). With `RouteConfig.agree`, a turn or fact
        routed by its words alone whose meaning is below the floor for the query, and that holds
        none of its names or numbers, is not mounted (a word shared by chance: "our" in "what
        number turns off our burglar system?"); its seats go to what the meaning finds."""
        cfg = self.config
        if not cfg.meaning:
            return routed
        vec = self.query_vectors.get(self.lm.model, self.lm.tokenizer, query)
        if vec is None:
            return routed
        scores = self._meaning_scores(vec)
        if cfg.agree:
            cosine = {row.key: cos for row, cos in scores}
            agreed = [r for r in routed if r.identifiers or cosine.get(r.graft.id, cfg.meaning_floor) >= cfg.meaning_floor]
            budget += sum(r.graft.tokens for r in routed) - sum(r.graft.tokens for r in agreed)
            routed = agreed
        taken = {r.graft.id for r in routed} | {r.graft.parent for r in routed if r.graft.parent}
        out = list(routed)
        for row, cos in scores:
            if len(out) - len(routed) == cfg.meaning or cos < cfg.meaning_floor:
                break
            if row.asks or row.key in taken:
                continue
            rec = self.store.get(self.tenant, KIND, row.key)
            if rec is None or not keep(rec):
                continue
            g = Graft.from_record(rec)
            if g.tokens > budget or (g.parent and g.parent in taken):
                continue
            out.append(Routed(g, cos, 0.0, (), 0.0, cos))
            taken.add(g.id)
            budget -= g.tokens
        return out

    def later(self, routed: list[Routed], exclude: frozenset[str] = frozenset(),
              seat_budget: int | None = None) -> list[Routed]:
        """`routed` with each graft's later mentions placed before it (best first: so mounted
        after it, nearer the question): up to `RouteConfig.later` evidence turns written after it
        that share its rare words (content words at most `RouteConfig.rare` routable grafts hold),
        ranked as lexical routing ranks them (BM25 over those words, a shared name or number
        first), not a turn that only asks, within the seat budget. What was said
        later about the same name or value is read after it, as a conversation reads; the routed
        score is the source's (`identifiers` names the words shared). With the meaning channel
        (`RouteConfig.meaning`), also the later turn nearest it in meaning, which may share no
        word with it (`_later_in_meaning`); where that turn was routed itself, it moves to be read
        after this one (a statement and its update both routed for their meaning: the update last).
        With `RouteConfig.pair`, only the first such pair; with `RouteConfig.replace`, the later
        turn instead of the routed one."""
        cfg = self.config
        if not (cfg.later or cfg.meaning) or not routed:
            return routed
        _, df = self.index().frequencies()
        budget = (seat_budget or cfg.seat_budget) - sum(r.graft.tokens for r in routed)
        taken = {r.graft.id for r in routed} | set(exclude)
        mates = {r.graft.id: r for r in routed}  # a routed turn may be another's later turn in meaning
        placed: set[str] = set()
        out: list[Routed] = []
        for r in routed:
            if r.graft.id in placed:
                continue  # placed already, after the routed turn it updates
            words = list(dict.fromkeys(w for w in WORD.findall(declarative(r.graft.text))
                                       if w.casefold() not in STOP_WORDS | TURN_LABELS
                                       and 2 <= df.get(stem(w), 0) <= cfg.rare))
            after: list[Routed] = []
            if cfg.later and words and r.graft.kind != "digest":
                def keep(rec: Record, src: Graft = r.graft) -> bool:
                    return (self._mine(rec) and not rec.meta.get("retired") and rec.key not in taken
                            and rec.meta.get("kind") == "evidence" and float(rec.meta.get("created", 0.0)) > src.created
                            and not only_asks(rec.text or ""))
                for h in search(self.store, self.tenant, " ".join(words), KIND, LexicalConfig(), keep=keep):
                    g = Graft.from_record(h.record)
                    if len(after) == cfg.later or g.tokens > budget:
                        continue
                    shared = tuple(w for w in words if w.casefold() in (g.text or "").casefold())
                    after.append(Routed(g, r.score, h.bm25, shared, r.dense))
                    taken.add(g.id)
                    budget -= g.tokens
            nearest = self._later_in_meaning(r, (taken - mates.keys()) | placed | {r.graft.id}, budget, mates.keys())
            if nearest is not None and cfg.pair:
                return [mates.get(nearest.graft.id, nearest), r]  # best first: the later turn read last
            if nearest is not None and cfg.replace:  # the later turn in r's place, r left out
                budget += r.graft.tokens
                if nearest.graft.id not in mates:
                    taken.add(nearest.graft.id)
                    budget -= nearest.graft.tokens
                out.extend(after)
                out.append(mates.get(nearest.graft.id, nearest))
                placed.update([*(a.graft.id for a in after), nearest.graft.id, r.graft.id])
                continue
            if nearest is not None and nearest.graft.id in mates:  # routed too: moved to be read after r
                after.append(mates[nearest.graft.id])
            elif nearest is not None:
                after.append(nearest)
                taken.add(nearest.graft.id)
                budget -= nearest.graft.tokens
            out.extend(after)  # best first: the best-matching later turn is mounted last, nearest the question
            out.append(r)
            placed.update(a.graft.id for a in after)
            placed.add(r.graft.id)
        return out

    def _later_in_meaning(self, r: Routed, taken: set[str], budget: int, seated=frozenset()) -> Routed | None:
        """The evidence turn written after `r`'s graft that is nearest it in meaning (centred cosine
        at least `meaning_floor`), not one that only asks, not `taken`, within `budget` seats: an
        update in other words than its statement ("Ally has my paycheck now." after "My bank is
        Chase."); a turn in `seated` (routed already) has its seats counted. None without the
        meaning channel or such a turn."""
        cfg = self.config
        if not cfg.meaning or r.graft.kind not in MEANING_KINDS or self._meaning is None:
            return None
        vec = self._meaning.vector(r.graft.id)
        if vec is None:
            return None
        for row, cos in self._meaning_scores(vec):
            if cos < cfg.meaning_floor:
                return None
            if row.asks or row.key in taken or row.kind != "evidence" or row.created <= r.graft.created:
                continue
            rec = self.store.get(self.tenant, KIND, row.key)
            if rec is None or not self._mine(rec) or rec.meta.get("retired"):
                continue
            g = Graft.from_record(rec)
            if g.tokens <= budget or g.id in seated:
                return Routed(g, r.score, 0.0, (), r.dense, cos)
        return None

    def grounding(self, query: str, routed: list[Routed], floor: float | None = None,
                  also: tuple[str, ...] = ()) -> Grounding:
        """Whether `routed` (and the texts `also` mounted, a chat's live window) hold anything on
        `query` (grm/grafts/floor.py), with document frequencies over this tenant's routable
        grafts; `floor`: the config's by default."""
        floor = self.config.abstain_floor if floor is None else floor
        freq = DocumentFrequencies.counted(*self.index().frequencies())
        return ground(query, [r.graft.text for r in routed] + list(also), freq, floor)

    def similarity(self, query: str, exclude: frozenset[str] = frozenset()) -> DenseScores:
        """Every routable graft's dense score for `query`: the model's own keys of it (one short
        forward pass) against the index in one matrix product (grm/route/index.py)."""
        ex = self.exact
        q = ex.query_keys.get(self.lm.model, ex.sinks(), self.lm.tokenizer.encode(query.strip()), ex.dialect,
                              self.config.channels.dense)
        return self.index().dense(q, exclude)

    def _dense_scores(self, query: str, lexical: dict[str, Hit], exclude: frozenset[str], keep, *, only_lexical: bool,
                      at_least: int) -> tuple[dict[str, tuple[Record, float]], tuple[float, float] | None]:
        """The dense channel: (candidates' cosines, (lowest, highest) cosine over every routable
        graft), scored against the index in one matrix product (grm/route/index.py)."""
        scores = self.similarity(query, exclude)

        def fetch(key: str) -> Record | None:
            rec = self.store.get(self.tenant, KIND, key)
            return rec if rec is not None and keep(rec) else None

        return candidates(scores, lexical, None if only_lexical else fetch, at_least), scores.bounds()
