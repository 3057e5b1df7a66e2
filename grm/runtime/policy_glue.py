"""Where the policy plane (grm/policy, model-free) meets grafts and the chat.

- Fact grafts: every new fact node gets a graft of its statement, read alone after the sinks
  (kind "fact"), so a fact is routed and mounted like any memory.
- What routing must not mount: grafts of facts that are no longer live (superseded, forgotten,
  expired), evidence turns whose every fact was superseded or forgotten (stale evidence: it would
  contradict the fact that replaced it; still reachable by `why` and descent), turns and digests
  holding a value memory no longer holds (a question answered with the old locker code before
  the correction; grm/policy/stale.py), and folded (retired) turns and digests.
- Folding: `fold_pending` over the chat's evidence turns; each digest or era it writes gets a
  graft (kind "digest"); its sources retire from routing.
- Descent: a routed digest or era is expanded to its best-matching source turns.
- `cull graft ID into sections`: the graft is sliced at sentence ends into children, and retired.
Evidence ids are `<session>#<turn>`, so `why do you remember` names turns.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from grm.english.person import spoken_back
from grm.errors import UserInputError
from grm.grafts import Graft, Routed
from grm.policy import Fact, FoldResult, NoExtractor, PolicyConfig, PolicyMemory, RuleExtractor
from grm.policy.memory import AlignedReader, about_the_user
from grm.policy.model_extract import ModelUpdateReader
from grm.policy.exclusions import Exclusions
from grm.route import LexicalConfig, search
from grm.route.index import DenseIndex
from grm.route.lexical import identifiers
from grm.store import Record
from grm.store.kinds import GRAFT

if TYPE_CHECKING:
    from grm.runtime.answer import Context
    from grm.store.backend import StoreBackend

log = logging.getLogger("grm")
CULL_TOKENS = 64  # at most this many tokens per section when a graft is culled
# a fact's graft reads as the user saying it and the assistant saying it back, then asked about it
# and answering with it: SmolLM2 answers from it far more often than from the bare statement or
# the statement said back alone (bench/results/fact_reading.md)
FACT_TEMPLATE = "User: Remember: {statement}.\nAssistant: {back}.\n\nUser: {question}\nAssistant: {back}.\n\n"


def fact_text(statement: str, subject: str = "", predicate: str = "") -> str:
    """A fact's graft text (FACT_TEMPLATE): "What is my bank?" asked of a fact said "my bank is
    ...", else "What do you remember?"."""
    statement = statement.rstrip(" .")
    s = subject.strip()
    if predicate in ("is", "are") and s and statement.casefold().startswith(f"{s} {predicate} ".casefold()):
        first, _, rest = s.partition(" ")
        s = f"{first.lower() if first.lower() in ('my', 'our', 'the', 'your', 'a', 'an') else first} {rest}".strip()
        question = f"What {predicate} {s}?"
    else:
        question = "What do you remember?"
    return FACT_TEMPLATE.format(statement=statement, back=spoken_back(statement), question=question)


SMALL_TALK_WORDS = 3  # a message of at most this many words, naming no one and nothing, is small talk


def small_talk(text: str) -> bool:
    """Whether a served message carries no memory worth its K/V: a few words ("Say hi.", "Thanks,
    that helps."), no number or name (grm/route/lexical identifiers), nothing about the user."""
    said = text.split()
    return (len(said) <= SMALL_TALK_WORDS and not identifiers(text)
            and not any(about_the_user(w.strip(".,!?;:\"'")) for w in said))


def evidence_id(session: str, turn: int) -> str:
    return f"{session}#{turn}"


class _GraftFeed:
    """The routable grafts the dense-key index admits and drops, fed to the exclusions."""

    def __init__(self, excluded: Exclusions) -> None:
        self.excluded = excluded

    def reset(self) -> None:
        self.excluded.reset()

    def put(self, rec: Record) -> None:
        meta = rec.meta
        kind = meta.get("kind", "evidence")  # as Graft.from_record reads it
        ev = evidence_id(meta.get("session", ""), int(meta.get("turn", 0))) if kind == "evidence" else None
        self.excluded.put(rec.key, kind, ev, rec.text or "")

    def drop(self, key: str) -> None:
        self.excluded.drop(key)


