"""The Runtime: the loop that ties model, dialect, store and memory together.

Lifecycle: `Runtime.open(RuntimeConfig(...))` (or keyword shortcuts) loads the model, builds its
dialect and runs the graftability self-test (refusing a dialect that fails), opens the store;
then any number of `ingest`, `ask` and `chat` calls; `close()` (or leaving the `with` block)
releases the store. `for_tenant(name)` gives a view on another tenant that shares the loaded
model and the open store (one process, one model, many tenants: the server).
Every answer goes through the one pipeline in grm/runtime/answer.py.
"""

from __future__ import annotations

import hashlib
import logging
import time
from dataclasses import replace
from pathlib import Path
from typing import Callable, Generator, TypeVar

import torch
from tqdm import tqdm

from grm.archive.tier import ArchiveTier
from grm.dialects import Dialect, SelfTestResult, dialect_for, kept_self_test
from grm.dialects.selftest import PROBE_TEXT
from grm.errors import UserInputError, redact
from grm.exact import ExactConfig, ExactMemory, IngestResult
from grm.exact.tier import HostTier
from grm.grafts import GraftMemory, PagingConfig, Residency, RouteConfig, reread
from grm.grafts.floor import DEFAULT_FLOOR, declarative, terms
from grm.grafts.reread import Costs
from grm.kv.forward import Reads, prefill, read_after_sinks, watch
from grm.kv.place import HostBuffers
from grm.models import LoadedModel, load_model
from grm.route import Channels
from grm.runtime import answer as pipeline
from grm.runtime import execute
from grm.runtime import batch as batching
from grm.runtime.answer import Context, Generation, Ready
from grm.runtime.question import lead_for, meaning_for, question_text, rules_for
from grm.runtime.chat import ChatSession
from grm.runtime.config import (ASK_MODES, CHAIN_LAYOUTS, DEFAULT_LAYOUT, FIRST_BLOCKS, LAYOUTS, MEANING_PICKS,
                                SECTION_LAYOUTS, RuntimeConfig)
from grm.runtime.documents import Documents
from grm.runtime.files import Document, collect
from grm.runtime.generate import Answer
from grm.runtime.model_lead import ModelLead
from grm.runtime.policy_glue import PolicyGlue
from grm.sections import SectionConfig, SectionMemory
from grm.store.backend import StoreBackend
from grm.store.kinds import DOCUMENT
from grm.store.opener import open_backend
from grm.store.tiering import UseLog

log = logging.getLogger("grm")
__all__ = ["Runtime", "question_text"]
T = TypeVar("T")
WARM_UP_TOKENS = 16  # the question-shaped read of `Runtime.warm_up`


