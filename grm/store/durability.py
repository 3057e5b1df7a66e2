"""Async mode's background flusher: fsyncs deferred payload files, their folders and the log at
most `async_flush_ms` apart, or as soon as `async_max_pending` commits wait, off the hot path.

Lifecycle: the store starts one when it enters async mode, calls `committed()` after every
commit (a counter bump; wakes the thread only when the batch is full), and `stop()` when it
leaves async mode or closes (after which it flushes once more itself). The thread calls the
store's `flush`, which captures what to sync under the store lock, then fsyncs without it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

log = logging.getLogger("grm.store")


class Flusher:
    def __init__(self, flush: Callable[[], None], interval_s: float, max_pending: int) -> None:
        self._flush = flush
        self._interval = interval_s
        self._max = max_pending
        self._cond = threading.Condition()
        self._pending = 0
        self._stop = False
        self.flushes = 0
        self._thread = threading.Thread(target=self._run, name="grm-store-flusher", daemon=True)
        self._thread.start()

    def committed(self, n: int = 1) -> None:
        with self._cond:
            self._pending += n
            if self._pending >= self._max:
                self._cond.notify()

    def _run(self) -> None:
        while True:
            with self._cond:
                if not self._stop and self._pending < self._max:
                    self._cond.wait(self._interval)
                stop, n = self._stop, self._pending
                self._pending = 0
            if n:
                try:
                    self._flush()
                    self.flushes += 1
                except Exception:  # the store poisons itself on OSError; anything else is a bug
                    log.exception("async flush failed")
            if stop:
                return

    def stop(self, join: bool = True) -> None:
        with self._cond:
            self._stop = True
            self._cond.notify()
        if join:
            self._thread.join()