class PolicyGlue:
    def __init__(self, ctx: "Context", store: "StoreBackend") -> None:
        """One per runtime (tenant): `ask` and every chat share it, so one PolicyMemory decides
        for the tenant (grm/policy/memory.py). A chat moves it to its session (`begin`)."""
        self.ctx, self.store = ctx, store
        self.session: str | None = None
        choice = ctx.config.extractor  # who reads plain-words updates: the rules, the model, or both in turn
        model = ModelUpdateReader(self.complete, rank=self.nearest_facts)
        readers = {"rule": [AlignedReader()], "model": [model], "both": [AlignedReader(), model]}[choice]
        extractor = RuleExtractor(updates=choice != "model")
        if ctx.config.rules == "off" and choice == "rule":  # no rule reads a plain turn (RuntimeConfig.rules)
            readers, extractor = [], NoExtractor()
        self.policy = PolicyMemory(store, PolicyConfig(tenant=ctx.config.tenant),
                                   extractor=extractor, readers=readers,
                                   grafter=self.fact_graft, culler=self.cull)
        self.fold_results: list[FoldResult] = []
        self.excluded = Exclusions(self.policy.index)
        self._watched: DenseIndex | None = None  # the dense-key index feeding `excluded`

    def begin(self, session: str | None, policy: dict | None = None) -> None:
        """Enter a chat session (None: outside a chat); `policy`: PolicyConfig fields to override
        (fold_window, era_fanout, ...)."""
        self.session = session
        self.policy.configure(session=session, **(policy or {}))

    # ----- facts -------------------------------------------------------------------------------
    def complete(self, prompt: str, max_new: int = 24) -> str:
        """The model's greedy answer to `prompt` (through its chat template, as the user's message,
        where it has one), memory off: the model-backed update reader's question."""
        from grm.runtime.answer import Generation, plan_cold
        from grm.runtime.execute import answer

        t0 = time.perf_counter()
        template = self.ctx.lm.tokenizer.template
        prompt = template.user_turn(prompt) if template is not None else prompt
        return answer(self.ctx, plan_cold(self.ctx, prompt, max_new), Generation(max_new), t0).answer

    def nearest_facts(self, text: str, facts: list[Fact]) -> list[Fact]:
        """`facts` nearest to `text` first, by their grafts' dense scores (the model's own keys);
        a fact without a routable graft last, the most recent first among equals."""
        scores = self.ctx.grafts.similarity(text)

        def score(f: Fact) -> float:
            got = scores.get(f.graft) if f.graft else None
            return float("-inf") if got is None else got

        return sorted(reversed(facts), key=score, reverse=True)

    def fact_graft(self, fact: Fact) -> str:
        statement = fact.statement.rstrip(" .")
        g = self.ctx.grafts.read_alone(fact_text(statement, fact.subject, fact.predicate), "fact",
                                       salt=f"fact:{fact.id}", extra={"fact": fact.id})
        return g.id

    # ----- routing exclusions --------------------------------------------------------------------
    def exclusions(self, now: float | None = None) -> frozenset[str]:
        """Graft ids routing must skip now (see the module docstring): kept up to date by
        grm/policy/exclusions.py from the policy's fact index and the graft router's dense-key
        index, both in step with the store by LSN; no pass over the facts or the grafts."""
        now = time.time() if now is None else now
        index = self.ctx.grafts.index()
        if self._watched is not index:  # the first question (or a new router): it feeds every routable graft
            index.watch(_GraftFeed(self.excluded))
            self._watched = index
        index.sync()
        return self.excluded.current(now, self.policy.config.scope)

    # ----- descent -----------------------------------------------------------------------------
    def descend(self, routed: list[Routed], query: str, exclude: frozenset[str]) -> list[Routed]:
        """Replace each routed digest/era graft by its best-matching source turn (lexical), or keep
        it when no source matches; duplicates dropped."""
        out: list[Routed] = []
        seen: set[str] = set()
        blocked = self.policy.index.without_retired(exclude)  # folded turns are what descent brings back
        for r in routed:
            node = r.graft.record.meta.get("node")
            chosen = [r]
            if r.graft.kind == "digest" and node:
                sources = set(self.policy.folder.descend(node))
                hits = search(self.store, self.ctx.config.tenant, query, GRAFT, LexicalConfig(),
                              keep=lambda rec: rec.key in sources and rec.key not in blocked)
                if hits:
                    best = hits[0]
                    chosen = [Routed(Graft.from_record(best.record), r.score, best.bm25, best.identifiers, r.dense)]
            for c in chosen:
                if c.graft.id not in seen:
                    seen.add(c.graft.id)
                    out.append(c)
        return out

    # ----- folding -----------------------------------------------------------------------------
    def fold(self, now: float | None = None, digester=None) -> list[FoldResult]:
        """Fold old evidence turns into digests (and digests into eras); each new node gets a graft."""
        now = time.time() if now is None else now
        turns = [(g.id, g.text, g.created) for g in self.ctx.grafts.grafts(kind="evidence")
                 if g.record.meta.get("session")]
        results = self.policy.folder.fold_pending(turns, now=now, digester=digester)
        for res in results:
            if res.status == "folded" and res.node:
                node = self.policy.folder.node(res.node)
                if node is not None and node.text.strip():
                    self.ctx.grafts.read_alone(node.text.strip() + "\n\n", "digest", salt=f"node:{res.node}",
                                               extra={"node": res.node, "sources": list(res.sources)})
        self.fold_results.extend(results)
        return results

    # ----- cull --------------------------------------------------------------------------------
    def cull(self, graft_ref: str) -> str:
        """Slice a graft at sentence ends into sections of at most CULL_TOKENS tokens; retire it."""
        ctx = self.ctx
        found = [g for g in ctx.grafts.grafts(include_retired=True) if g.id.startswith(graft_ref.strip())]
        if len(found) != 1:
            raise UserInputError(f"{'no' if not found else len(found)} graft(s) with id {graft_ref!r}")
        g = found[0]
        tok = ctx.lm.tokenizer
        spans, start = [], 0
        for i in range(g.tokens):
            piece = tok.decode([g.ids[i]])
            end_here = piece.rstrip().endswith((".", "!", "?")) or "\n" in piece
            if (end_here and i + 1 - start >= 4) or i + 1 - start >= CULL_TOKENS:
                spans.append((start, i + 1))
                start = i + 1
        if start < g.tokens:
            if spans and not tok.decode(list(g.ids[start:])).strip():
                spans[-1] = (spans[-1][0], g.tokens)  # trailing blank lines stay with the last section
            else:
                spans.append((start, g.tokens))
        if len(spans) < 2:
            return f"graft {g.id[:12]} is one section already ({g.tokens} tokens); nothing culled"
        children = ctx.grafts.slice(g.id, spans)
        ctx.grafts.retire([g.id], into=children[0].id)
        ctx.residency.drop(g.id)
        return f"culled graft {g.id[:12]} into {len(children)} sections: " + ", ".join(c.id[:12] for c in children)
