"""The engine: the server's one model worker, and the only module of grm/serve that calls the runtime.

Lifecycle (who calls what, when):
1. `Engine.open(runtime_config, serve_config)` loads the model and opens the store (one Runtime);
   `start()` starts the worker thread. `ready` is True from then on (GET /readyz).
2. Request handlers (asyncio, grm/serve/openai_api.py, memory_api.py, ui.py) call `complete(...)`
   or `run(tenant, fn)`; each returns a `Job` at once, or raises ApiError 429 when `queue` jobs
   are already waiting (503 while draining). `await job.wait(timeout)` gets the result. Exactly
   one job runs at a time, on the worker thread: the model and the store are never used by two
   threads at once. `job.cancel()` (client gone, timeout) drops a queued job and stops a running
   generation at its next token (`on_token` returns False).
3. `run(tenant, fn)` calls `fn(TenantMemory)`: the policy plane, documents and store figures of
   that tenant only (a view of the one runtime: `Runtime.for_tenant`).
4. `close()` (SIGTERM, after uvicorn stopped taking requests and finished in-flight ones) refuses
   new jobs, lets the worker finish the queue, then closes the runtime and its store.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import hashlib
import logging
import queue
import secrets
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable

from grm.errors import GrmError, UserInputError
from grm.serve.errors import ApiError
from grm.serve.prompts import is_command_only
from grm.store.kinds import BLOCK, DOCUMENT, GRAFT

log = logging.getLogger("grm.serve")


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


@dataclass
class Job:
    tenant: str
    label: str
    fn: Callable[[], Any]
    future: concurrent.futures.Future = field(default_factory=concurrent.futures.Future)
    cancelled: threading.Event = field(default_factory=threading.Event)
    queued_at: float = field(default_factory=time.perf_counter)

    def cancel(self) -> None:
        self.cancelled.set()

    async def wait(self, timeout: float) -> Any:
        """The job's result; ApiError 504 (and the job cancelled) after `timeout` seconds."""
        try:
            return await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(self.future)), timeout)
        except asyncio.TimeoutError:
            self.cancel()
            raise ApiError(504, f"request not answered within {timeout:g} s", "timeout_error", "request_timeout")


@dataclass
class IngestJob:
    id: str
    tenant: str
    name: str
    layout: str
    status: str = "queued"  # queued | running | done | failed
    done: int = 0  # blocks stored or found so far
    total: int = 0
    document: str | None = None  # the document id once done
    error: str | None = None
    created: float = field(default_factory=time.time)

    def to_json(self) -> dict:
        return {"id": self.id, "object": "job", "status": self.status, "name": self.name, "layout": self.layout,
                "progress": {"done": self.done, "total": self.total}, "document": self.document,
                "error": self.error, "created": int(self.created)}


_STOP = object()


