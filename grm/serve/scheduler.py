"""The fair scheduler: which jobs the server's one model worker runs next, and who may queue more.

Lifecycle (who calls what, when):
1. Request handlers (asyncio thread) `put(job)`: admitted, or ApiError 429 + Retry-After for that
   tenant alone when it already has `per_tenant` jobs waiting, or 503 + Retry-After when the whole
   server has `total` waiting (nobody's fault: the server is full).
2. The worker thread `take()`s the next job (blocking), runs it - a long job only one scheduling
   slice of it (grm/serve/slices.py) - then `done(job, seconds)`; a long job that paused is
   `put_back(job)` behind the waiting work of its class (never refused: it was admitted, and it
   counts as waiting while it is paused). While it generates a batch of answers
   (grm/runtime/batch.py), the worker `take_more(n)`s between decoding steps: up to n jobs
   waiting now, never blocking, so new requests join the batch as others leave it.
3. `close()` after the last put: `take()` hands out what is still waiting, then None.

Who goes next (tests/serve/test_fairness.py tries each rule):
1. Two classes. Interactive: chats, completions, memory REST, the inspector. Bulk: document
   ingest and tiering, which run a slice at a time. An interactive job goes before any bulk one,
   so a short chat waits for at most the slice that is running when it arrives.
2. Within a class, tenants take turns: the tenant served least recently goes next (one never
   served first); a tenant's own jobs run in the order it sent them. One tenant's burst of
   requests delays another tenant's request by at most one job of that burst.
3. Bulk work is never starved: after `burst` interactive jobs in a row while a bulk job waits,
   one bulk slice runs.
Batching: `take_more(n)` hands out jobs by the same order, one by one, so rules 1 and 2 hold for
a batch as for single jobs (a tenant's burst fills a batch only where no other tenant waits). The
batch is interactive work under way: while it runs, a bulk job is taken only by rule 3 (after
`burst` interactive jobs in a row), never just because no interactive job waits, so a bulk slice
pauses a batch no more often than it pauses a run of single chats.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

from grm.serve.errors import ApiError

CLASSES = ("interactive", "bulk")


@dataclass(frozen=True)
class Limits:
    per_tenant: int = 16  # jobs one tenant may have waiting; one more is its 429
    total: int = 256  # jobs waiting across all tenants; one more is a 503
    burst: int = 8  # interactive jobs in a row before a waiting bulk job gets a slice


class Scheduler:
    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self._queues: dict[str, dict[str, deque]] = {c: {} for c in CLASSES}  # class -> tenant -> jobs
        self._served: dict[str, float] = {}  # tenant -> when its last job (or slice) was taken
        self._seconds = {c: 1.0 for c in CLASSES}  # running mean of a job's (a slice's) seconds, per class
        self._in_a_row = 0  # interactive jobs taken in a row while bulk work waited
        self._closed = False
        self._cv = threading.Condition()

    # ----- admission (request handlers) ------------------------------------------------------------
    def put(self, job: Any) -> None:
        """Admit `job` (its `tenant` and `kind`: one of CLASSES), or raise ApiError 429 / 503."""
        with self._cv:
            mine, everyone = self._queued(job.tenant), self.depth
            if mine >= self.limits.per_tenant:
                raise ApiError(429, f"this API key already has {mine} requests waiting for the model; retry later",
                               "rate_limit_error", "queue_full", headers={"Retry-After": self._retry(mine)})
            if everyone >= self.limits.total:
                raise ApiError(503, f"the server has {everyone} requests waiting for the model; retry later",
                               "server_error", "server_busy", headers={"Retry-After": self._retry(everyone)})
            self._append(job)

    def put_back(self, job: Any) -> None:
        """A long job that paused after a slice: behind what waits in its class (already admitted)."""
        with self._cv:
            self._append(job)

    def _append(self, job: Any) -> None:
        self._queues[job.kind].setdefault(job.tenant, deque()).append(job)
        self._cv.notify()

    def _queued(self, tenant: str) -> int:
        return sum(len(q.get(tenant, ())) for q in self._queues.values())

    def _retry(self, waiting: int) -> str:
        """Retry-After: seconds until about `waiting` jobs have run (at least 1)."""
        return str(max(1, math.ceil(self._seconds["interactive"] * waiting)))

    # ----- the worker ------------------------------------------------------------------------------
    def take(self) -> Any:
        """The next job by the rules above; blocks while none waits; None once closed and empty."""
        with self._cv:
            while True:
                job = self._next()
                if job is not None:
                    self._served[job.tenant] = time.monotonic()
                    return job
                if self._closed:
                    return None
                self._cv.wait()

    def take_more(self, n: int) -> list[Any]:
        """While the worker generates a batch: up to `n` jobs waiting now, by the rules above (a
        bulk job only by rule 3, and then alone: its slice pauses the batch); never blocks."""
        with self._cv:
            out: list[Any] = []
            while len(out) < n and (job := self._next(busy=True)) is not None:
                self._served[job.tenant] = time.monotonic()
                out.append(job)
                if job.kind == "bulk":
                    break
            return out

    def _next(self, busy: bool = False) -> Any:
        bulk_waits = any(self._queues["bulk"].values())
        order: tuple[str, ...] = ("interactive", "bulk")
        if bulk_waits and self._in_a_row >= self.limits.burst:
            order = ("bulk", "interactive")
        elif busy:
            order = ("interactive",)
        for kind in order:
            queues = self._queues[kind]
            tenants = [t for t, q in queues.items() if q]
            if not tenants:
                continue
            tenant = min(tenants, key=lambda t: self._served.get(t, -math.inf))
            self._in_a_row = self._in_a_row + 1 if kind == "interactive" and bulk_waits else 0
            return queues[tenant].popleft()
        return None

    def done(self, job: Any, seconds: float) -> None:
        """The worker ran `job` (or one slice of it) for `seconds` (the Retry-After estimate)."""
        with self._cv:
            self._seconds[job.kind] = 0.8 * self._seconds[job.kind] + 0.2 * seconds

    def close(self) -> None:
        with self._cv:
            self._closed = True
            self._cv.notify_all()

    @property
    def depth(self) -> int:
        """Jobs waiting for the worker (a long job paused between its slices included)."""
        return sum(len(q) for queues in self._queues.values() for q in queues.values())
