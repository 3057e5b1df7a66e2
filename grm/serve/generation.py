"""A generation as the server runs it: the request (`GenRequest`) and its result (`GenResult`),
what it made the model read (`ReadTally`), and `Generations`, the Engine's part that turns a chat
or completion (`complete`) and `grm ask`'s call (`ask`) into a job of steps over
`Runtime.answering`: its prompt read (a `Pause` before each forward call when the worker reads
prompts in chunks), its Decoding yielded to be generated alone or in the batch, then the answer
finished (evidence stored, metrics, the inspector's trace, the tiering's heat). The worker that
runs the steps, the queue and the quotas are grm/serve/engine.py's.
"""

from __future__ import annotations

import secrets
import time
from collections import deque
from collections.abc import Generator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from grm.runtime.answer import Pause
from grm.runtime.batch import resume
from grm.runtime.commands import is_command_only

if TYPE_CHECKING:
    from grm.serve.engine import Job


@dataclass(frozen=True)
class GenRequest:
    """One generation, as the OpenAI endpoints ask for it."""

    prompt: str  # the whole prompt text (a chat is rendered with the model's chat template first)
    max_tokens: int
    stops: tuple[str, ...] = ()
    memory: bool = True  # False: no stored K/V loaded, nothing stored (side-by-side measurement)
    user_text: str | None = None  # a chat's last user message: memory commands and evidence
    endpoint: str = "completions"
    mode: str = "exact"  # exact: the prompt as given; auto, exact-section, grafts, ...: a question over memory


@dataclass
class GenResult:
    text: str
    finish_reason: str  # stop | length | cancelled
    prompt_tokens: int
    completion_tokens: int
    tokens_from_memory: int
    grm: dict  # the response's `grm` extension object
    command: dict | None = None  # the memory command result, when the message was only commands


class ReadTally:
    """What one request made the model read (grm/kv/forward.py Reads): counted over the stretches
    the worker runs it (its prompt read, its answer finished), not while it waits in the batch
    (other requests' reads). Decode steps are counted by its Sequence."""

    def __init__(self, reads: Any) -> None:
        self.reads, self.tokens, self.calls = reads, 0, 0
        self._mark: tuple[int, int] | None = reads.snapshot()

    def pause(self) -> None:
        if self._mark is not None:
            tokens, calls = self.reads.snapshot()
            self.tokens += tokens - self._mark[0]
            self.calls += calls - self._mark[1]
            self._mark = None

    def resume(self) -> None:
        self._mark = self.reads.snapshot()


def decoded(steps: Generator, tally: ReadTally) -> Generator[Any, None, tuple[Any, int]]:
    """An `answering` generator's pauses passed on (its prompt read a forward call at a time) and
    its Decoding yielded to be generated (alone or in the batch; the model's reads meanwhile are
    other requests', not tallied), then (its answer, decode steps); (the answer, 0) where nothing
    is generated (an abstention)."""
    try:
        dec = next(steps)
        while isinstance(dec, Pause):
            tally.pause()
            yield dec
            tally.resume()
            dec = next(steps)
    except StopIteration as done:
        return done.value, 0
    tally.pause()
    yield dec
    tally.resume()
    return resume(steps), dec.seq.steps


