"""The engine: the server's one model worker (which generates concurrent answers in one batch).
It and grm/serve/tenant.py (one tenant's memory, which runs on this worker) are the only modules
of grm/serve that hold the Runtime and its store; the others take only checks and names from
grm/runtime, and the memory REST's commands (grm/runtime/commands.py) run inside jobs on this
worker.

Lifecycle (who calls what, when):
1. `Engine.open(runtime_config, serve_config)` loads the model and opens the store (one Runtime);
   `start(tenants)` builds the served tenants' routing state (their fact and graft indexes) and
   starts the worker thread. `ready` is True from then on (GET /readyz).
2. Request handlers (asyncio, grm/serve/openai_api.py, memory_api.py, ask_api.py, ui.py) call
   `complete(...)`, `ask(...)`, `run(tenant, fn)` or `ingest(...)`; each returns a `Job` at once, or raises ApiError: 429 +
   Retry-After for a key with `queue` jobs waiting, or over its byte quota (`tenant_bytes`) for a
   write; 503 when the server holds `queue_total`, or while draining. `await job.wait(timeout)`
   gets the result. Every job runs on the one worker thread, in the fair order of
   grm/serve/scheduler.py (chats before document ingest, tenants in turn); a document ingest runs
   one slice (`slice_s`) at a time (grm/serve/slices.py), so the model and the store are never
   used by two threads at once and a chat waits for at most one slice. `job.cancel()` (client
   gone, timeout) drops a queued job and stops a running generation at its next token
   (`on_token` returns False); `cancel_job` stops an ingest after its current block.
   Generations are batched (ServeConfig.batch > 1, a model without a sliding window): a chat or
   completion is a job of steps (`_generation`, over `Runtime.answering`); the worker reads its
   prompt alone (memory loaded and stored as without a batch), then it joins the batch
   (grm/runtime/batch.py) and decodes with up to `batch` others, one forward call a token; between
   two tokens the worker takes more jobs (`Scheduler.take_more`: new generations join, another
   job runs while the batch waits), and a generation that ends (end of turn, stop string, limit,
   cancel) leaves and is finished (evidence stored, metrics, trace). Chunked prefill
   (`prefill_chunk` > 0): a joining generation is planned and loaded when taken, then reads its
   prompt a forward call at a time (it yields a Pause before each, grm/runtime/execute.py), the
   worker reading at most `prefill_chunk` tokens of the joiners' prompts (one call, if longer)
   between two decoding steps, joiners in turn; the calls are a lone read's, so the K/V and the
   answer are the same. A joiner cancelled between two calls stops reading (499); a call that
   fails fails that request only. `--batch 1`: one job runs at a time, its answer generated
   alone, its prompt read whole. What the model read for each request (grm/serve/generation.py ReadTally over
   grm/kv/forward.py Reads) is in its `grm.model_reads` and in /metrics.
3. `run(tenant, fn)` calls `fn(TenantMemory)`: the policy plane, documents and store figures of
   that tenant only (a view of the one runtime: `Runtime.for_tenant`).
4. `close()` (SIGTERM, after uvicorn stopped taking requests and finished in-flight ones) refuses
   new jobs, lets the worker finish the queue, then closes the runtime and its store.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import secrets
import threading
import time
from collections import deque
from collections.abc import Generator, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from grm.errors import GrmError, redact
from grm.runtime.admin import store_folder
from grm.runtime.execute import Pause
from grm.serve.errors import ApiError, from_grm
from grm.serve.generation import Generations
from grm.serve.scheduler import Limits, Scheduler
from grm.serve.slices import Sliced, Stopped
from grm.serve.tenant import IngestJob, TenantMemory

log = logging.getLogger("grm.serve")
QUOTA_RETRY_S = 60  # Retry-After of a storage quota 429 (space comes back only when the tenant deletes)


@dataclass
class Job:
    tenant: str
    label: str
    fn: Callable[[], Any]
    kind: str = "interactive"  # interactive | bulk (grm/serve/scheduler.py)
    writes: bool = False  # stores memory: refused while the tenant is over its byte quota
    sliced: Sliced | None = None  # a long job, run a slice at a time (then `fn` is unused)
    # a generation: its `answering` steps (read alone, generated in the batch, finished), called
    # with pauses=True: its prompt read yields a Pause before each forward call (chunked prefill);
    # `fn` runs the same steps without pauses, one forward call a token (a server without a batch)
    steps: Callable[[bool], Generator] | None = None
    future: concurrent.futures.Future = field(default_factory=concurrent.futures.Future)
    cancelled: threading.Event = field(default_factory=threading.Event)
    queued_at: float = field(default_factory=time.perf_counter)
    started_at: float | None = None  # when the worker first ran it

    def cancel(self) -> None:
        self.cancelled.set()
        if self.sliced is not None:
            self.sliced.stop("cancelled")

    async def wait(self, timeout: float) -> Any:
        """The job's result; ApiError 504 (and the job cancelled) after `timeout` seconds."""
        try:
            return await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(self.future)), timeout)
        except asyncio.TimeoutError:
            self.cancel()
            raise ApiError(504, f"request not answered within {timeout:g} s", "timeout_error", "request_timeout")


