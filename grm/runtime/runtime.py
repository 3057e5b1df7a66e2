"""The Runtime: the loop that ties model, dialect, store and memory together.

Lifecycle: `Runtime.open(...)` loads the model, builds its dialect and runs the graftability
self-test (refusing a dialect that fails), opens the store; then any number of `ingest` and
`ask` calls; `close()` (or leaving the `with` block) releases the store.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

import torch
from tqdm import tqdm

from grm.archive.tier import ArchiveTier
from grm.dialects import Dialect, SelfTestResult, dialect_for, self_test
from grm.dialects.selftest import PROBE_TEXT
from grm.errors import UserInputError
from grm.exact import ExactConfig, ExactMemory, IngestResult, Prefix
from grm.grafts import GraftMemory, Mount, PagingConfig, Residency, RouteConfig, build
from grm.kv import cache_from_kv, new_cache, reseat_kv
from grm.kv.forward import prefill
from grm.models import LoadedModel, load_model
from grm.runtime.chat import ChatSession
from grm.runtime.policy_glue import PolicyGlue
from grm.runtime.config import ASK_MODES, LAYOUTS, RuntimeConfig, default_cache_dir, default_store_dir
from grm.runtime.files import collect
from grm.runtime.generate import Answer, greedy
from grm.sections import SectionConfig, SectionMemory
from grm.store import Store, StoreConfig

log = logging.getLogger("grm")
QUESTION_TEMPLATE = "\n\nQuestion: {q}\nAnswer:"


def question_text(question: str) -> str:
    """The text read after memory: the question template, unless the question already starts its
    own answer ("...?\nAnswer: The X is"), which small models recall best with."""
    q = question.strip()
    return f"\n\nQuestion: {q}" if "\nAnswer:" in q else QUESTION_TEMPLATE.format(q=q)


class Runtime:
    def __init__(self, config: RuntimeConfig, lm: LoadedModel, dialect: Dialect, selftest: SelfTestResult,
                 store: Store) -> None:
        self.config, self.lm, self.dialect, self.selftest, self.store = config, lm, dialect, selftest, store
        self.exact = ExactMemory(store, lm, dialect, config.tenant, ExactConfig(block_tokens=config.block_tokens))
        self.sections = SectionMemory(self.exact, SectionConfig(section_tokens=config.section_tokens))
        self.archive = ArchiveTier(store, dialect, lm.identity, piece=lambda t: lm.tokenizer.decode([t]))
        self.grafts = GraftMemory(self.exact, RouteConfig(k=config.graft_k, seat_budget=config.seat_budget,
                                                          channel=config.channel), archive=self.archive)
        self._glue: PolicyGlue | None = None  # the policy plane as `ask` sees it (built on first use)
        self.residency = Residency(PagingConfig(device_budget=config.device_budget), self.grafts.load,
                                   device=lm.model.device)

    @classmethod
    def open(cls, store: str | Path | None = None, model: str | None = None, tenant: str = "default",
             threads: int | None = None, cache_dir: str | Path | None = None, durability: str = "normal",
             block_tokens: int = 512, section_tokens: int = 512, graft_k: int = 3,
             max_new_tokens: int = 48, master_key: bytes | None = None, compress: bool = False,
             device_budget: int = 64 << 20, seat_budget: int = 1536, repair: int = 0,
             channel: str = "combined") -> "Runtime":
        config = RuntimeConfig(
            store=Path(store).expanduser() if store is not None else default_store_dir(),
            cache_dir=Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir(),
            model=model or RuntimeConfig.model, tenant=tenant, threads=threads, durability=durability,
            block_tokens=block_tokens, section_tokens=section_tokens, graft_k=graft_k,
            max_new_tokens=max_new_tokens, master_key=master_key, compress=compress,
            device_budget=device_budget, seat_budget=seat_budget, repair=repair, channel=channel,
        )
        if config.threads:
            torch.set_num_threads(config.threads)
        lm = load_model(config.model, config.cache_dir, log=log.info)
        dialect = dialect_for(lm.model)
        result = self_test(dialect, lm.model, list(lm.tokenizer.sink_ids) + lm.tokenizer.encode(PROBE_TEXT))
        st = Store.open(StoreConfig(root=config.store, durability=config.durability,
                                    master_key=config.master_key, compress=config.compress))
        return cls(config, lm, dialect, result, st)

    def __enter__(self) -> "Runtime":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.store.close()

    # ----- ingest ------------------------------------------------------------------------------
    def ingest(self, paths: list[str | Path] | str | Path, layout: str = "chain",
               progress: bool = True) -> list[IngestResult]:
        """Read files/folders once and store their exact blocks. Raises UserInputError if nothing
        could be ingested; skips (with a warning) empty or binary files."""
        if layout not in LAYOUTS:
            raise UserInputError(f"bad layout {layout!r}: one of {', '.join(LAYOUTS)}")
        if isinstance(paths, (str, Path)):
            paths = [paths]
        docs = collect(list(paths))
        if not docs:
            raise UserInputError("nothing could be ingested (every file was empty, binary or unreadable)")
        memory = self.exact if layout == "chain" else self.sections
        plans = [memory.plan_blocks(d.text) if layout == "chain" else memory.plan(d.text) for d in docs]
        results = []
        with tqdm(total=sum(plans), desc="ingest", unit="block", disable=not progress, leave=False) as bar:
            for doc in docs:
                res = memory.ingest(doc.text, doc.name, progress=bar.update)
                if layout == "sections":  # each section, read alone after the sinks, is also a graft
                    self.grafts.adopt_blocks(doc.name, res.keys)
                if res.truncated_bytes:
                    log.warning("%s: %d bytes past the model's window were not stored as chain blocks",
                                doc.name, res.truncated_bytes)
                results.append(res)
        return results

    # ----- ask ---------------------------------------------------------------------------------
    def ask(self, question: str, mode: str = "auto", max_new_tokens: int | None = None) -> Answer:
        """Answer from memory. `exact` reads `question` as the whole prompt after the sinks."""
        t0 = time.perf_counter()
        if mode not in ASK_MODES:
            raise UserInputError(f"bad mode {mode!r}: one of {', '.join(ASK_MODES)}")
        if not question or not question.strip():
            raise UserInputError("empty question")
        max_new = max_new_tokens or self.config.max_new_tokens
        if mode == "none":
            return self._ask_none(question, max_new, t0)
        if mode == "auto":
            ids = self.lm.tokenizer.encode(question)
            mode = "exact" if self.exact.match(question, ids)[0] else "exact-section"
        if mode == "exact":
            return self._ask_exact(question, max_new, t0, mode)
        if mode == "grafts":
            return self._ask_grafts(question, max_new, t0)
        return self._ask_sections(question, mode, max_new, t0)

    def chat(self, clear_context: bool = False, window_turns: int = 4, fold: bool = False,
             digester=None, policy: dict | None = None) -> ChatSession:
        """A conversation with memory: `send(text) -> Reply` per turn (grm/runtime/chat.py).
        fold: fold old turns into digests/eras; policy: PolicyConfig fields to override."""
        return ChatSession(self, clear_context=clear_context, window_turns=window_turns, fold=fold,
                           digester=digester, policy=policy)

    def check_window(self, n: int, max_new: int) -> None:
        if n + max_new > self.dialect.max_positions:
            raise UserInputError(
                f"prompt too long: {n} tokens + {max_new} to generate exceed the model's "
                f"{self.dialect.max_positions}-token window"
            )

    def exact_context(self, prompt: str, max_new: int = 0) -> tuple[object, torch.Tensor, int, int, Prefix]:
        """Cache + next-token logits for `prompt` read after the sinks, stored blocks loaded.
        Returns (cache, logits, seats used, tokens from memory, prefix)."""
        ids = self.lm.tokenizer.encode(prompt)
        self.check_window(len(self.exact.sink_ids) + len(ids), max_new)
        prefix = self.exact.load_prefix(prompt, ids)
        rest_ids = ids[prefix.matched_tokens:]
        kv, from_memory = prefix.kv, prefix.tokens
        pending = [list(b.ids) for b in prefix.pending]
        if not rest_ids and not pending:
            # The whole prompt is stored: re-read its last token to get the next-token logits.
            kv, rest_ids, from_memory = kv.slice(0, kv.tokens - 1), [prefix.last_id], from_memory - 1
        cache = cache_from_kv(kv)
        seat = kv.tokens
        logits = None
        for ids in pending + ([rest_ids] if rest_ids else []):
            logits = prefill(self.lm.model, cache, ids, seat)
            seat += len(ids)
        return cache, logits, seat, from_memory, prefix

    def _ask_exact(self, prompt: str, max_new: int, t0: float, mode: str) -> Answer:
        cache, logits, seat, from_memory, prefix = self.exact_context(prompt, max_new)
        text, _ids, ttft = greedy(self.lm.model, self.lm.tokenizer, cache, logits, seat, max_new, t0)
        return Answer(
            answer=text, mode="exact", ttft_s=ttft, total_s=time.perf_counter() - t0,
            prompt_tokens=seat, tokens_from_memory=from_memory, tokens_computed=seat - from_memory,
            mounted=[{"id": r.key, "score": 1.0} for r in prefix.blocks],
        )

    def _ask_sections(self, question: str, mode: str, max_new: int, t0: float) -> Answer:
        """exact-section: [sinks | selected section's stored K/V | question]; rag-text: the same
        section re-read as text."""
        tok = self.lm.tokenizer
        hits = self.sections.select(question, k=1)
        if not hits:
            log.warning("no stored section matches the question; answering without memory")
            return self._ask_none(question, max_new, t0)
        q_ids = tok.encode(question_text(question))
        sinks = self.exact.sinks()
        cache = cache_from_kv(sinks)
        seat, from_memory = sinks.tokens, sinks.tokens
        for hit in reversed(hits):  # least relevant first: the best one ends next to the question
            if mode == "rag-text":
                ids = tok.encode(hit.record.text or "")
                kv = None
            else:
                kv, ids = self.sections.load(hit.record)
            self.check_window(seat + len(ids) + len(q_ids), max_new)
            if kv is None:  # rag-text, or a miss: read the section's text (after the sinks' seats)
                prefill(self.lm.model, cache, ids, seat)
            else:
                kv = reseat_kv(kv, self.dialect, seat - sinks.tokens)  # no rotation at delta 0
                for layer in range(kv.keys.shape[0]):
                    cache.update(kv.keys[layer][None], kv.values[layer][None], layer)
                from_memory += kv.tokens
            seat += len(ids)
        logits = prefill(self.lm.model, cache, q_ids, seat)
        seat += len(q_ids)
        text, _ids, ttft = greedy(self.lm.model, tok, cache, logits, seat, max_new, t0)
        return Answer(
            answer=text, mode=mode, ttft_s=ttft, total_s=time.perf_counter() - t0, prompt_tokens=seat,
            tokens_from_memory=from_memory, tokens_computed=seat - from_memory,
            mounted=[{"id": h.record.key, "score": round(h.score, 4)} for h in hits],
        )

    def _ask_grafts(self, question: str, max_new: int, t0: float) -> Answer:
        """[sinks | the top routed grafts, least relevant first | question]. Composed grafts never
        attended to each other, so the answer is not an exact hit (lossy) once two are mounted."""
        if self._glue is None:
            self._glue = PolicyGlue(self, None)
        exclude = self._glue.exclusions()  # never a superseded fact, a stale turn, a folded one
        routed = self._glue.descend(self.grafts.route(question, exclude=exclude), question, exclude)
        if not routed:
            log.warning("no stored graft matches the question; answering without memory")
            return self._ask_none(question, max_new, t0)
        mounts = [Mount(r.graft.id, list(r.graft.ids), r.graft.seat, self.residency.get(r.graft.id), r.score)
                  for r in reversed(routed)]
        q_ids = self.lm.tokenizer.encode(question_text(question))
        sinks = self.exact.sinks()
        self.check_window(sinks.tokens + sum(len(m.ids) for m in mounts) + len(q_ids), max_new)
        arena = build(self.lm.model, self.dialect, sinks, mounts, repair=self.config.repair)
        logits = prefill(self.lm.model, arena.cache, q_ids, arena.seat)
        seat = arena.seat + len(q_ids)
        text, _ids, ttft = greedy(self.lm.model, self.lm.tokenizer, arena.cache, logits, seat, max_new, t0)
        self.residency.end_turn()
        return Answer(
            answer=text, mode="grafts", ttft_s=ttft, total_s=time.perf_counter() - t0, prompt_tokens=seat,
            tokens_from_memory=arena.from_memory, tokens_computed=seat - arena.from_memory,
            mounted=[r.to_json() for r in routed],
            lossy=len(routed) > 1 or any(r.graft.id in self.grafts.lossy_ids for r in routed),
        )

    def stored_text(self) -> str:
        """Every stored document of this tenant, in ingest order, joined by blank lines."""
        docs = sorted(self.store.records(self.config.tenant, "document"), key=lambda r: r.lsn)
        texts = []
        for rec in docs:
            data = self.store.read_payload(rec)
            if data is not None:
                texts.append(data.decode("utf-8"))
        return "\n\n".join(texts)

    def _ask_none(self, question: str, max_new: int, t0: float) -> Answer:
        """No memory: the last tokens of the stored text that fit the window, then the question."""
        tok = self.lm.tokenizer
        sinks = list(tok.sink_ids)
        q_ids = tok.encode(question_text(question))
        room = self.dialect.max_positions - len(sinks) - len(q_ids) - max_new
        self.check_window(len(sinks) + len(q_ids), max_new)
        ctx = tok.encode(self.stored_text())[-room:] if room > 0 else []
        ids = sinks + ctx + q_ids
        cache = new_cache()
        logits = prefill(self.lm.model, cache, ids, 0)
        text, _ids, ttft = greedy(self.lm.model, tok, cache, logits, len(ids), max_new, t0)
        return Answer(
            answer=text, mode="none", ttft_s=ttft, total_s=time.perf_counter() - t0,
            prompt_tokens=len(ids), tokens_from_memory=0, tokens_computed=len(ids),
        )

    def stats(self) -> dict:
        st = self.store.stats()
        return {"model": self.lm.name, "identity": self.lm.identity, "tenant": self.config.tenant,
                "dialect": {"family": self.dialect.family, "profile": self.dialect.profile,
                            "selftest_max_rel_error": self.selftest.max_rel_error},
                "store": st, "exact": dict(self.exact.counters),
                "grafts": {**self.residency.counters, "peak_device_bytes": self.residency.peak_device_bytes},
                "archive": dict(self.archive.counters)}
