"""The one answer pipeline: every `ask` mode, every chat turn and the server go through here.
This module plans (steps 1-4, a `Ready`); grm/runtime/execute.py runs it (steps 5-7).

A request is answered in seven steps, each owned by one module:
1. route     what memory to use: stored blocks the prompt starts with (grm/exact, by exact bytes),
             one section (grm/sections.select), routed grafts (grm/grafts.route + the policy
             plane's exclusions and descent), or nothing (`none`: the stored text's tail)
2. plan      the mounts, in arena order (least relevant first, the best nearest the text read
             after it), and the text read after memory (the prompt's rest, the question, the turn)
3. load      each mount's K/V, verified (ExactMemory.load_verified, Residency.get through the
             device/host/store planes); a miss is read as text instead, never served
4. arena     `[sinks | mounts | live tail]` (grm/grafts/arena.build: one rotation per re-seat)
5. prefill   the text after memory (grm/kv/forward.prefill), one forward call at a time with a
             `Pause` before each (`reading`, from execute.read_prompt; `plan_recall` reads a chat's
             history so before it mounts grafts after it): the server's worker steps its batch
             between two; a reader that does not pause reads `through`
6. generate  greedy, a `Sequence` per answer (grm/runtime/generate.py), streaming deltas to
             `on_token`: alone (`Decoding.alone`, one forward call a token) or in the server's
             batch (grm/runtime/batch.py), with the same rules; `begin` (steps 1-5 done) and
             `conclude` are the halves around it (`Runtime.answering`)
7. harvest   what the request leaves in memory: a chat turn as an evidence graft (chat.py), the
             prompt's new chain blocks when `store_prompt` is set (a conversation's history then
             hits on its next request; with `recall`, the history's only: the latest message was
             read after the grafts, and the next request reads it with the reply and stores both)
The pipeline takes a narrow `Context` (model, dialect, memories, residency, config), never the
whole Runtime. A fallback to no memory is never silent: it is logged and named in `fallback`.
When what was routed (grafts) or selected (a section) holds nothing on the question, the answer
abstains (grm/grafts/floor.py): it is the configured line, `abstained` is set, nothing is
generated. Exact mode (a prompt given) never abstains. With `recall` (the server's chats) the
grafts routed for the latest message are mounted between the exact history and that message.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Generator, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

import torch

from grm.dialects import Dialect
from grm.english.words import STOP_WORDS, stem
from grm.errors import UserInputError
from grm.exact import ExactMemory, Prefix, split_blocks
from grm.grafts import Arena, GraftMemory, Mount, Residency, Routed, build
from grm.grafts.blend import BlendConfig
from grm.grafts.floor import DocumentFrequencies, Grounding, ground, question_terms
from grm.grafts.memory import MEANING_KINDS
from grm.grafts.reread import RISK, Costs
from grm.kv import KV, cache_from_kv, kv_from_cache, new_cache
from grm.kv.forward import Reads, calls, prefill_call
from grm.models import LoadedModel
from grm.policy.align import related
from grm.route.lexical import WORD
from grm.runtime.config import RuntimeConfig
from grm.runtime.lead import answer_lead
from grm.runtime.question import USER_WORDS, fit_lead, label_lead, led, question_text, reread_turns_for
from grm.sections import SectionMemory

if TYPE_CHECKING:
    from grm.runtime.policy_glue import PolicyGlue

log = logging.getLogger("grm")


def question_read(ctx: Context, question: str, read: Iterable[str] = ()) -> tuple[list[int], str | None]:
    """The tokens read after memory for `question` and the lead they end with (None: none):
    RuntimeConfig.lead "rules" as `question_text`; "model" (the default) also asks the model for a
    question no rule covers (grm/runtime/model_lead.py); "off" reads the question plain. The
    answer returned begins with the lead, so "What is my locker code?" answers "Your locker code
    is 4721.". `read`: the texts mounted before it, whose preposition the lead takes (`fit_lead`)."""
    q = question.strip()
    choice, tok = ctx.config.lead, ctx.lm.tokenizer
    if "\nAnswer:" in q or choice == "off":
        return tok.encode(question_text(q, lead=False, template=tok.template)), None
    read = list(read)
    lead = label_lead(q, read) or answer_lead(q)  # a label the text says needs no model lead
    if lead is None and choice == "model":
        lead = ctx.model_lead(q)
    lead = fit_lead(lead, read, q)
    return tok.encode(led(q, lead, tok.template)), lead


