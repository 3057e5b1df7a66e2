"""Sections: documents split along their structure, each section read ALONE after the sinks.

A section is an exact block whose parent is the sinks (seat = number of sink tokens), so the
same bytes always give the same fingerprint, and answering from `[sinks | section | question]`
with the stored K/V is bit-identical to reading that section cold. Selection runs on the CPU
(the lexical channel: BM25 + identifiers); no generation. The whole document is kept byte-exact
as a `document` record.
"""

from __future__ import annotations

from dataclasses import dataclass
from collections.abc import Callable, Collection, Iterable

from grm.exact import ExactMemory, IngestResult, fingerprint, split_blocks
from grm.kv import KV
from grm.kv.forward import read_after_sinks
from grm.route import CHANNELS, Channels, Hit, combine, search
from grm.route.dense import encode_key, key_width, routing_key
from grm.route.index import DENSE_CANDIDATES, DenseIndex, candidates
from grm.store import Record
from grm.store.kinds import BLOCK


@dataclass(frozen=True)
class SectionConfig:
    section_tokens: int = 512  # token budget of one section (leave room for the question)
    # the channel `select` uses unless told: lexical, because on the recall benchmark it picked the
    # right section for 100/100 questions, combined for 99, dense alone for 2, and it costs no
    # forward pass of the question (bench/results/recall.md)
    channels: Channels = Channels(channel="lexical")

    def __post_init__(self) -> None:
        if self.section_tokens < 8:
            raise ValueError("section_tokens must be >= 8")


class SectionMemory:
    def __init__(self, exact: ExactMemory, config: SectionConfig,
                 words: Callable[[str], Iterable[str]] | None = None) -> None:
        """`words(text)`: a section's content words, counted by the index for the caller's
        document frequencies (the runtime's abstain floor); None: not counted."""
        self.exact, self.config, self.words = exact, config, words
        self._index: DenseIndex | None = None

    def plan(self, text: str) -> int:
        """How many distinct sections `text` becomes (for progress bars)."""
        return len(set(self.keys(text)))

    def ingest(self, text: str, name: str, progress: Callable[[int], None] | None = None,
               document: bool = True, counted: Collection[str] = ()) -> IngestResult:
        """Store each section's K/V (read after the sinks alone); idempotent and resumable. The
        document record too, unless `document` is False (the caller writes it). `progress(1)` is
        told of each distinct section once, never of one whose key is in `counted` (blocks the
        caller already counted: the chain's first block is the first section)."""
        ex = self.exact
        sinks = ex.sinks()
        seat = sinks.tokens
        sections = split_blocks(text, ex.lm.tokenizer, self.config.section_tokens)
        fps, computed, seen = [], 0, set(counted)
        for i, sec in enumerate(sections):
            ids, fp = self._key(sec.text)
            fps.append(fp)
            if not ex.stored(fp):
                kv = read_after_sinks(ex.lm.model, sinks, ids)
                dense = encode_key(routing_key(kv, ex.dialect, seat, self.config.channels.dense))
                ex.put_block(kv, fp, ex.sink_fp, seat, sec.text, ids,
                             {"doc": name, "index": i, "layout": "sections", "dense": dense})
                computed += 1
            if progress and fp not in seen:
                progress(1)
            seen.add(fp)
        if document:
            ex.put_document(text, name, "sections", fps)
        return IngestResult(name, len(set(fps)), computed, sum(len(s.ids) for s in sections), keys=fps)

    def keys(self, text: str) -> list[str]:
        """The block keys of `text`'s sections (stored or not), as `ingest` names them."""
        sections = split_blocks(text, self.exact.lm.tokenizer, self.config.section_tokens)
        return [self._key(sec.text)[1] for sec in sections]

    def _key(self, section: str) -> tuple[list[int], str]:
        """(token ids, block key) of a section: read alone, so its own reading after the sinks."""
        ex = self.exact
        ids = ex.lm.tokenizer.encode(section)
        return ids, fingerprint(ex.lm.identity, ex.tenant, ex.sink_fp, section.encode(), ids)

    def select(self, question: str, k: int = 1, channel: str | None = None) -> list[Hit]:
        """The k sections that best match `question` (CPU only, no generation), best first, each
        with its scores: why it was chosen. channel: combined | lexical | dense (default: the
        config's)."""
        channel = channel or self.config.channels.channel
        if channel not in CHANNELS:
            raise ValueError(f"channel must be one of {CHANNELS}")
        ex = self.exact
        lexical = {} if channel == "dense" else {
            h.record.key: h for h in search(ex.store, ex.tenant, question, BLOCK, self.config.channels.lexical,
                                            keep=lambda r: r.parent == ex.sink_fp)}
        dense, bounds = ({}, None) if channel == "lexical" else self._dense_scores(question, lexical, k)
        return combine(lexical, dense, channel, self.config.channels.dense_weight, bounds)[:k]

    def index(self) -> DenseIndex:
        """The in-memory index of the sections read after the sinks (grm/route/index.py): dense
        keys and, given `words`, word counts; built on first use, kept in step by the store's LSN."""
        if self._index is None:
            ex = self.exact
            self._index = DenseIndex(ex.store, ex.tenant, BLOCK, key_width(ex.dialect, self.config.channels.dense),
                                     lambda r: r.state == "active" and r.parent == ex.sink_fp, self.words)
        return self._index

    def _dense_scores(self, question: str, lexical: dict[str, Hit], k: int) -> tuple[dict, tuple[float, float] | None]:
        """(candidates' cosines, (lowest, highest) cosine over every section read after the sinks
        that carries a dense key of this geometry): the lexical hits and the best by cosine."""
        ex = self.exact
        ids = ex.lm.tokenizer.encode(question.strip())
        q = ex.query_keys.get(ex.lm.model, ex.sinks(), ids, ex.dialect, self.config.channels.dense)
        scores = self.index().dense(q)

        def fetch(key: str) -> Record | None:
            rec = ex.store.get(ex.tenant, BLOCK, key)
            return rec if rec is not None and rec.state == "active" and rec.parent == ex.sink_fp else None

        return candidates(scores, lexical, fetch, max(DENSE_CANDIDATES, 8 * k)), scores.bounds()

    def load(self, rec: Record) -> tuple[KV | None, list[int]]:
        """A selected section's K/V, verified (None = miss), and its token ids."""
        ex = self.exact
        text = rec.text or ""
        ids = rec.meta.get("ids")
        if not isinstance(ids, list):  # a row from before ids were kept: its own reading
            ids = ex.lm.tokenizer.encode(text)
        if fingerprint(ex.lm.identity, ex.tenant, ex.sink_fp, text.encode(), ids) != rec.key:
            ex.count_miss()
            return None, ex.lm.tokenizer.encode(text)
        return ex.load_verified(rec, ex.sink_fp, ex.sinks().tokens, ids, text), ids