class Runtime:
    def __init__(self, config: RuntimeConfig, lm: LoadedModel, dialect: Dialect, selftest: SelfTestResult,
                 store: StoreBackend, owns_store: bool = True, uses: UseLog | None = None,
                 tier: HostTier | None = None, buffers: HostBuffers | None = None,
                 reads: Reads | None = None) -> None:
        self.config, self.lm, self.dialect, self.selftest, self.store = config, lm, dialect, selftest, store
        self._owns_store = owns_store
        # mounts counted for the tiering policy (grm/store/tiering.py), one log per process's store
        self.uses = uses if uses is not None else UseLog()
        # verified exact blocks kept in host RAM, one budget for every tenant's view (grm/exact/tier.py)
        if tier is None and owns_store and config.host_budget > 0:
            tier = HostTier(config.host_budget)
        self.tier = tier
        self.buffers = buffers if buffers is not None else HostBuffers()  # host memory loads reuse
        # what the model reads, one count per loaded model, shared by every tenant's view
        self.reads = reads if reads is not None else watch(lm.model)
        self.exact = ExactMemory(store, lm, dialect, config.tenant,
                                 ExactConfig(block_tokens=config.block_tokens, read_workers=config.threads),
                                 tier=tier, buffers=self.buffers)
        self.sections = SectionMemory(self.exact, SectionConfig(section_tokens=config.section_tokens),
                                      lambda text: terms(declarative(text)))  # the abstain floor's counts
        self.archive = ArchiveTier(store, dialect, lm.identity, piece=lambda t: lm.tokenizer.decode([t]))
        self.grafts = GraftMemory(self.exact, RouteConfig(k=config.graft_k, seat_budget=config.seat_budget,
                                                          channels=Channels(channel=config.channel),
                                                          abstain_floor=config.abstain_floor, later=config.later,
                                                          meaning=MEANING_PICKS if config.meaning == "on" else 0,
                                                          agree=config.agree, pair=config.pair,
                                                          replace=config.replace),
                                  archive=self.archive)
        self.residency = Residency(PagingConfig(device_budget=config.device_budget), self.grafts.load,
                                   device=lm.model.device)
        self._glue: PolicyGlue | None = None  # the tenant's one policy plane (built on first use)
        self._costs: Costs | None = None  # mount vs re-read costs (measured on first use)
        self._leads = ModelLead(lm)  # answer leads the model writes (lead="model"; K/V built on first use)
        self.ctx = Context(lm, dialect, self.exact, self.sections, self.grafts, self.residency, config,
                           self.policy_glue, self.mount_costs, self._leads.lead, self.reads)

    @classmethod
    def open(cls, config: RuntimeConfig | str | Path | None = None, **shortcuts: object) -> "Runtime":
        """Open a runtime from a RuntimeConfig, or from keyword shortcuts for its fields
        (`Runtime.open(store=..., model=..., tenant=...)`; `store` may also be given first)."""
        if not isinstance(config, RuntimeConfig):
            if config is not None:
                shortcuts = {"store": config, **shortcuts}
            config = RuntimeConfig.from_options(**shortcuts)  # type: ignore[arg-type]
        elif shortcuts:
            raise UserInputError("give a RuntimeConfig or keyword options, not both")
        if config.threads:
            torch.set_num_threads(config.threads)
        lm = load_model(config.model, config.cache_dir, log=log.info, device=config.device, dtype=config.dtype)
        if not lm.for_answers:
            log.warning("%s has random weights: its answers are meaningless (for speed and memory only)", lm.name)
        if lm.tokenizer.template is not None:
            lm.tokenizer.use_system(config.system_text(lm.tokenizer.template.system))
        if config.rules == "auto":
            config = replace(config, rules=rules_for(lm))
        if config.rules == "off":  # each family of the English layer left at its default is off (RuntimeConfig.rules)
            config = replace(config, lead="off" if config.lead == "auto" else config.lead,
                             abstain_floor=0.0 if config.abstain_floor == DEFAULT_FLOOR else config.abstain_floor)
        if config.lead == "auto":
            config = replace(config, lead=lead_for(lm))
        if config.meaning == "auto":
            config = replace(config, meaning=meaning_for(lm))
        dialect = dialect_for(lm.model)
        result = kept_self_test(dialect, lm.model, list(lm.tokenizer.sink_ids) + lm.tokenizer.encode(PROBE_TEXT),
                                lm.identity, config.cache_dir)
        st = open_backend(config.store, master_key=config.master_key, durability=config.durability,
                          compress=config.compress)
        return cls(config, lm, dialect, result, st)

    def __enter__(self) -> "Runtime":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._owns_store:
            self.store.close()

    def for_tenant(self, tenant: str) -> "Runtime":
        """This runtime's model and store, serving another tenant (validated like any tenant).
        Closing the view leaves the store open."""
        config = replace(self.config, tenant=tenant)
        return Runtime(config, self.lm, self.dialect, self.selftest, self.store, owns_store=False, uses=self.uses,
                       tier=self.tier, buffers=self.buffers, reads=self.reads)

    def policy_glue(self) -> PolicyGlue:
        """The policy plane of this tenant: one per runtime, shared by `ask` and every chat."""
        if self._glue is None:
            self._glue = PolicyGlue(self.ctx, self.store)
        return self._glue

    def warm_up(self) -> float:
        """Bring the model up to the speed it answers at, before a long-lived process (`grm serve`)
        says it is ready: the sinks' K/V (verified from the store, or computed and stored: every
        request mounts them), then two reads after them, discarded: a few tokens (a question's
        shape) and one (a decoding step's). A new process pages in its memory-mapped weights and
        sets up the CPU's kernels during its first forward calls (0.08-0.17 s of a first forward on
        Qwen2.5-Coder-1.5B in bf16, bench/results/first-forward-probe-session27.md; -0.02 to 0.14 s of a
        served first request, within noise, serve-first-request-probe-session28.md); a one-shot
        `grm ask` would only move that cost, so it does not call this. Not counted as reads.
        Returns the seconds it took."""
        t0 = time.perf_counter()
        sinks = self.exact.sinks()
        ids = self.lm.tokenizer.encode(PROBE_TEXT)[:WARM_UP_TOKENS]
        with self.reads.paused():
            for span in (ids, ids[:1]):
                read_after_sinks(self.lm.model, sinks, span)
        return time.perf_counter() - t0

    def mount_costs(self) -> Costs:
        """What mounting and re-reading a graft cost on this machine with this model, measured once
        (a few seconds on a CPU) and kept in the model cache (grm/grafts/reread.py)."""
        if self._costs is None:
            model, identity = self.lm.model, self.lm.identity
            name = hashlib.sha256(f"{identity} {reread.machine(model)}".encode()).hexdigest()[:24]
            path = self.config.cache_dir / "calibration" / f"{name}.json"
            if not path.exists():
                log.info("measuring mount and re-read costs for this model on this machine (once)")
            vocab = getattr(model.config, "text_config", None) or model.config
            sizes, repeats = reread.QUICK
            self._costs = reread.load_or_calibrate(path, model, self.dialect, identity, self.exact.sinks(),
                                                   vocab.vocab_size, sizes, repeats)
        return self._costs

    # ----- ingest ------------------------------------------------------------------------------
    def ingest(self, paths: list[str | Path] | str | Path, layout: str = DEFAULT_LAYOUT,
               progress: bool = True) -> list[IngestResult]:
        """Read files/folders once and store them (layout: `seen`, the default = sections for
        questions over the corpus, plus the document's first chain block; its other chain blocks
        are stored when a prompt that starts with the document is first read (`plan_exact`), so
        each byte of K/V is stored once per layout actually used; `both` = chain blocks and
        sections now, sharing their first block; `chain`; `sections`). Raises UserInputError if
        nothing could be ingested; skips (with a warning) empty or binary files."""
        if isinstance(paths, (str, Path)):
            paths = [paths]
        docs = collect(list(paths))
        if not docs:
            raise UserInputError("nothing could be ingested (every file was empty, binary or unreadable)")
        return self._ingest(docs, layout, progress)

    def ingest_text(self, text: str, name: str, layout: str = DEFAULT_LAYOUT,
                    progress: bool | Callable[[int], None] = False) -> IngestResult:
        """Store one document given as text (the server's documents endpoint); as `ingest`.
        `progress`: a bar on stderr, or a callable told each block done."""
        if not isinstance(text, str) or not text.strip():
            raise UserInputError(f"document {name!r} is empty")
        return self._ingest([Document(name, text)], layout, progress)[0]

    def plan_ingest(self, text: str, layout: str = DEFAULT_LAYOUT) -> int:
        """How many distinct blocks ingesting `text` with `layout` stores or finds: the progress
        total, and the `blocks` of its IngestResult (a block chain and sections share counts once)."""
        chain = self.exact.plan_keys(text)[:FIRST_BLOCKS.get(layout)] if layout in CHAIN_LAYOUTS else []
        sections = self.sections.keys(text) if layout in SECTION_LAYOUTS else []
        return len(set(chain) | set(sections))

    def _ingest(self, docs: list[Document], layout: str,
                progress: bool | Callable[[int], None]) -> list[IngestResult]:
        if layout not in LAYOUTS:
            raise UserInputError(f"bad layout {layout!r}: one of {', '.join(LAYOUTS)}")
        chain, sections = layout in CHAIN_LAYOUTS, layout in SECTION_LAYOUTS
        first = FIRST_BLOCKS.get(layout)  # `seen`: the chain's first block now (the first section, unless
        # they tokenize differently), the rest when a prompt first reads the document (plan_exact)
        total = sum(self.plan_ingest(d.text, layout) for d in docs)
        results = []
        # The bar counts what the summary's `blocks` counts: each distinct block once, stored now or found
        with torch.no_grad(), tqdm(total=total, desc="ingest", unit="block", leave=False,
                                   disable=not progress or callable(progress)) as bar:
            step = progress if callable(progress) else bar.update
            for doc in docs:
                res = self.exact.ingest(doc.text, doc.name, step, document=False, first=first) if chain else None
                if sections:  # each section, read alone after the sinks, is also a graft
                    sec = self.sections.ingest(doc.text, doc.name, step, document=False,
                                               counted=res.keys[:first] if res else ())
                    self.grafts.adopt_blocks(doc.name, sec.keys)
                # a `seen` document names its whole planned chain: the blocks a prompt stores later
                self.exact.put_document(doc.text, doc.name, layout, res.keys if res else [],
                                        sec.keys if sections else None)
                if res is None:
                    res = sec
                elif sections:
                    # the keys are the layout's own: the chain's (`both`), the sections' (`seen`: the chain's
                    # first block is the first section, unless they tokenize differently)
                    own = res if first is None else replace(sec, truncated_bytes=res.truncated_bytes)
                    res = replace(own, blocks=len(set(res.keys[:first]) | set(sec.keys)),
                                  computed=res.computed + sec.computed)
                if res.truncated_bytes:
                    log.warning("%s: %d bytes past the model's window were not stored as chain blocks",
                                doc.name, res.truncated_bytes)
                results.append(res)
        return results

    # ----- ask ---------------------------------------------------------------------------------
    def ask(self, question: str, mode: str = "auto", max_new_tokens: int | None = None, *,
            stop: tuple[str, ...] | list[str] = (), on_token: Callable[[str], bool | None] | None = None,
            store_prompt: bool = False, chat: bool = False, memory: bool = True,
            recall: str | None = None) -> Answer:
        """Answer from memory through the one pipeline (grm/runtime/answer.py).

        mode: `exact` reads `question` as the whole prompt after the sinks (stored blocks it starts
        with are loaded); `auto` is exact when it starts with a stored block, else exact-section.
        stop: extra stop strings; on_token(delta): streamed answer text (False cancels);
        store_prompt: store the prompt's new chain blocks (exact mode), so a later prompt that
        starts with it hits; chat: generation ends at end-of-turn, not at a blank line;
        memory=False: read the prompt after computed sinks, loading and storing nothing (the
        side-by-side baseline); recall (exact mode): route memory for this text (the latest user
        message) and mount what is routed just before the prompt's line that holds it."""
        steps = self.answering(question, mode, max_new_tokens, stop=stop, on_token=on_token,
                               store_prompt=store_prompt, chat=chat, memory=memory, recall=recall)
        return self.alone(steps)

    def answering(self, question: str, mode: str = "auto", max_new_tokens: int | None = None, *,
                  stop: tuple[str, ...] | list[str] = (), on_token: Callable[[str], bool | None] | None = None,
                  store_prompt: bool = False, chat: bool = False, memory: bool = True,
                  recall: str | None = None,
                  pauses: bool = False) -> Generator[execute.Decoding | pipeline.Pause, None, Answer]:
        """`ask` in two halves, for a caller that generates several answers together (the server's
        batch, grm/runtime/batch.py): the generator plans, loads and reads the prompt, then yields
        its `Decoding` (nothing yielded where nothing is generated: an abstention); the caller
        generates it (`Decoding.alone`, or in a batch) and resumes the generator, which returns the
        Answer. With `pauses` the prompt read yields a `Pause` before each of its forward calls
        (the caller steps its batch, then resumes it: chunked prefill), the same calls as without.
        The other arguments are `ask`'s; so is the answer, token for token, however generated."""
        t0 = time.perf_counter()
        if mode not in ASK_MODES:
            raise UserInputError(f"bad mode {mode!r}: one of {', '.join(ASK_MODES)}")
        if not isinstance(question, str) or not question.strip():
            raise UserInputError("empty question")
        if max_new_tokens is not None and max_new_tokens < 1:
            raise UserInputError("max_new_tokens must be >= 1")
        gen = Generation(max_new_tokens or self.config.max_new_tokens, tuple(stop), chat, on_token)
        with torch.no_grad():  # grad mode is per thread: a server's worker thread needs it too
            planned = self._plan(question, mode, gen.max_new_tokens, store_prompt, memory, recall, chat)
        if isinstance(planned, Ready):
            ready = planned
        else:  # recall: its history is read (pausing, as the prompt's rest is) before grafts are mounted after it
            ready = (yield from planned) if pauses else execute.through(planned)
        begun = execute.begin(self.ctx, ready, gen, t0)  # its forward calls run without grad
        dec = (yield from begun) if pauses else execute.through(begun)
        if isinstance(dec, execute.Decoding):
            yield dec
            answer = execute.conclude(dec)
        else:
            answer = dec
        if ready.routed:
            self.residency.end_turn()
        if memory:
            self.uses.note_answer(self.config.tenant, answer, self.store.last_lsn)
        return answer

    def alone(self, steps: Generator[execute.Decoding, None, T]) -> T:
        """An `answering` generator driven to its end, generated one forward call a token."""
        return batching.alone(steps, self.lm.model, self.reads)

    @staticmethod
    def resume(steps: Generator[execute.Decoding, None, T]) -> T:
        """The result of an `answering` generator whose Decoding was generated (in a batch)."""
        return batching.resume(steps)

    def batch(self) -> batching.Batch | None:
        """A batch to generate several `answering` requests together (grm/runtime/batch.py), or
        None where this model cannot be batched (a sliding window; bf16 or fp16 on a CPU)."""
        return batching.Batch(self.lm.model, self.reads) if batching.batchable(self.dialect, self.lm.model) else None

    def _plan(self, text: str, mode: str, max_new: int, store_prompt: bool, memory: bool,
              recall: str | None = None, chat: bool = False) -> Ready | Generator[pipeline.Pause, None, Ready]:
        ctx = self.ctx
        prompt = pipeline.exact_prompt(ctx, text, chat) if mode in ("auto", "exact") or not memory else text
        if prompt is None:  # a chat rendered with a system message of its own: not after the sinks
            return pipeline.plan_unrooted(ctx, text, max_new)
        if not memory:
            return pipeline.plan_cold(ctx, prompt, max_new)
        if recall is not None and mode == "exact":
            return pipeline.plan_recall(ctx, prompt, recall, max_new, store_prompt)
        matched = self.exact.match(prompt) if mode in ("auto", "exact") else None
        if mode == "auto":
            mode = "exact" if matched[0] else "exact-section"
        if mode == "exact":
            return pipeline.plan_exact(ctx, prompt, max_new, store_prompt, matched)
        self._require_memory()
        if mode == "none":
            return pipeline.plan_none(ctx, text, max_new, self.stored_text)
        ready = (pipeline.plan_grafts(ctx, text, max_new) if mode == "grafts"
                 else pipeline.plan_sections(ctx, text, mode, max_new))
        if ready is None:
            what = "graft" if mode == "grafts" else "section"
            why = f"no stored {what} matches the question; answered without memory (mode none)"
            log.warning(why)
            ready = pipeline.plan_none(ctx, text, max_new, self.stored_text)
            ready.fallback = why
        return ready

    def _require_memory(self) -> None:
        """Modes that answer from stored memory refuse a tenant that has none, rather than
        generate from nothing (the graft index counts the routable grafts: no row read per ask)."""
        tenant = self.config.tenant
        if not len(self.grafts.index()) and next(iter(self.store.records(tenant, DOCUMENT)), None) is None:
            raise UserInputError(f"the store at {redact(str(self.config.store))} holds no documents or memories "
                                 f"for tenant {tenant!r}: run `grm ingest PATH` first")

    def remember_exchange(self, user: str, reply: str, session: str, turn: int = 1) -> str | None:
        """Store a served exchange as an evidence graft the way a chat turn is stored by default:
        the user's words only, read alone after the sinks (so it carries nothing of what was mounted
        when it was answered, and a reply that echoed memory wrongly never becomes memory; the reply
        is kept in the graft's metadata), and let the policy plane extract the facts the user
        stated. Returns the graft id; `evidence_id(session, turn)` names it to the policy plane.
        What is not kept as evidence (None): small talk ("Say hi.": nothing stored), and a pasted
        document, stored as a document (sections, routable and listed) whose only facts are what it
        says of the user (PolicyMemory.pasted). The same words said again reuse their graft (the
        facts they state are reinforced by the new evidence), never a second copy of the K/V."""
        from grm.runtime.question import USER_WORDS
        from grm.runtime.policy_glue import evidence_id, small_talk

        glue = self.policy_glue()
        if small_talk(user):
            return None
        if glue.policy.pasted(user):
            self.ingest_text(user, f"pasted in {session}", "sections")
            glue.policy.observe(user, evidence_id=evidence_id(session, turn))
            return None
        text = USER_WORDS.format(text=user.strip())
        with torch.no_grad():
            g = self.grafts.read_alone(text, "evidence", salt="exchange",
                                       extra={"session": session, "turn": turn, "reply": reply.strip()})
        glue.policy.observe(user, evidence_id=evidence_id(session, turn))
        return g.id

    def chat(self, clear_context: bool = False, window_turns: int = 4, fold: bool = False,
             digester=None, policy: dict | None = None) -> ChatSession:
        """A conversation with memory: `send(text) -> Reply` per turn (grm/runtime/chat.py).
        fold: fold old turns into digests/eras; policy: PolicyConfig fields to override."""
        return ChatSession(self.ctx, self.policy_glue(), clear_context=clear_context, window_turns=window_turns,
                           fold=fold, digester=digester, policy=policy,
                           on_reply=lambda reply: self.uses.note_answer(self.config.tenant, reply, self.store.last_lsn))

    def check_window(self, n: int, max_new: int) -> None:
        self.ctx.check_window(n, max_new)

    def exact_context(self, prompt: str, max_new: int = 0) -> tuple[object, torch.Tensor, int, int, object]:
        """Cache + next-token logits for `prompt` read after the sinks, stored blocks loaded
        (steps 1-5 of the exact pipeline, no generation). Returns (cache, logits, seats used,
        tokens from memory, prefix blocks' records)."""
        ready = pipeline.plan_exact(self.ctx, prompt, max_new)
        seat, logits = ready.arena.seat, None
        for ids in ready.read:
            logits = prefill(self.lm.model, ready.arena.cache, ids, seat)
            seat += len(ids)
        return ready.arena.cache, logits, seat, ready.arena.from_memory, ready.prefix

    def documents(self) -> Documents:
        """This tenant's documents (grm/runtime/documents.py), matching a text's stored chain with
        this model; a delete drops the removed grafts from residency."""
        def dropped(keys: list[str]) -> None:
            for key in keys:
                self.residency.drop(key)

        return Documents(self.store, self.config.tenant, self.exact.match, dropped)

    def stored_text(self) -> str:
        """Every stored document of this tenant, in ingest order, joined by blank lines."""
        docs = sorted(self.store.records(self.config.tenant, DOCUMENT), key=lambda r: r.lsn)
        texts = []
        for rec in docs:
            data = self.store.read_payload(rec)
            if data is not None:
                texts.append(data.decode("utf-8"))
        return "\n\n".join(texts)

    def stats(self) -> dict:
        st = self.store.stats()
        return {"model": self.lm.name, "identity": self.lm.identity, "tenant": self.config.tenant,
                "dialect": {"family": self.dialect.family, "profile": self.dialect.profile,
                            "selftest_max_rel_error": self.selftest.max_rel_error,
                            "selftest_floor": self.selftest.floor, "selftest_excess": self.selftest.excess},
                "store": st, "exact": self.exact.stats(),
                "host_tier": {"budget": self.tier.budget, **self.tier.stats(self.config.tenant)} if self.tier else None,
                "grafts": {**self.residency.counters, "peak_device_bytes": self.residency.peak_device_bytes},
                "archive": dict(self.archive.counters)}