@dataclass
class Context:
    """What the pipeline may touch: one tenant's memories over one loaded model."""

    lm: LoadedModel
    dialect: Dialect
    exact: ExactMemory
    sections: SectionMemory
    grafts: GraftMemory
    residency: Residency
    config: RuntimeConfig
    policy: Callable[[], "PolicyGlue"]  # the tenant's one policy glue (built on first use)
    costs: Callable[[], Costs]  # mount vs re-read costs on this machine (measured on first use)
    model_lead: Callable[[str], str | None]  # a question's answer lead written by the model
    reads: Reads = field(default_factory=Reads)  # what the model read (grm/kv/forward.py watch)

    def check_window(self, n: int, max_new: int) -> None:
        if n + max_new > self.dialect.max_positions:
            raise UserInputError(
                f"prompt too long: {n} tokens + {max_new} to generate exceed the model's "
                f"{self.dialect.max_positions}-token window"
            )


@dataclass(frozen=True)
class Generation:
    """How to generate, per request."""

    max_new_tokens: int
    stops: tuple[str, ...] = ()  # extra strings that end the answer
    chat: bool = False  # end only at end-of-turn, a stop string or the limit (not at a blank line)
    on_token: Callable[[str], bool | None] | None = None  # streamed deltas; returning False cancels

    def __post_init__(self) -> None:
        if self.max_new_tokens < 1:
            raise UserInputError("max_new_tokens must be >= 1")


@dataclass(frozen=True)
class Pause:
    """Yielded by a read that pauses (`reading`) before each of its forward calls: the caller may
    use the model meanwhile (the server's worker steps its batch), then resumes the read, which
    makes that call. The calls are those of a read that does not pause (grm/kv/forward.py `calls`),
    so the K/V and logits are the same, bit for bit."""

    tokens: int  # what the next forward call reads


def reading(model, cache, runs: list[list[int]], seat: int) -> Generator[Pause, None, torch.Tensor | None]:
    """`runs` read into `cache` from `seat` on, one forward call at a time as prefill makes them, a
    `Pause` yielded before each; grad mode is off around each call, not across a pause (it is per
    thread: readers interleave). The last call's logits (None for no runs)."""
    logits = None
    for ids in runs:
        for a, b in calls(len(ids)):
            yield Pause(b - a)
            with torch.no_grad():
                logits = prefill_call(model, cache, ids[a:b], seat + a)
        seat += len(ids)
    return logits


@dataclass
class Ready:
    """An arena built and the tokens to read after it (steps 1-4 done)."""

    arena: Arena
    read: list[list[int]]  # token runs read after memory, one forward call each
    mode: str
    mounted: list[dict] = field(default_factory=list)
    lossy: bool = False
    fallback: str | None = None
    routed: list[Routed] = field(default_factory=list)
    # store_prompt: (parent fingerprint, seat, text, ids) of each run that becomes a chain block
    blocks_to_store: list[tuple[str, int, str, list[int]]] = field(default_factory=list)
    block_meta: dict[str, dict] = field(default_factory=dict)  # fingerprint -> meta a stored block gets
    prefix: Prefix | None = None  # exact mode: what memory served of the prompt
    abstained: bool = False  # nothing routed holds anything on the question: say so, generate nothing
    lead: str | None = None  # the answer's start read after the question (question_read): returned with it