class Generations:
    """The Engine's generations (grm/serve/engine.py Engine inherits them): they use its runtime
    (`rt`, `view`, `memory`), `submit`, `check_fits`, `after_write`, `metrics`, `config` and the
    inspector's `traces` under `_lock`."""

    def complete(self, tenant: str, req: GenRequest, on_delta: Callable[[str], None] | None = None) -> Job:
        """Queue one generation; `on_delta(text)` is called on the worker thread per new piece."""
        holder: dict[str, Job] = {}

        def steps(pauses: bool) -> Generator:
            return self._generation(tenant, req, holder["job"], on_delta, pauses)

        job = self.submit(tenant, req.endpoint, lambda: self.rt.alone(steps(False)), writes=req.memory, steps=steps)
        holder["job"] = job
        return job

    def _generation(self, tenant: str, req: GenRequest, job: Job, on_delta: Callable[[str], None] | None,
                    pauses: bool = False) -> Generator[Any, None, GenResult]:
        """One generation as steps (grm/runtime/batch.py): the prompt read (with `pauses`, a Pause
        yielded before each forward call), then its Decoding yielded to be generated (alone or in
        the batch), then the answer finished and recorded."""
        rt = self.view(tenant)
        mem = self.memory(tenant)
        tally = ReadTally(self.rt.reads)
        rid = "req-" + secrets.token_hex(6)
        self.check_fits(req.prompt, req.max_tokens)
        command = None
        if req.user_text and req.memory:
            command = mem.commands(req.user_text, rid)
            if command is not None and is_command_only(req.user_text):
                text = command["text"]
                if on_delta is not None:
                    on_delta(text)
                self._record(tenant, req, rid, None, "stop")
                return GenResult(text, "stop", 0, 0, 0, {"command": command, "tokens_from_memory": 0}, command)

        def on_token(delta: str) -> bool:
            if on_delta is not None and delta:
                on_delta(delta)
            return not job.cancelled.is_set()

        ans, decode_steps = yield from decoded(self._ask(rt, req, on_token, pauses), tally)
        n_out = getattr(ans, "completion_tokens", None)
        if n_out is None:  # Answer does not count generated tokens (yet): the answer's reading
            n_out = min(req.max_tokens, len(self.rt.lm.tokenizer.encode(ans.answer))) if ans.answer else 0
        finish = getattr(ans, "finish_reason", None) or ("length" if n_out >= req.max_tokens else "stop")
        if job.cancelled.is_set():
            finish = "cancelled"
        if req.user_text and req.memory and finish != "cancelled":
            # the exchange is evidence: a graft of its own (routed for later requests) and the
            # facts the user stated
            rt.remember_exchange(req.user_text, ans.answer, rid)
        reads = self._account(tenant, req, rid, ans, finish, n_out, tally, decode_steps, req.memory)
        ext = {"mode": ans.mode, "tokens_from_memory": ans.tokens_from_memory,
               "tokens_computed": ans.tokens_computed, "mounted": list(ans.mounted), "lossy": bool(ans.lossy),
               "abstained": bool(getattr(ans, "abstained", False)), "fallback": getattr(ans, "fallback", None),
               "memory": req.memory, "ttft_s": round(ans.ttft_s, 4), "total_s": round(ans.total_s, 4),
               "request": rid, "model_reads": reads}
        if command is not None:
            ext["command"] = command
        return GenResult(ans.answer, finish, ans.prompt_tokens, n_out, ans.tokens_from_memory, ext, command)

    def ask(self, tenant: str, question: str, mode: str, max_new_tokens: int | None) -> Job:
        """Queue `grm ask`'s call (grm/serve/ask_api.py): Runtime.ask(question, mode, max_new_tokens)
        for `tenant`, generated in the batch as a chat is; the job's result is Answer.to_json().
        Cancelled at the next token."""
        holder: dict[str, Job] = {}
        req = GenRequest(question, max_new_tokens or self.rt.config.max_new_tokens, endpoint="ask", mode=mode)

        def steps(pauses: bool) -> Generator:
            return self._asking(tenant, req, holder["job"], pauses)

        holder["job"] = job = self.submit(tenant, "ask", lambda: self.rt.alone(steps(False)), steps=steps)
        return job

    def _asking(self, tenant: str, req: GenRequest, job: Job, pauses: bool = False) -> Generator[Any, None, dict]:
        """`ask` as steps: the question planned and read (with `pauses`, a Pause yielded before each
        forward call), its Decoding yielded to be generated (alone or in the batch), then the answer
        recorded (trace, metrics, the tiering's heat)."""
        tally = ReadTally(self.rt.reads)
        steps = self.view(tenant).answering(req.prompt, mode=req.mode, max_new_tokens=req.max_tokens,
                                            on_token=lambda _d: not job.cancelled.is_set(), pauses=pauses)
        ans, decode_steps = yield from decoded(steps, tally)
        finish = "cancelled" if job.cancelled.is_set() else ans.finish_reason
        self._account(tenant, req, "req-" + secrets.token_hex(6), ans, finish, getattr(ans, "completion_tokens", 0),
                      tally, decode_steps)
        return ans.to_json()

    def _account(self, tenant: str, req: GenRequest, rid: str, ans: Any, finish: str, n_out: int, tally: ReadTally,
                 decode_steps: int, memory: bool = True) -> dict:
        """The end every generation shares: the model's reads counted, the request's trace recorded,
        the metrics told and, where memory was read, the tiering policy's heat updated (the runtime
        counted its mounts: Runtime.uses, shared by every tenant's view). Returns the reads."""
        tally.pause()
        reads = {"tokens": tally.tokens, "calls": tally.calls, "decode_steps": decode_steps}
        self._record(tenant, req, rid, ans, finish, n_out, reads)
        if self.metrics is not None:
            self.metrics.observe_answer(tenant, req.endpoint, ans, memory)
            self.metrics.observe_reads(tenant, **reads)
        if memory:
            self.after_write(tenant)
        return reads

    def _ask(self, rt: Any, req: GenRequest, on_token: Callable[[str], bool], pauses: bool = False) -> Generator:
        """The runtime call. Exact mode (every chat, and completions by default): the prompt as given
        after the sinks, the stored blocks it starts with loaded, its new blocks stored after
        answering (a conversation's history hits on its next request), ended only by end-of-turn,
        a stop string or max_tokens; for a chat, grafts routed for the latest user message (earlier
        exchanges, facts, documents) are mounted just before it (`recall`). Another mode (completions' `grm.mode`) asks the prompt as a
        question over memory, as `grm ask --mode` does. `pauses`: its prompt read yields a Pause
        before each forward call (chunked prefill)."""
        exact = req.mode == "exact"
        recall = req.user_text if exact and req.memory and req.user_text else None
        return rt.answering(req.prompt, mode=req.mode, max_new_tokens=req.max_tokens, stop=req.stops,
                            on_token=on_token, store_prompt=req.memory and exact, chat=exact, memory=req.memory,
                            recall=recall, pauses=pauses)

    def _record(self, tenant: str, req: GenRequest, rid: str, ans: Any, finish: str, n_out: int = 0,
                reads: dict | None = None) -> None:
        """The inspector's request trace: what was loaded or mounted for each request, and why."""
        entry = {"id": rid, "at": time.time(), "endpoint": req.endpoint, "memory": req.memory, "finish": finish,
                 "completion_tokens": n_out, "user": (req.user_text or req.prompt)[-200:],
                 "model_reads": reads or {"tokens": 0, "calls": 0, "decode_steps": 0}}
        if ans is None:
            entry.update(mode="command", prompt_tokens=0, tokens_from_memory=0, mounted=[], ttft_s=0.0,
                         total_s=0.0, fallback=None, lossy=False)
        else:
            entry.update(mode=ans.mode, prompt_tokens=ans.prompt_tokens, tokens_from_memory=ans.tokens_from_memory,
                         mounted=list(ans.mounted), ttft_s=round(ans.ttft_s, 4), total_s=round(ans.total_s, 4),
                         fallback=getattr(ans, "fallback", None), lossy=bool(ans.lossy))
        with self._lock:
            self.traces.setdefault(tenant, deque(maxlen=self.config.trace_len)).appendleft(entry)
