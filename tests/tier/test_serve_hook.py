"""The server keeps its store under budget: after a write (an ingest job, a completion with memory)
its worker runs the tiering policy behind the queued requests, and counts what answers mounted."""

from __future__ import annotations

import time

from grm.serve.config import ServeConfig
from grm.serve.engine import Engine
from grm.serve.generation import GenRequest
from grm.store.tiering import inventory, stored_budget
from tests.conftest import lorem


def run_on_worker(engine: Engine, fn):
    """fn() on the model worker, behind everything queued so far (the store is the worker's)."""
    return engine.submit("default", "probe", fn).future.result(timeout=120)


def wait_until(engine: Engine, cond, seconds: float = 120) -> bool:
    end = time.time() + seconds
    while time.time() < end:
        if run_on_worker(engine, cond):
            return True
        time.sleep(0.2)
    return False


def test_an_ingest_past_the_budget_is_tiered_by_the_worker(make_runtime) -> None:
    rt = make_runtime(section_tokens=48, block_tokens=48)
    rt.ingest_text(lorem(4) + "\nThe vault code is 4512.\n", "a.txt")
    inv = inventory(rt.store)
    budget = inv.footprint + 1000  # the next document pushes it over
    engine = Engine(rt, ServeConfig(no_auth=True, queue=4, store_budget=budget)).start()
    try:
        job = engine.ingest("default", "b.txt", lorem(4, seed=2), "both")
        assert wait_until(engine, lambda: job.status == "done" and not engine._tier_queued
                          and inventory(rt.store).by_tier()["text"]["spans"] > 0), job
        assert run_on_worker(engine, lambda: stored_budget(rt.store)) == budget
        assert run_on_worker(engine, lambda: inventory(rt.store).footprint) <= budget
        done = engine.complete("default", GenRequest("What is the vault code?", 4, mode="auto"))
        done.future.result(timeout=120)
        assert engine.tiering().uses.pending() >= 1  # the mounted section, counted in memory only
    finally:
        engine.close(30)