# ----- 1-4: route, plan, load, arena, per mode --------------------------------------------------
def exact_prompt(ctx: Context, text: str, rendered: bool) -> str | None:
    """What exact mode reads after the sinks for `text`. A plain-format model: `text` as given.
    Through a chat template: a prompt the caller `rendered` with it (the server's chats) less the
    head the sinks already hold, or None where it does not start with that head (a system message
    of its own: `plan_unrooted`); any other prompt is the user's message, and the generation
    prompt follows it."""
    template = ctx.lm.tokenizer.template
    if template is None:
        return text
    if not rendered:
        return template.user_turn(text)
    return text[len(template.head):] if text.startswith(template.head) else None


def plan_unrooted(ctx: Context, rendered: str, max_new: int) -> Ready:
    """A chat rendered with a system message of its own: read whole from the first seat, nothing
    loaded or stored (stored K/V were all computed after the default head). Named in `fallback`."""
    ids = ctx.lm.tokenizer.encode(rendered)
    ctx.check_window(len(ids), max_new)
    why = "the chat has a system message of its own: read without memory"
    log.info(why)
    return Ready(Arena(new_cache(), 0), [ids], "exact", fallback=why)


def plan_exact(ctx: Context, prompt: str, max_new: int, store_prompt: bool = False,
               matched: tuple | None = None, logits: bool = True) -> Ready:
    """[sinks | stored blocks the prompt starts with | the rest]. Blocks matched but not served (a
    check failed) are read one block per forward call with their stored ids, so the result is
    bit-identical to a clean load; the rest is tokenized on its own. A `seen` document the prompt
    starts with has its unstored chain blocks read next, one forward call each as ingest reads
    them, and stored (`ExactMemory.continuation`): the next such prompt hits the whole document.
    With `store_prompt` the rest is cut into chain blocks (`prompt_blocks`) and each is stored
    after it is read. A prompt stored whole has its last token re-read for the next-token logits,
    unless `logits` is off (text is read after it: `plan_recall`'s history), then nothing is read."""
    ex, tok = ctx.exact, ctx.lm.tokenizer
    matched, unstored = ex.continuation(prompt, ex.match(prompt) if matched is None else matched)
    prefix = ex.load_prefix(prompt, matched)
    kv, from_memory = prefix.kv, prefix.tokens
    runs = [list(b.ids) for b in prefix.pending]
    to_store: list[tuple[str, int, str, list[int]]] = []
    metas: dict[str, dict] = {}
    rest = prefix.rest
    parent = prefix.blocks[-1].key if prefix.blocks else ex.sink_fp
    seat = prefix.tokens
    if rest and not prefix.pending and len(prefix.blocks) == len(matched[1]):
        for block, fp, meta in unstored:
            runs.append(list(block.ids))
            to_store.append((parent, seat, block.text, list(block.ids)))
            metas[fp] = meta
            parent, seat, rest = fp, seat + len(block.ids), rest[len(block.text):]
    if rest:
        if store_prompt and not prefix.pending:
            for block in prompt_blocks(rest, tok, ctx.config.block_tokens):
                runs.append(list(block.ids))
                to_store.append((parent, seat, block.text, list(block.ids)))
                parent = ex.chain_fingerprint(parent, block.text, list(block.ids))
                seat += len(block.ids)
        else:
            runs.append(tok.encode(rest))
    if not runs and logits:  # the whole prompt is stored: re-read its last token for the next-token logits
        kv, from_memory = kv.slice(0, kv.tokens - 1), from_memory - 1
        runs = [[prefix.last_id]]
    ctx.check_window(kv.tokens + sum(map(len, runs)), max_new)
    # The load's buffer is lent to this arena when it serves the prefix as loaded (not the
    # re-read-last-token case above, which would write over the prefix's last seat).
    arena = Arena(cache_from_kv(kv, prefix.full if kv is prefix.kv else None), kv.tokens, from_memory=from_memory)
    mounted = [block_mount(r, i) for i, r in enumerate(prefix.blocks)]
    return Ready(arena, runs, "exact", mounted, blocks_to_store=to_store, block_meta=metas, prefix=prefix)