JOINED = object()  # a job that is not done yet: reading its prompt or generating in the batch, or a sliced job paused


def _raise(e: BaseException) -> Any:
    raise e



class Engine(Generations):
    def __init__(self, rt: Any, serve_config: Any, metrics: Any = None) -> None:
        self.rt, self.config, self.metrics = rt, serve_config, metrics
        self._scheduler = Scheduler(Limits(per_tenant=serve_config.queue, total=serve_config.queue_total))
        self._usage: dict[str, int] = {}  # tenant -> payload bytes stored, as the worker last counted
        self._views: dict[str, Any] = {}
        self._tenants: dict[str, TenantMemory] = {}
        self._jobs: dict[str, IngestJob] = {}
        self.traces: dict[str, deque] = {}
        self._worker: threading.Thread | None = None
        self._draining = False
        self._lock = threading.Lock()
        self._tiering: Any = None  # grm/runtime/tiering.py Tiering, built on first write
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
    def hidden(self) -> dict[str, str]:
        """Strings no client may read in an error, and what stands for them (grm/serve/errors.py public)."""
        store, cache = self.rt.config.store, self.rt.config.cache_dir
        out = {str(cache): "<model cache>", str(Path(cache).resolve()): "<model cache>"}
        out.update({str(store): "<store>", redact(str(store)): "<store>"})
        if store_folder(store) is not None:
            out[str(Path(store).resolve())] = "<store>"
        return out

    @property
    def queue_depth(self) -> int:
        return self._scheduler.depth

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
    def start(self, tenants: Iterable[str] = ()) -> "Engine":
        """Warm the model up (`Runtime.warm_up`) and build each of `tenants`' routing state (its fact
        and graft indexes, read from the store: seconds at 10^4-10^5 facts), then start the worker:
        the first request, and the first question of a served tenant, do not pay for them, and
        /readyz says ready only after them."""
        log.info("model warmed up in %.2f s", self.rt.warm_up())
        for tenant in tenants:
            t0 = time.perf_counter()
            self.view(tenant).policy_glue().exclusions()
            log.info("tenant %s: routing state built in %.2f s", tenant, time.perf_counter() - t0)
        self._worker = threading.Thread(target=self._work, name="grm-model-worker", daemon=True)
        self._worker.start()
        return self

    def _work(self) -> None:
        import torch

        torch.set_grad_enabled(False)  # grad mode is per thread; the loader turned it off only in its own
        batch = self.rt.batch() if self.config.batch > 1 else None
        if self.config.batch > 1 and batch is None:
            log.warning("this model cannot be batched (a sliding window, or bf16/fp16 on a CPU, where a batched "
                        "answer could differ from the same request alone): answers are generated one at a time")
        # generations reading their prompts (chunked prefill), each paused before a forward call
        reading: deque[tuple[Job, Generator, int]] = deque()
        while True:
            if batch is not None and (len(batch) or reading):  # between two decoding steps: who joins (or runs)
                jobs = self._scheduler.take_more(self.config.batch - len(batch) - len(reading))
            elif (job := self._scheduler.take()) is not None:
                jobs = [job]
            else:
                return
            for job in jobs:
                self._start(job, batch, reading)
            if reading:
                self._read(batch, reading)
            if batch is not None and len(batch):
                self._step(batch)

    def _start(self, job: Job, batch: Any, reading: deque) -> None:
        """Run `job` (a slice of a sliced one); a generation with a batch is planned, then reads
        its prompt (whole, or paused before its first forward call: `reading`) and joins it."""
        t0 = time.perf_counter()
        if job.started_at is None:
            if job.cancelled.is_set() and job.sliced is None:
                job.future.set_exception(ApiError(499, "request cancelled before it ran", "cancelled", "cancelled"))
                return
            job.started_at = t0
            if self.metrics is not None:
                self.metrics.queue_wait(job.tenant, t0 - job.queued_at)

        def run() -> Any:
            if job.sliced is None:
                if job.writes:
                    self._check_quota(job.tenant)
                if batch is None or job.steps is None:
                    return job.fn()
                return self._advance(job, job.steps(self.config.prefill_chunk > 0), batch, reading)
            if not job.sliced.step():  # one slice ran; the others waiting go first
                self._scheduler.put_back(job)
                return JOINED
            return job.sliced.result()

        self._settle(job, run, t0)

    def _advance(self, job: Job, steps: Generator, batch: Any, reading: deque) -> Any:
        """Run a generation's steps to its next pause (then it waits in `reading`: JOINED) or to its
        Decoding, which joins the batch (JOINED), unless its first token ended it (its result)."""
        try:
            dec = next(steps)
        except StopIteration as done:  # nothing to generate
            return done.value
        if isinstance(dec, Pause):
            reading.append((job, steps, dec.tokens))
            return JOINED
        if batch.join((job, steps), dec):
            return JOINED
        return self.rt.resume(steps)  # its first token ended it

    def _read(self, batch: Any, reading: deque) -> None:
        """Between two decoding steps: the generations in `reading` read their prompts on, one
        forward call at a time, in turn, up to `prefill_chunk` tokens in all (a first call longer
        than that alone). One cancelled meanwhile stops reading; one that fails fails alone."""
        read = 0
        while reading:
            job, steps, tokens = reading[0]
            if read and read + tokens > self.config.prefill_chunk:
                return
            reading.popleft()
            read += tokens
            if job.cancelled.is_set():
                steps.close()
                cancelled = ApiError(499, "request cancelled while its prompt was read", "cancelled", "cancelled")
                self._settle(job, lambda e=cancelled: _raise(e), job.started_at or time.perf_counter())
                continue
            self._settle(job, lambda job=job, steps=steps: self._advance(job, steps, batch, reading),
                         job.started_at or time.perf_counter())

    def _step(self, batch: Any) -> None:
        """One decoding step of the batch; the requests it ended are finished and answered."""
        t0 = time.perf_counter()
        rows = len(batch)
        if self.metrics is not None:
            self.metrics.decode_step(rows)
        try:
            ended = batch.step()
        except BaseException as e:  # the step's requests fail together; the worker goes on
            log.exception("a decoding step of %d requests failed", rows)
            for job, steps in batch.clear():
                steps.close()
                self._settle(job, lambda e=e: _raise(e), job.started_at or t0)
            return
        for job, steps in ended:
            self._settle(job, lambda steps=steps: self.rt.resume(steps), job.started_at or t0, share=rows)

    def _settle(self, job: Job, run: Callable[[], Any], t0: float, share: int = 1) -> None:
        """Hand `run()`'s result or error to the request waiting on `job` (JOINED: not yet: it is
        in the batch, or a sliced job paused); tell the scheduler how long it took (a batched
        request: its time over the `share` requests it ran beside)."""
        pending = False
        try:
            result = run()
            pending = result is JOINED
        except BaseException as e:  # handed to the waiting request; the worker goes on
            if isinstance(e, GrmError):
                e = from_grm(e, self.hidden)  # what a client may read of it
            elif not isinstance(e, (ApiError, Stopped)):
                log.exception("%s request of tenant %s failed", job.label, job.tenant)
            job.future.set_exception(e)
        else:
            if not pending:
                job.future.set_result(result)
        finally:
            if not pending or job.sliced is not None:
                self._scheduler.done(job, (time.perf_counter() - t0) / share)
            if job.writes and self.config.tenant_bytes is not None and job.future.done():
                self._usage[job.tenant] = self.memory(job.tenant).stored_bytes()

    def submit(self, tenant: str, label: str, fn: Callable[[], Any], *, kind: str = "interactive",
               writes: bool = False, sliced: Sliced | None = None, steps: Callable[[], Generator] | None = None) -> Job:
        """Queue `fn` (or the sliced job) for the worker: ApiError 503 while draining; 429 + Retry-After
        when this tenant has too many jobs waiting (or, for a write, is over its byte quota), never
        for another tenant's; 503 + Retry-After when the whole server is full (grm/serve/scheduler.py)."""
        if self._draining:
            raise ApiError(503, "the server is shutting down", "server_error", "shutting_down")
        job = Job(tenant, label, fn, kind, writes, sliced, steps)
        try:
            if writes and self._over_quota(tenant):
                raise self._quota_error(tenant)
            self._scheduler.put(job)
        except ApiError:
            if self.metrics is not None:
                self.metrics.rejected(tenant)
            raise
        return job

    # ----- per-key byte quota ---------------------------------------------------------------------
    def _over_quota(self, tenant: str) -> bool:
        """Whether `tenant` stores its quota's bytes or more, as the worker last counted."""
        limit = self.config.tenant_bytes
        return limit is not None and self._usage.get(tenant, 0) >= limit

    def _quota_error(self, tenant: str) -> ApiError:
        return ApiError(429, f"this API key stores {self._usage.get(tenant, 0)} bytes, its quota is "
                        f"{self.config.tenant_bytes}: delete documents or memories to store more",
                        "rate_limit_error", "storage_quota_exceeded",
                        headers={"Retry-After": str(QUOTA_RETRY_S)})

    def _check_quota(self, tenant: str) -> None:
        """On the worker, before a write: count the tenant's bytes if not counted yet; 429 if over."""
        if self.config.tenant_bytes is None:
            return
        if tenant not in self._usage:
            self._usage[tenant] = self.memory(tenant).stored_bytes()
        if self._over_quota(tenant):
            raise self._quota_error(tenant)

    def close(self, timeout: float | None = None) -> None:
        """Refuse new jobs, finish the queued ones, close the runtime (and its store)."""
        with self._lock:
            if self._draining and self._worker is None:
                return
            self._draining = True
        if self._worker is not None:
            self._scheduler.close()
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

    def run(self, tenant: str, label: str, fn: Callable[["TenantMemory"], Any], writes: bool = False) -> Job:
        """Run `fn(TenantMemory of tenant)` on the worker (`writes`: it stores memory)."""
        return self.submit(tenant, label, lambda: fn(self.memory(tenant)), writes=writes)

    def trace(self, tenant: str) -> list[dict]:
        """`tenant`'s recent requests, newest first (a copy: the worker appends meanwhile)."""
        with self._lock:
            return list(self.traces.get(tenant, ()))

    # ----- tiering (grm/runtime/tiering.py) ------------------------------------------------------
    def tiering(self) -> Any:
        """The store's tiering policy (grm/archive/policy.py TieringPolicy): ServeConfig.store_budget
        (remembered by the store), else the budget an earlier run stored; mounts are counted in its
        UseLog."""
        return self._keeper().policy

    def _keeper(self) -> Any:
        if self._tiering is None:
            from grm.runtime.tiering import Tiering

            self._tiering = Tiering(self.rt, getattr(self.config, "store_budget", None))
        return self._tiering

    def after_write(self, tenant: str) -> None:
        """After a write (on the worker): when the store passed its budget's high-water mark, queue
        one tiering run behind the waiting requests (off their path; a bulk job run a slice at a
        time, between moves and training windows); a full queue skips it."""
        tiering = self._keeper()
        if self._tier_queued or self._draining or not tiering.due():
            return

        def run(pause: Callable[[], None]) -> dict:
            try:
                return tiering.run(pause=pause).to_json()
            finally:
                self._tier_queued = False

        self._tier_queued = True
        try:
            self.submit(tenant, "tier", lambda: None, kind="bulk", sliced=Sliced(run, self.config.slice_s))
        except ApiError:
            self._tier_queued = False

    # ----- documents ----------------------------------------------------------------------------
    def ingest(self, tenant: str, name: str, text: str, layout: str) -> IngestJob:
        """Queue a document ingest: a bulk job run a slice (ServeConfig.slice_s) at a time, stopped
        by `cancel_job`, past ServeConfig.job_timeout_s, or when the tenant passes its byte quota."""
        job = IngestJob("job-" + secrets.token_hex(8), tenant, name, layout)
        quota = None if self.config.tenant_bytes is None else lambda: self._quota_reached(tenant)
        sliced = Sliced(lambda pause: self.memory(tenant).ingest_text(job, text, pause), self.config.slice_s,
                        time.monotonic() + self.config.job_timeout_s, quota)
        job.handle = self.submit(tenant, "ingest", lambda: None, kind="bulk", writes=True, sliced=sliced)
        self._jobs[job.id] = job
        return job

    def _quota_reached(self, tenant: str) -> str | None:
        """At the end of an ingest's slice (on the worker's turn): the reason to stop it, if any."""
        self._usage[tenant] = self.memory(tenant).stored_bytes()
        return "storage quota reached" if self._over_quota(tenant) else None

    def job(self, tenant: str, job_id: str) -> IngestJob | None:
        j = self._jobs.get(job_id)
        return j if j is not None and j.tenant == tenant else None

    def cancel_job(self, tenant: str, job_id: str) -> IngestJob | None:
        """Cancel `tenant`'s ingest job: a queued one never runs; a running one stops after its
        current block, and what it stored that no other document uses is removed."""
        j = self.job(tenant, job_id)
        if j is not None and j.status in ("queued", "running") and j.handle is not None:
            j.status = "cancelled" if j.handle.started_at is None else "cancelling"
            j.handle.cancel()
        return j
