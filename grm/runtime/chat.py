"""The memory chat: every turn routes over memory, mounts, answers, and harvests itself as a graft.

A line that is a memory command (grm/policy/grammar.py: `remember permanently: ...`, `correct
memory: X => Y`, `forget: ...`, ...) is executed by the policy plane and answered with its result;
it is not a chat turn and nothing is generated. Any other line is a turn, in order:
1. route the user's text over this tenant's grafts (retired ones and the live window excluded);
   with harvest="user" (the default) the words are first read alone after the sinks as step 4
   stores them ("User: <text>"): that one read gives both their routing key and their graft
   (`GraftMemory.read_said`);
2. build the arena `[sinks | mounted grafts, least relevant first | live window | turn]`: with
   `clear_context` the live window is empty, so anything older than this turn comes back only
   through memory; without it the last `window_turns` turns stay live beside the mounted memory;
3. read `User: <text>\nAssistant:` and generate greedily;
4. harvest the turn (user text + the answer as generated, plus a blank line) as an evidence graft,
   stored durably: a later turn, or a later process on the same store, can route to it. `harvest`
   says how (HARVEST_MODES): `live` slices it out of the live cache (free, but its K/V carry
   whatever was mounted that turn), `standalone` reads it once more alone after the sinks, as
   document sections are read (clean), `user` stores only the user's words read alone (the model's
   reply, which may echo a needle wrongly, never becomes memory; the default: it recalled best,
   15/16 as live on the tune split and 14/16 vs 12/16 live on the held-out one,
   bench/results/chat_ceiling.md). The reply's first seat is kept in the meta (`reply_from`);
5. let the policy plane extract facts from the user's text (the model's answer is not evidence),
   fold old turns into digests when folding is on, and page the device plane back under its byte
   budget.
Routing skips what the policy plane says is no longer true or was folded away, and expands a
routed digest to its best source turn (descent); grm/runtime/policy_glue.py.
"""

from __future__ import annotations

import itertools
import secrets
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Callable

import torch

from grm.errors import UserInputError
from grm.grafts.floor import asks_memory
from grm.kv import crop, kv_from_cache
from grm.kv.forward import prefill
from grm.models.template import ChatTemplate
from grm.runtime.answer import Generation, Ready, graft_mount, mount, mount_routed, route_grafts, route_memory
from grm.runtime.execute import run
from grm.runtime.lead import answer_lead
from grm.runtime.policy_glue import evidence_id
from grm.runtime.question import USER_WORDS, fit_lead, with_lead

if TYPE_CHECKING:
    from grm.runtime.answer import Context
    from grm.runtime.policy_glue import PolicyGlue

TURN_PROMPT = "User: {text}\nAssistant:"
TURN_END = "\n\n"  # ends every harvested turn, so mounted turns read as separate exchanges
TURN_STOPS = ("\nUser:", "\nAssistant:")  # the model starting the next exchange ends its answer
MAX_TURN_CHARS = 16_000


def turn_read(text: str, lead: bool = True, read: Iterable[str] = (),
              template: ChatTemplate | None = None) -> tuple[str, str | None]:
    """A chat turn as read ("User: <text>\nAssistant:"; through a chat template, the user's message
    and the generation prompt, `ChatTemplate.user_turn`) and the lead its answer begins with: a
    question a lead rule covers (grm/runtime/lead.py), asked while memory has something mounted,
    is answered after "Your locker code is" (`lead`: the runtime's lead choice is not "off" and
    something was routed), its preposition the one the texts `read` before it say (`fit_lead`).
    The same lead the ask path uses (bench/results/fidelity.md and chat_ceiling.md measure the
    chat with it)."""
    said = fit_lead(answer_lead(text), read, text) if lead and text.rstrip().endswith("?") else None
    if template is not None:
        return template.user_turn(text) + (said or ""), said
    return TURN_PROMPT.format(text=text) + (f" {said}" if said else ""), said
HARVEST_MODES = ("live", "standalone", "user")


def exchange_text(user: str, answer: str, template: ChatTemplate | None = None) -> str:
    """A finished exchange as a later context reads it: "User: <user>\nAssistant: <answer>\n\n",
    or through a chat template the user's message, the reply and the next turn's opening."""
    if template is not None:
        return template.exchange(user, answer.strip())
    return TURN_PROMPT.format(text=user) + " " + answer.strip() + TURN_END