def plan_recall(ctx: Context, prompt: str, recall: str, max_new: int,
                store_prompt: bool = False) -> Generator[Pause, None, Ready]:
    """A conversation with memory (the server's chat completions): `[sinks | the history, exact |
    grafts routed for `recall` | the prompt's last part]`. The history (the prompt up to the line
    where `recall`, the latest user message, starts) is served and stored as in `plan_exact` (one
    stored whole is loaded whole: no token of it is read again), so the next turn hits it; the
    routed grafts are re-seated after it and the last part is read after them, once. Its K/V
    attended to the grafts, so it is not stored: the next turn's prompt starts with it and the
    reply, and reads both as its history (stored then, as `plan_exact` stores what its prompt does
    not hit), so a request reads its prompt once. Without a routed graft that is not already in the
    prompt (or when the floor says memory holds nothing on it) this is `plan_exact`, and the whole
    prompt is stored. The history is read before the grafts are mounted after it, a `Pause` before
    each forward call (`reading`): a server's batch steps between them."""
    with torch.no_grad():
        routed, split = _recall_routed(ctx, prompt, recall)
        if not routed:
            return plan_exact(ctx, prompt, max_new, store_prompt)
        history = plan_exact(ctx, prompt[:split], max_new, store_prompt, logits=False)
    cache, seat = history.arena.cache, history.arena.seat
    yield from reading(ctx.lm.model, cache, history.read, seat)
    seat += sum(map(len, history.read))
    with torch.no_grad():
        if history.blocks_to_store:
            harvest_blocks(ctx, history.arena, history.blocks_to_store)
        mounts = mount_routed(ctx, routed)
        tail = ctx.lm.tokenizer.encode(prompt[split:])
        ctx.check_window(seat + sum(len(m.ids) for m in mounts) + len(tail), max_new)
        base = kv_from_cache(cache)
        grafts = [graft_mount(r) for r in routed]
        arena = mount(ctx, base, mounts, grafts)
    arena.from_memory += history.arena.from_memory - base.tokens  # only the history's stored part
    return Ready(arena, [tail], "exact", history.mounted + grafts, lossy=True, routed=routed,
                 prefix=history.prefix)


def _recall_routed(ctx: Context, prompt: str, recall: str) -> tuple[list[Routed], int]:
    """`plan_recall`'s grafts to mount (none where memory holds nothing new on `recall`) and where
    the history ends in `prompt`."""
    at = prompt.rfind(recall) if recall.strip() else -1
    split = prompt.rfind("\n", 0, at) + 1 if at > 0 else 0  # 0: no history (a chat template's first
    # user message starts right after the sinks, which hold the template's head)
    if at >= 0:  # read as `Runtime.remember_exchange` stores it: one read, its key and its graft
        # (a pasted document is stored as a document, not as this graft: a bounded read, for its key)
        ctx.grafts.read_said(USER_WORDS.format(text=recall.strip()), recall,
                             stored=not ctx.policy().policy.pasted(recall))
    query, routed, got = route_memory(ctx, recall) if at >= 0 else (recall, [], None)
    # memory already in the prompt is not mounted again, and an earlier exchange that asked this
    # very message adds nothing but its old answer (an echo)
    routed = [r for r in routed if r.graft.text.strip() not in prompt
              and not (r.graft.kind == "evidence" and recall.strip() in r.graft.text)]
    if routed and got is not None and ctx.grafts.grounding(query, routed).abstain:
        routed = []
    return routed, split


_LINE_START = re.compile(r"(?<=\n)(?=\S)")  # a line's first character after a newline


def prompt_segments(text: str, tail_lines: int = 2) -> list[str]:
    """A prompt's new text cut before its last `tail_lines` line starts, so what varies between
    requests (the question, the latest message, the assistant marker) sits in blocks of its own and
    the stable text before it (a document, the earlier turns) is stored in blocks the next request
    shares: `DOC\n\n| Question: X\n| Answer:`, or `...turns| <|im_start|>user\n...| <|im_start|>assistant\n`."""
    cuts = [m.start() for m in _LINE_START.finditer(text) if 0 < m.start() < len(text)][-tail_lines:]
    bounds = [0, *cuts, len(text)]
    return [text[a:b] for a, b in zip(bounds, bounds[1:]) if b > a]