class Engine:
    def __init__(self, rt: Any, serve_config: Any, metrics: Any = None) -> None:
        self.rt, self.config, self.metrics = rt, serve_config, metrics
        self._queue: queue.Queue = queue.Queue(maxsize=serve_config.queue)
        self._views: dict[str, Any] = {}
        self._tenants: dict[str, TenantMemory] = {}
        self._jobs: dict[str, IngestJob] = {}
        self.traces: dict[str, deque] = {}
        self._worker: threading.Thread | None = None
        self._draining = False
        self._avg_s = 1.0  # running mean of job seconds (Retry-After estimate)
        self._lock = threading.Lock()
        self._tiering: Any = None  # grm/archive/policy.py TieringPolicy, built on first write
        self._tier_queued = False
        if metrics is not None:
            metrics.bind_engine(self)

    @classmethod
    def open(cls, runtime_config: Any, serve_config: Any, metrics: Any = None) -> "Engine":
        from grm.runtime import Runtime

        return cls(Runtime.open(runtime_config), serve_config, metrics)

    # ----- facts about the model ------------------------------------------------------------------
    @property
    def model_name(self) -> str:
        return self.rt.lm.name

    @property
    def max_positions(self) -> int:
        return int(self.rt.dialect.max_positions)

    @property
    def ready(self) -> bool:
        return self._worker is not None and self._worker.is_alive() and not self._draining

    @property
    def queue_depth(self) -> int:
        return self._queue.qsize()

    def tokenizer(self) -> Any:
        return self.rt.lm.tokenizer

    def check_fits(self, prompt: str, max_tokens: int) -> None:
        """ApiError 400 context_length_exceeded if the prompt (after the sinks) and max_tokens do not
        fit the model's window. A prompt of fewer bytes than the room left fits without tokenizing
        (no tokenizer here makes more tokens than bytes, plus one for a leading space marker)."""
        tok = self.rt.lm.tokenizer
        room = self.max_positions - len(tok.sink_ids) - max_tokens
        if len(prompt.encode()) + 1 <= room:
            return
        n = len(tok.encode(prompt))
        if n > room:
            raise ApiError(400, f"This model's maximum context length is {self.max_positions} tokens; the prompt is "
                           f"{n + len(tok.sink_ids)} tokens (sinks included) and {max_tokens} more were asked to be "
                           "generated", "invalid_request_error", "context_length_exceeded", "messages")

    # ----- the worker -------------------------------------------------------------------------
    def start(self) -> "Engine":
        self._worker = threading.Thread(target=self._work, name="grm-model-worker", daemon=True)
        self._worker.start()
        return self

    def _work(self) -> None:
        import torch

        torch.set_grad_enabled(False)  # grad mode is per thread; the loader turned it off only in its own
        while True:
            job = self._queue.get()
            if job is _STOP:
                return
            if job.cancelled.is_set():
                job.future.set_exception(ApiError(499, "request cancelled before it ran", "cancelled", "cancelled"))
                continue
            t0 = time.perf_counter()
            if self.metrics is not None:
                self.metrics.queue_wait(job.tenant, t0 - job.queued_at)
            try:
                result = job.fn()
            except BaseException as e:  # handed to the waiting request; the worker goes on
                if not isinstance(e, (ApiError, GrmError)):
                    log.exception("%s request of tenant %s failed", job.label, job.tenant)
                job.future.set_exception(e)
            else:
                job.future.set_result(result)
            finally:
                self._avg_s = 0.8 * self._avg_s + 0.2 * (time.perf_counter() - t0)

    def submit(self, tenant: str, label: str, fn: Callable[[], Any]) -> Job:
        if self._draining:
            raise ApiError(503, "the server is shutting down", "server_error", "shutting_down")
        job = Job(tenant, label, fn)
        try:
            self._queue.put_nowait(job)
        except queue.Full:
            retry = max(1, int(self._avg_s * (self._queue.qsize() + 1) + 0.5))
            if self.metrics is not None:
                self.metrics.rejected(tenant)
            raise ApiError(429, f"{self._queue.maxsize} requests are already waiting for the model; retry later",
                           "rate_limit_error", "queue_full", headers={"Retry-After": str(retry)})
        return job

    def close(self, timeout: float | None = None) -> None:
        """Refuse new jobs, finish the queued ones, close the runtime (and its store)."""
        with self._lock:
            if self._draining and self._worker is None:
                return
            self._draining = True
        if self._worker is not None:
            self._queue.put(_STOP)
            self._worker.join(timeout)
            if self._worker.is_alive():
                log.warning("model worker still busy after %.0f s; closing the store anyway", timeout or 0)
            self._worker = None
        self.rt.close()

    # ----- tenants ------------------------------------------------------------------------------
    def view(self, tenant: str) -> Any:
        """The runtime as `tenant` sees it (shares the loaded model, dialect and store)."""
        v = self._views.get(tenant)
        if v is None:
            v = self.rt if tenant == self.rt.config.tenant else self.rt.for_tenant(tenant)
            self._views[tenant] = v
        return v

    def memory(self, tenant: str) -> "TenantMemory":
        m = self._tenants.get(tenant)
        if m is None:
            m = self._tenants[tenant] = TenantMemory(self, tenant)
        return m

    def run(self, tenant: str, label: str, fn: Callable[["TenantMemory"], Any]) -> Job:
        """Run `fn(TenantMemory of tenant)` on the worker."""
        return self.submit(tenant, label, lambda: fn(self.memory(tenant)))

    def trace(self, tenant: str) -> list[dict]:
        """`tenant`'s recent requests, newest first (a copy: the worker appends meanwhile)."""
        with self._lock:
            return list(self.traces.get(tenant, ()))

    # ----- generation ---------------------------------------------------------------------------
    def complete(self, tenant: str, req: GenRequest, on_delta: Callable[[str], None] | None = None) -> Job:
        """Queue one generation; `on_delta(text)` is called on the worker thread per new piece."""
        holder: dict[str, Job] = {}

        def fn() -> GenResult:
            return self._generate(tenant, req, holder["job"], on_delta)

        job = self.submit(tenant, req.endpoint, fn)
        holder["job"] = job
        return job

    def _generate(self, tenant: str, req: GenRequest, job: Job, on_delta: Callable[[str], None] | None) -> GenResult:
        rt = self.view(tenant)
        mem = self.memory(tenant)
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

        try:
            ans = self._ask(rt, req, on_token)
        except UserInputError as e:
            raise ApiError(400, str(e), "invalid_request_error",
                           "context_length_exceeded" if "too long" in str(e) else None) from e
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
        ext = {"mode": ans.mode, "tokens_from_memory": ans.tokens_from_memory,
               "tokens_computed": ans.tokens_computed, "mounted": list(ans.mounted), "lossy": bool(ans.lossy),
               "abstained": bool(getattr(ans, "abstained", False)), "fallback": getattr(ans, "fallback", None),
               "memory": req.memory, "ttft_s": round(ans.ttft_s, 4), "total_s": round(ans.total_s, 4),
               "request": rid}
        if command is not None:
            ext["command"] = command
        self._record(tenant, req, rid, ans, finish, n_out)
        if self.metrics is not None:
            self.metrics.observe_answer(tenant, req.endpoint, ans, req.memory)
        if req.memory:  # the runtime counted its mounts (Runtime.uses, shared by every tenant's view)
            self.after_write(tenant)
        return GenResult(ans.answer, finish, ans.prompt_tokens, n_out, ans.tokens_from_memory, ext, command)

    def _ask(self, rt: Any, req: GenRequest, on_token: Callable[[str], bool]) -> Any:
        """The runtime call. Exact mode (every chat, and completions by default): the prompt as given
        after the sinks, the stored blocks it starts with loaded, its new blocks stored after
        answering (a conversation's history hits on its next request), ended only by end-of-turn,
        a stop string or max_tokens; for a chat, grafts routed for the latest user message (earlier
        exchanges, facts, documents) are mounted just before it (`recall`). Another mode (completions' `grm.mode`) asks the prompt as a
        question over memory, as `grm ask --mode` does."""
        exact = req.mode == "exact"
        recall = req.user_text if exact and req.memory and req.user_text else None
        return rt.ask(req.prompt, mode=req.mode, max_new_tokens=req.max_tokens, stop=req.stops, on_token=on_token,
                      store_prompt=req.memory and exact, chat=exact, memory=req.memory, recall=recall)

    def _record(self, tenant: str, req: GenRequest, rid: str, ans: Any, finish: str, n_out: int = 0) -> None:
        """The inspector's request trace: what was loaded or mounted for each request, and why."""
        entry = {"id": rid, "at": time.time(), "endpoint": req.endpoint, "memory": req.memory, "finish": finish,
                 "completion_tokens": n_out, "user": (req.user_text or req.prompt)[-200:]}
        if ans is None:
            entry.update(mode="command", prompt_tokens=0, tokens_from_memory=0, mounted=[], ttft_s=0.0,
                         total_s=0.0, fallback=None, lossy=False)
        else:
            entry.update(mode=ans.mode, prompt_tokens=ans.prompt_tokens, tokens_from_memory=ans.tokens_from_memory,
                         mounted=list(ans.mounted), ttft_s=round(ans.ttft_s, 4), total_s=round(ans.total_s, 4),
                         fallback=getattr(ans, "fallback", None), lossy=bool(ans.lossy))
        with self._lock:
            self.traces.setdefault(tenant, deque(maxlen=self.config.trace_len)).appendleft(entry)

    # ----- tiering (grm/archive/policy.py) -------------------------------------------------------
    def tiering(self) -> Any:
        """The store's tiering policy: ServeConfig.store_budget (remembered by the store), else the
        budget an earlier run stored; mounts are counted in its UseLog."""
        if self._tiering is None:
            from grm.archive.policy import TieringPolicy
            from grm.store.tiering import save_budget

            budget = getattr(self.config, "store_budget", None)
            if budget is not None:
                save_budget(self.rt.store, budget)
            self._tiering = TieringPolicy(self.rt.store, self.rt.lm, self.rt.dialect, self.rt.config.tenant,
                                          budget, archive=self.rt.archive, uses=self.rt.uses)
        return self._tiering

    def after_write(self, tenant: str) -> None:
        """After a write (on the worker): when the store passed its budget's high-water mark, queue
        one tiering run behind the waiting requests (off their path); a full queue skips it."""
        policy = self.tiering()
        if self._tier_queued or self._draining or not policy.due():
            return

        def run() -> dict:
            try:
                return policy.run().to_json()
            finally:
                self._tier_queued = False

        self._tier_queued = True
        try:
            self.submit(tenant, "tier", run)
        except ApiError:
            self._tier_queued = False

    # ----- documents ----------------------------------------------------------------------------
    def ingest(self, tenant: str, name: str, text: str, layout: str) -> IngestJob:
        job = IngestJob("job-" + secrets.token_hex(8), tenant, name, layout)
        self._jobs[job.id] = job
        self.run(tenant, "ingest", lambda m: m.ingest_text(job, text))
        return job

    def job(self, tenant: str, job_id: str) -> IngestJob | None:
        j = self._jobs.get(job_id)
        return j if j is not None and j.tenant == tenant else None