def transcript(turns: Iterable[tuple[str, str]], asked: str, template: ChatTemplate | None = None) -> str:
    """A whole conversation read as text: the exchanges `turns` (user, answer) in order, then the
    turn `asked` as `turn_read` gives it; through a chat template with its head first, as a chat
    rendered by the template is (`Runtime.ask(..., chat=True)` reads it after the sinks)."""
    text = "".join(exchange_text(u, a, template) for u, a in turns) + asked
    return template.head + text if template is not None else text


@dataclass
class Reply:
    turn: int
    user: str
    answer: str
    mounted: list[dict] = field(default_factory=list)  # [{id, score}], best first
    harvested: str | None = None  # the graft id this turn was stored as
    seats_resident: int = 0  # seats in the arena at the end of the turn (sinks, memory, window, turn)
    mounted_seats: int = 0  # seats taken by mounted memory
    device_bytes: int = 0  # graft K/V resident on the device plane after the turn
    peak_device_bytes: int = 0  # the most resident during the turn
    page_ins: int = 0  # payloads paged into the device plane this turn
    page_outs: int = 0
    store_reads: int = 0  # payloads read (and verified) from the store this turn
    tokens_from_memory: int = 0
    tokens_computed: int = 0
    timings: dict = field(default_factory=dict)  # seconds: route, mount, ttft, generate, harvest, total
    why: list[dict] = field(default_factory=list)  # per mounted graft: score, bm25, dense cosine, identifiers
    lossy: bool = False  # something mounted came from the archive tier (dequantized, not exact)
    command: str | None = None  # the memory command this line was, if it was one
    abstained: bool = False  # a question memory holds nothing on: answered with the abstain line, not harvested
    changed: bool = False  # whether a command changed memory

    def to_json(self) -> dict:
        return asdict(self)