def prompt_blocks(text: str, tok, budget: int) -> list:
    """The chain blocks `store_prompt` cuts a prompt's new text into: its segments
    (`prompt_segments`), each cut as ingest cuts a document."""
    return [b for seg in prompt_segments(text) for b in split_blocks(seg, tok, budget)]


def block_mount(rec, rank: int = 0, score: float = 1.0) -> dict:
    """How an answer names a stored block it used: id, score, source document and token span."""
    seat, n = int(rec.meta.get("seat", 0)), int(rec.meta.get("tokens", 0))
    return {"id": rec.key, "score": round(score, 4), "source": rec.meta.get("doc", ""),
            "span": [seat, seat + n], "block": rec.meta.get("index", rank)}


def plan_sections(ctx: Context, question: str, mode: str, max_new: int) -> Ready | None:
    """exact-section: [sinks | the selected section's stored K/V | question]; rag-text: the same
    section re-read as text. None when no section matches."""
    hits = ctx.sections.select(question, k=1)
    if not hits:
        return None
    if abstains(ctx, question, [h.record.text or "" for h in hits]):
        return Ready(Arena(new_cache(), 0), [], mode, [block_mount(h.record, score=h.score) for h in hits],
                     abstained=True)
    q_ids, lead = question_read(ctx, question, [h.record.text or "" for h in hits])
    sinks = ctx.exact.sinks()
    mounts, lossy = [], False
    for hit in reversed(hits):  # least relevant first: the best one ends next to the question
        if mode == "rag-text":
            kv, ids = None, ctx.lm.tokenizer.encode(hit.record.text or "")
        else:
            kv, ids = ctx.sections.load(hit.record)
            if kv is None and hit.record.payload is None:  # moved down by tiering: its archived copy
                kv = archived(ctx, hit.record.key, sinks.tokens, len(ids))
                lossy |= kv is not None
        mounts.append(Mount(hit.record.key, ids, sinks.tokens, kv, hit.score))
    ctx.check_window(sinks.tokens + sum(len(m.ids) for m in mounts) + len(q_ids), max_new)
    arena = build(ctx.lm.model, ctx.dialect, sinks, mounts)
    mounted = [block_mount(h.record, score=h.score) for h in hits]
    return Ready(arena, [q_ids], mode, mounted, lossy=lossy, lead=lead)


def archived(ctx: Context, key: str, seat: int, tokens: int) -> KV | None:
    """A section's K/V from the archive tier (lossy: dequantized), at `seat`; None where it has
    none, or one of another length (then its text is read)."""
    archive = ctx.grafts.archive
    got = archive.load(ctx.exact.tenant, key, at_seat=seat) if archive is not None else None
    return got.kv if got is not None and got.kv.tokens == tokens else None


def mount_routed(ctx: Context, routed: list[Routed], live: list[str] = ()) -> list[Mount]:
    """Mounts for routed grafts, least relevant first (the best ends nearest the text read after
    them; RuntimeConfig.order "time": oldest first, so what was said last is read last), then the
    live window's turns in order; each loaded through the residency planes."""
    ordered = (sorted(routed, key=lambda r: (r.graft.created, r.graft.record.lsn)) if ctx.config.order == "time"
               else list(reversed(routed)))
    mounts = [Mount(r.graft.id, list(r.graft.ids), r.graft.seat, ctx.residency.get(r.graft.id), r.score)
              for r in ordered]
    for gid in live:
        g = ctx.grafts.get(gid)
        mounts.append(Mount(gid, list(g.ids), g.seat, ctx.residency.get(gid)))
    return mounts


