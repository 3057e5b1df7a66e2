"""A long job run one scheduling slice at a time, so the model worker is never held by it for longer.

`Sliced(fn, slice_s, deadline)` runs `fn(pause)` on a thread of its own; `fn` calls `pause()` at
points where it may stop for a while (a document ingest: after each block it stored). The model
worker calls `step()`: the job runs until its first `pause()` after `slice_s` seconds, or to its
end, while the worker waits; so exactly one of the two threads runs at any time, and the model and
the store are still never used by two threads at once. Between slices the worker serves others
(grm/serve/scheduler.py); the job keeps its state (an ingest: its K/V cache) on its paused thread.

Stopping: `stop(why)` (a cancel) or passing `deadline` (a timeout) makes the job's next `pause()`
raise `Stopped(why)`, which ends `fn` like any exception. A job that never started is not run.
Lifecycle: step() until it returns True (finished), then `result()` (or its exception); a job that
must end before it finished is stopped and stepped once more (`finish()`), so its thread ends.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable


class Stopped(Exception):
    """Raised inside a sliced job at a pause: cancelled, timed out, or over its tenant's quota."""


class Sliced:
    def __init__(self, fn: Callable[[Callable[[], None]], Any], slice_s: float, deadline: float | None = None,
                 check: Callable[[], str | None] | None = None) -> None:
        """`deadline`: time.monotonic() after which the job stops (timed out); `check()`: asked at
        the end of each slice, a reason to stop (e.g. a quota passed) or None."""
        self.fn, self.slice_s, self.deadline, self.check = fn, slice_s, deadline, check
        self.slices: list[float] = []  # seconds of each slice run so far
        self._go = threading.Semaphore(0)
        self._back = threading.Semaphore(0)
        self._thread: threading.Thread | None = None
        self._stop: str | None = None
        self._finished = False
        self._result: Any = None
        self._error: BaseException | None = None
        self._began = 0.0

    @property
    def started(self) -> bool:
        return self._thread is not None

    def stop(self, why: str) -> None:
        """Stop at the next pause (a job paused now stops when next stepped)."""
        self._stop = why

    def step(self) -> bool:
        """Run one slice on the job's thread (called by the worker); True once the job finished."""
        if self._finished:
            return True
        self._began = time.perf_counter()
        if self._thread is None:
            if self._stop is not None:  # stopped before it ever ran
                self._error, self._finished = Stopped(self._stop), True
                return True
            self._thread = threading.Thread(target=self._run, name="grm-sliced-job", daemon=True)
            self._thread.start()
        else:
            self._go.release()
        self._back.acquire()
        self.slices.append(time.perf_counter() - self._began)
        return self._finished

    def finish(self, why: str) -> None:
        """Stop the job and let its thread end (the worker's shutdown path)."""
        self.stop(why)
        while not self.step():
            pass

    def result(self) -> Any:
        if self._error is not None:
            raise self._error
        return self._result

    def _run(self) -> None:
        import torch

        torch.set_grad_enabled(False)  # grad mode is per thread
        try:
            self._result = self.fn(self.pause)
        except BaseException as e:  # handed to the worker through result()
            self._error = e
        finally:
            self._finished = True
            self._back.release()

    def pause(self) -> None:
        """Called by the job: stop here if asked to; else hand the worker back once the slice is up
        (after asking `check()`, once a slice)."""
        self._raise_if_stopped()
        if time.perf_counter() - self._began < self.slice_s:
            return
        if self.check is not None and (why := self.check()) is not None:
            raise Stopped(why)
        self._back.release()
        self._go.acquire()
        self._raise_if_stopped()

    def _raise_if_stopped(self) -> None:
        why = self._stop
        if why is None and self.deadline is not None and time.monotonic() > self.deadline:
            why = "timed out"
        if why is not None:
            raise Stopped(why)