class ChatSession:
    def __init__(self, ctx: "Context", glue: "PolicyGlue", clear_context: bool = False, window_turns: int = 4,
                 fold: bool = False, digester=None, policy: dict | None = None, harvest: str = "user",
                 on_reply: Callable[["Reply"], None] | None = None) -> None:
        """`on_reply(reply)`: told each answered turn (the runtime counts its mounts for tiering)."""
        if window_turns < 0:
            raise UserInputError("window_turns must be >= 0")
        if harvest not in HARVEST_MODES:
            raise UserInputError(f"harvest must be one of {', '.join(HARVEST_MODES)}")
        self.harvest = harvest
        self.ctx, self.clear_context = ctx, clear_context
        self.window: deque[str] = deque(maxlen=window_turns)
        self.session = secrets.token_hex(4)
        self.turn = 0
        self.glue = glue
        self.on_reply = on_reply
        glue.begin(self.session, policy)
        self.fold, self.digester = fold, digester  # fold old turns after each turn (digester: a custom one)
        for fact in self.glue.policy.facts():  # facts written without the model (`grm memory`) get grafts
            if not fact.graft:
                self.glue.policy.attach_graft(fact.id, self.glue.fact_graft(fact))

    @torch.no_grad()  # grad mode is per thread: a server's worker thread needs it too
    def send(self, text: str) -> Reply:
        """One turn: route, mount, answer, harvest. UserInputError on an empty or oversized turn."""
        if not isinstance(text, str) or not text.strip():
            raise UserInputError("empty chat turn")
        text = text.strip()
        if len(text) > MAX_TURN_CHARS:
            raise UserInputError(f"chat turn of {len(text)} characters; at most {MAX_TURN_CHARS}")
        self.turn += 1
        t0 = time.perf_counter()
        result = self.glue.policy.handle(text, evidence_id=evidence_id(self.session, self.turn))
        if result is not None:
            return Reply(turn=self.turn, user=text, answer=result.text, command=result.command or "command",
                         changed=result.changed, timings={"total_s": round(time.perf_counter() - t0, 4)})
        reply = self._answer(text)
        if self.on_reply is not None:
            self.on_reply(reply)
        self.glue.policy.observe(text, evidence_id=evidence_id(self.session, self.turn))
        if self.fold:
            self.glue.fold(digester=self.digester)
        return reply

    def _answer(self, text: str) -> Reply:
        """Steps 1-7 of the answer pipeline (grm/runtime/answer.py) for one chat turn."""
        ctx, t0 = self.ctx, time.perf_counter()
        tok, model = ctx.lm.tokenizer, ctx.lm.model
        reads0, ins0 = ctx.residency.counters["host_page_ins"], ctx.residency.counters["device_page_ins"]
        live = [] if self.clear_context else list(self.window)
        if self.harvest == "user":  # the words read once: their routing key and, after the answer, their graft
            ctx.grafts.read_said(USER_WORDS.format(text=text), text)
        if asks_memory(text):  # grounded (grm/grafts/floor.py); a word memory never held asked in one it did
            also = tuple(ctx.grafts.get(gid).text for gid in live)
            _, routed, got = route_memory(ctx, text, frozenset(live), also)
        else:
            routed, got = route_grafts(ctx, text, frozenset(live)), None
        t_route = time.perf_counter()
        if got is not None and got.abstain:
            return Reply(turn=self.turn, user=text, answer=ctx.config.abstain_line, abstained=True,
                         mounted=[graft_mount(r) for r in routed], why=[r.why() for r in routed],
                         timings={"route_s": round(t_route - t0, 4), "total_s": round(t_route - t0, 4)})
        mounts = mount_routed(ctx, routed, live)
        read = itertools.chain((r.graft.text for r in routed), (ctx.grafts.get(gid).text for gid in reversed(live)))
        prompt, lead = turn_read(text, ctx.config.lead != "off" and bool(routed), read, tok.template)
        prompt_ids = tok.encode(prompt)
        sinks = ctx.exact.sinks()
        needed = sinks.tokens + sum(len(m.ids) for m in mounts) + len(prompt_ids)
        ctx.check_window(needed, ctx.config.max_new_tokens + 4)
        mounted = [graft_mount(r) for r in routed]
        arena = mount(ctx, sinks, mounts, mounted)
        t_mount = time.perf_counter()
        out = run(ctx, Ready(arena, [prompt_ids], "chat"), Generation(ctx.config.max_new_tokens, TURN_STOPS), t0)
        t_gen = time.perf_counter()
        graft_id = self._harvest(arena, out.start, text, prompt_ids, out.ids)
        t_harvest = time.perf_counter()
        if not self.clear_context and self.window.maxlen:
            self.window.append(graft_id)
        paging = ctx.residency.end_turn()
        end = arena.cache.get_seq_length()
        return Reply(
            turn=self.turn, user=text, answer=with_lead(lead, out.text), mounted=mounted, harvested=graft_id,
            seats_resident=end, mounted_seats=sum(r.graft.tokens for r in routed),
            device_bytes=paging["device_bytes"], peak_device_bytes=paging["peak_device_bytes"],
            page_ins=ctx.residency.counters["device_page_ins"] - ins0, page_outs=paging["page_outs"],
            store_reads=ctx.residency.counters["host_page_ins"] - reads0,
            tokens_from_memory=arena.from_memory, tokens_computed=end - arena.from_memory,
            timings={"route_s": round(t_route - t0, 4), "mount_s": round(t_mount - t_route, 4),
                     "ttft_s": round(out.ttft_s, 4), "generate_s": round(t_gen - t_mount, 4),
                     "harvest_s": round(t_harvest - t_gen, 4), "total_s": round(t_harvest - t0, 4)},
            why=[r.why() for r in routed],
            lossy=any(m.id in ctx.grafts.lossy_ids for m in mounts),
        )

    def _harvest(self, arena, start: int, text: str, prompt_ids: list[int], gen_ids: list[int]) -> str:
        """Store the turn: the prompt and the generated tokens (up to where the answer was cut: a
        blank line, or the model starting the next exchange), then a blank line. `live`: sliced
        out of the live cache, tokens not yet read (the last generated, the blank line) read now;
        `standalone` / `user`: the turn / the user's words read alone after the sinks."""
        ctx = self.ctx
        tok = ctx.lm.tokenizer
        keep = len(gen_ids)
        while keep and any(stop in tok.decode(gen_ids[:keep]) for stop in TURN_STOPS):
            keep -= 1
        ids = prompt_ids + gen_ids[:keep]
        if not tok.decode(gen_ids[:keep]).endswith(TURN_END):
            ids = ids + tok.encode(TURN_END)
        reply_from = len(prompt_ids)
        if self.harvest == "user":
            ids = tok.encode(USER_WORDS.format(text=text))
            reply_from = len(ids)  # no reply stored
        salt = f"{self.session}:{self.turn}"
        extra = {"session": self.session, "turn": self.turn, "harvest": self.harvest, "reply_from": reply_from}
        if self.harvest != "live":
            return ctx.grafts.read_alone(tok.decode(ids), "evidence", ids=ids, salt=salt, extra=extra).id
        cached = min(arena.cache.get_seq_length() - start, len(prompt_ids) + keep)
        crop(arena.cache, start + cached)
        if cached < len(ids):
            prefill(ctx.lm.model, arena.cache, ids[cached:], start + cached)
        kv = kv_from_cache(arena.cache, start, start + len(ids))
        return ctx.grafts.harvest(kv, start, tok.decode(ids), ids, "evidence", salt=salt, extra=extra).id