def memory_query(ctx: Context, text: str) -> str:
    """`text` as memory is asked it: a word no routable graft holds, in words of the same everyday
    subject one does (grm/policy/align.related), the most held: "Who is my boss?" routes and is
    grounded as "Who is my manager?" where memory was told of a manager. The model reads `text`."""
    _, df = ctx.grafts.index().frequencies()

    def held(m: re.Match) -> str:
        word = stem(m.group())
        if word in STOP_WORDS or df.get(word, 0):
            return m.group()
        best = max(related(word), key=lambda w: df.get(w, 0), default="")
        return best if df.get(best, 0) else m.group()

    return WORD.sub(held, text)


def route_memory(ctx: Context, text: str, exclude: frozenset[str] = frozenset(),
                 also: tuple[str, ...] = ()) -> tuple[str, list[Routed], Grounding | None]:
    """(the query memory was asked, the grafts routed for it, their grounding: None when the floor
    is off) for the question `text`. The question is routed as typed; only where that abstains is
    it routed as `memory_query` asks it, and that is kept only when it grounds and, if it kept any
    word as typed, a routed text holds one of those: "Who is my boss?" (its one word replaced) is
    asked as "manager", but "Who insures my home?" is not answered from where we *live* when
    nothing routed holds "insure"."""
    routed = route_grafts(ctx, text, exclude)
    if ctx.grafts.config.abstain_floor <= 0:
        return text, routed, None
    got = ctx.grafts.grounding(text, routed, also=also)
    query = memory_query(ctx, text) if got.abstain else text
    if query == text:
        return text, routed, got
    routed2 = route_grafts(ctx, query, exclude)
    got2 = ctx.grafts.grounding(query, routed2, also=also)
    kept = question_terms(text) & question_terms(query)  # the words not replaced
    if got2.abstain or (kept and kept <= set(got2.missing)):
        return text, routed, got
    return query, routed2, got2


def route_grafts(ctx: Context, text: str, exclude: frozenset[str] = frozenset()) -> list[Routed]:
    """Grafts routed for `text`: never a superseded fact, a stale turn or a folded one; a routed
    digest descends to its best source turn; each brings the turns that mention it later
    (GraftMemory.later, RuntimeConfig.later)."""
    glue = ctx.policy()
    exclude = exclude | glue.exclusions()
    return ctx.grafts.later(glue.descend(ctx.grafts.route(text, exclude=exclude), text, exclude), exclude)


def plan_grafts(ctx: Context, question: str, max_new: int) -> Ready | None:
    """[sinks | the top routed grafts, least relevant first | question]. Composed grafts never
    attended to each other, so the answer is not an exact hit (lossy) once two are mounted."""
    _, routed, got = route_memory(ctx, question)
    if got is not None and got.abstain:
        return Ready(Arena(new_cache(), 0), [], "grafts", [graft_mount(r) for r in routed], routed=routed,
                     abstained=True)
    if not routed:
        return None
    mounts = mount_routed(ctx, routed)
    q_ids, lead = question_read(ctx, question, [r.graft.text for r in routed])
    sinks = ctx.exact.sinks()
    ctx.check_window(sinks.tokens + sum(len(m.ids) for m in mounts) + len(q_ids), max_new)
    mounted = [graft_mount(r) for r in routed]
    arena = mount(ctx, sinks, mounts, mounted)
    lossy = len(routed) > 1 or any(r.graft.id in ctx.grafts.lossy_ids for r in routed)
    return Ready(arena, [q_ids], "grafts", mounted, lossy=lossy, routed=routed, lead=lead)


def mount(ctx: Context, base: KV, mounts: list[Mount], mounted: list[dict]) -> Arena:
    """Step 4 for routed grafts with the runtime's composition choices: boundary repair, blend
    (RuntimeConfig.blend) and, per graft, mount or re-read (RuntimeConfig.reread). A graft read
    as text is named so in `mounted` ("read": "text"); its tokens count as computed."""
    cfg = ctx.config
    arena = build(ctx.lm.model, ctx.dialect, base, mounts, repair=cfg.repair,
                  blend=BlendConfig(ratio=cfg.blend) if cfg.blend > 0 else None,
                  reread=reread_rule(ctx, mounts, frozenset(m["id"] for m in mounted
                                                            if m["kind"] in MEANING_KINDS)))
    for m in mounted:
        m["read"] = "text" if m["id"] in arena.reread else "mounted"
    return arena