class TenantMemory:
    """One tenant's memory as the server's REST and inspector see it. Runs on the worker only."""

    def __init__(self, engine: Engine, tenant: str) -> None:
        self.engine, self.tenant = engine, tenant
        self._glue = None

    @property
    def rt(self) -> Any:
        return self.engine.view(self.tenant)

    @property
    def store(self) -> Any:
        return self.rt.store

    @property
    def policy(self) -> Any:
        """The tenant's one PolicyMemory (with fact grafts made by the model)."""
        if self._glue is None:
            self._glue = self.rt.policy_glue()
        return self._glue.policy

    def commands(self, text: str, rid: str) -> dict | None:
        """Execute each memory command line of `text` (as `grm chat` does); None if there is none."""
        results = []
        for i, line in enumerate(l for l in text.splitlines() if l.strip()):
            res = self.policy.handle(line.strip(), evidence_id=f"{rid}#{i}")
            if res is not None:
                results.append(res.to_json())
        if not results:
            return None
        return {"text": "\n".join(r["text"] for r in results), "changed": any(r["changed"] for r in results),
                "results": results}

    def observe(self, text: str, rid: str) -> None:
        self.policy.observe(text, evidence_id=rid)

    def grafts(self) -> list[Any]:
        return self.rt.grafts.grafts(include_retired=True)

    def graft_bytes(self, g: Any) -> int:
        """Payload bytes behind a graft (a document graft shares its block's payload)."""
        if g.record.payload_size:
            return g.record.payload_size
        block = self.store.get(self.tenant, BLOCK, g.record.meta.get("block") or "")
        return block.payload_size if block is not None else 0

    def store_stats(self) -> dict:
        """This tenant's records and payload bytes per kind (never another tenant's)."""
        st = self.store.stats()
        return {"kinds": st["tenants"].get(self.tenant, {}), "durability": st["durability"],
                "encrypted": st["encrypted"], "compressed": st["compressed"]}

    # documents
    def documents(self) -> list[Any]:
        return sorted(self.store.records(self.tenant, DOCUMENT), key=lambda r: r.lsn)

    def document(self, doc_id: str) -> Any:
        return self.store.get(self.tenant, DOCUMENT, doc_id)

    def _blocks_of(self, doc: Any) -> set[str]:
        """The blocks a document is made of: those its record lists (its sections, after a
        `both` ingest) and the stored chain its text reads as (blocks shared with other
        documents included: the caller keeps those)."""
        owned = set(doc.meta.get("blocks", ())) | set(doc.meta.get("sections", ()))
        data = self.store.read_payload(doc)
        if data is not None:
            owned.update(self.rt.exact.match(data.decode("utf-8"))[1])
        return owned

    def document_grafts(self, doc: Any) -> list[Any]:
        blocks = self._blocks_of(doc)
        return [g for g in self.rt.grafts.grafts(include_retired=True) if g.record.meta.get("block") in blocks]

    def delete_document(self, doc_id: str) -> dict | None:
        """Remove the document, its blocks no other document of this tenant uses, and the grafts of
        those blocks, in one transaction. Nothing else (facts, turns, other documents) changes."""
        doc = self.document(doc_id)
        if doc is None:
            return None
        shared: set[str] = set()
        for d in self.documents():
            if d.key != doc_id:
                shared |= self._blocks_of(d)
        owned = self._blocks_of(doc)
        blocks = owned - shared
        grafts = [r.key for r in self.store.records(self.tenant, GRAFT) if r.meta.get("block") in blocks]
        with self.store.transaction() as txn:
            for key in grafts:
                txn.delete(self.tenant, GRAFT, key)
            removed = sum(bool(txn.delete(self.tenant, BLOCK, key)) for key in sorted(blocks))
            txn.delete(self.tenant, DOCUMENT, doc_id)
        for key in grafts:
            self.rt.residency.drop(key)
        return {"id": doc_id, "deleted": True, "blocks": removed, "grafts": len(grafts),
                "kept_shared_blocks": len(owned & shared)}

    def ingest_text(self, job: IngestJob, text: str) -> None:
        """Ingest one text held in memory (Runtime.ingest_text), reporting progress on the job."""
        rt = self.rt
        job.status = "running"
        chain, sections = job.layout in ("chain", "both"), job.layout in ("sections", "both")
        try:
            job.total = (rt.exact.plan_blocks(text) if chain else 0) + (rt.sections.plan(text) if sections else 0)

            def progress(n: int) -> None:
                job.done = min(job.total, job.done + n)

            rt.ingest_text(text, job.name, job.layout, progress=progress)
            job.document = hashlib.sha256(text.encode()).hexdigest()
            job.done, job.status = job.total, "done"
            self.engine.after_write(job.tenant)
        except GrmError as e:
            job.status, job.error = "failed", str(e)
        except Exception as e:  # reported on the job; the server stays up
            log.exception("ingest job %s failed", job.id)
            job.status, job.error = "failed", f"internal error: {type(e).__name__}"