def reread_rule(ctx: Context, mounts: list[Mount],
                turns: frozenset[str] = frozenset()) -> Callable[[Mount, int], bool] | None:
    """Which grafts to read as text: none, all, or (auto) the chat turns and facts among them
    (`turns`, ids) where the model is asked through its chat template (question.reread_turns_for),
    and those whose re-read costs no more than their mount, counting the composition risk of the
    grafts beside them (grm/grafts/reread.py)."""
    choice = ctx.config.reread
    if choice == "never" or all(m.kv is None for m in mounts):
        return None
    if choice == "always":
        return lambda m, side_by_side: True
    turns = turns if reread_turns_for(ctx.lm) else frozenset()
    if all(m.id in turns for m in mounts):  # no cost to weigh (nor to measure, the first time)
        return lambda m, side_by_side: True
    costs = ctx.costs()
    return lambda m, side_by_side: m.id in turns or costs.reread(len(m.ids), side_by_side, RISK)


def abstains(ctx: Context, question: str, texts: list[str]) -> bool:
    """Whether the selected sections hold nothing on `question` (grm/grafts/floor.py), document
    frequencies over the stored sections."""
    floor = ctx.grafts.config.abstain_floor
    if floor <= 0:
        return False
    freq = DocumentFrequencies.counted(*ctx.sections.index().frequencies())  # no pass over the sections
    return ground(question, texts, freq, floor).abstain


def graft_mount(r: Routed) -> dict:
    """How an answer names a mounted graft: id (works with `grm grafts show`), score, source, span."""
    g = r.graft
    meta = g.record.meta
    if meta.get("session"):
        source = f"chat {meta['session']} turn {meta.get('turn')}"
    else:
        source = ", ".join(meta.get("sources") or []) or g.kind
    return {"id": g.id, "score": round(r.score, 4), "source": source, "kind": g.kind,
            "span": [g.seat, g.seat + g.tokens]}


def plan_cold(ctx: Context, prompt: str, max_new: int) -> Ready:
    """Memory off: the sinks and the prompt computed, nothing loaded or stored (the baseline a
    memory answer is measured against side by side)."""
    ids = list(ctx.lm.tokenizer.sink_ids) + ctx.lm.tokenizer.encode(prompt)
    ctx.check_window(len(ids), max_new)
    return Ready(Arena(new_cache(), 0), [ids], "cold")


def plan_none(ctx: Context, question: str, max_new: int, stored_text: Callable[[], str]) -> Ready:
    """No memory: the last tokens of the stored text that fit the window, then the question."""
    tok = ctx.lm.tokenizer
    sinks = list(tok.sink_ids)
    q_ids, lead = question_read(ctx, question)
    room = ctx.dialect.max_positions - len(sinks) - len(q_ids) - max_new
    ctx.check_window(len(sinks) + len(q_ids), max_new)
    tail = tok.encode(stored_text())[-room:] if room > 0 else []
    return Ready(Arena(new_cache(), 0), [sinks + tail + q_ids], "none", lead=lead)


# ----- 7: the prompt's new blocks (read in step 5, grm/runtime/execute.py) -----------------------
def harvest_blocks(ctx: Context, arena: Arena, blocks: list[tuple[str, int, str, list[int]]],
                   meta: dict[str, dict] | None = None) -> None:
    """Store the prompt's runs that were read as chain blocks (each read by its own forward call,
    as ingest reads them), sliced out of the live cache before generation extends it; `meta`
    names a block's document where it continues one (else it is the prompt's)."""
    ex = ctx.exact
    for parent, seat, text, ids in blocks:
        fp = ex.chain_fingerprint(parent, text, ids)
        if not ex.stored(fp):
            kv = kv_from_cache(arena.cache, seat, seat + len(ids))
            ex.put_block(kv, fp, parent, seat, text, ids, (meta or {}).get(fp, {"doc": "prompt", "layout": "chain"}))
