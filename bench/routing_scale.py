"""What a routed question costs as memory grows: 10^3 and 10^5 facts, before and after the routing
state was kept in step with the store by LSN (issue 30 item 4), side by side in one run.

Before: every routed question scanned memory (`scan_exclusions` below is that code, as it was in
grm/runtime/policy_glue.py): the live facts, then every fact node twice more (each node read with
its supports and graft link), every folded row, and, once anything was stale, every routable graft
with a regex per stale value, up to twice per question (`answer.route_memory` routes again where
the first routing abstains). After: `PolicyGlue.exclusions` reads the fact index
(grm/policy/factindex.py) and the exclusions it keeps (grm/policy/exclusions.py), both brought up
to the store's last LSN by the rows written since.

The store (synthetic rows through the store's transactions, `tiny-random-llama`, no chat turns):
N fact nodes over N - 20 claims "my <word> k<i>" (20 claims corrected: the first node superseded,
with its lineage row), each node with its fact graft (kind "fact", a random dense key), and about
N / 9 evidence turns saying a live fact, plus the 20 turns that said the corrected values (stale
twice over: their facts are superseded and they hold the old value). Only 20 stale values: the old
scan checked each routable graft against each stale value (grafts x stale values regex passes),
which at 10^5 grafts and thousands of stale values would take minutes per question to measure;
the kept state's cost does not grow with either. Per size, for questions
"What is my <word> k<i>?":
- exclusions: the old scan vs `PolicyGlue.exclusions`, on a store that did not move, and with a
  write before each (one evidence turn stored: the indexes read it, the scan reads everything);
- a routed question (`answer.route_grafts`: exclusions, `GraftMemory.route`, descent) with the old
  scan in place of the exclusions vs as shipped, both on one runtime.
Each pair is checked equal (same excluded ids, same routed grafts) before it is timed.

`python bench/routing_scale.py [--threads N] [--sizes 1000,100000] [--quick] [--name NAME]`; sizes run
apart (`--sizes 1000 --name A`, `--sizes 100000 --name B`) are tabled together by
`--merge bench/results/A.json,bench/results/B.json`.
"""

from __future__ import annotations

import argparse
import base64
import gc
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import run_cli, write_results  # noqa: E402

SIZES = (1_000, 100_000)
QUICK_SIZES = (1_000, 10_000)
CORRECTED = 20  # claims corrected: the stale values
WORDS = ("locker", "garage", "vault", "office", "studio", "bike", "alarm", "gate", "cabin", "boat")


# ----- the code before: a pass over memory per question ------------------------------------------
def scan_facts(mem, now: float) -> list:
    """PolicyMemory.facts as it was: every fact node read (with its supports and graft link)."""
    ctx = mem.config.scope
    live = [f for f in mem.ledger.active() if f.live(now) and f.scope.visible_in(ctx)]
    deepest: dict[tuple[str, str], int] = {}
    for f in live:
        if not f.multi_valued:
            deepest[f.key] = max(deepest.get(f.key, 0), f.scope.depth)
    return [f for f in live if f.multi_valued or f.scope.depth == deepest[f.key]]


def scan_exclusions(mem, grafts, now: float) -> frozenset[str]:
    """PolicyGlue.exclusions as it was. `grafts(kind=None)`: the routable grafts (objects with
    id, kind, text and record.meta), as GraftMemory.grafts lists them."""
    from grm.policy.stale import stale_text, stale_values
    from grm.runtime.policy_glue import evidence_id

    live = scan_facts(mem, now)
    live_ids = {f.id for f in live}
    live_grafts = {f.graft for f in live if f.graft}
    live_evidence = {e.id for f in live for e in f.evidence}
    dead_evidence: set[str] = set()
    out: set[str] = set(mem.folder.retired())
    for f in mem.ledger.nodes():
        if f.id not in live_ids:
            dead_evidence.update(e.id for e in f.evidence)
            if f.graft and f.graft not in live_grafts:
                out.add(f.graft)
    stale = dead_evidence - live_evidence
    old_values = stale_values(mem.ledger.nodes(), live, now)
    if stale or old_values:
        for g in grafts():
            meta = g.record.meta
            if g.kind == "evidence" and evidence_id(meta.get("session", ""), int(meta.get("turn", 0))) in stale:
                out.add(g.id)
            elif g.kind in ("evidence", "digest") and stale_text(g.text, old_values):
                out.add(g.id)
    for g in grafts(kind="fact"):
        if g.id not in live_grafts:
            out.add(g.id)
    return frozenset(out)


def route_before(ctx, text: str) -> list:
    """answer.route_grafts with the old scan (and descent's old pass over the folded rows)."""
    from grm.runtime.answer import route_grafts

    glue = ctx.policy()
    new_exclusions, new_index = glue.exclusions, glue.policy.index
    glue.exclusions = lambda now=None: scan_exclusions(glue.policy, ctx.grafts.grafts, time.time())
    glue.policy.index = _RetiredScan(glue.policy)
    try:
        return route_grafts(ctx, text)
    finally:
        glue.exclusions, glue.policy.index = new_exclusions, new_index


class _RetiredScan:
    def __init__(self, mem) -> None:
        self.mem = mem

    def without_retired(self, ids):
        return frozenset(ids) - self.mem.folder.retired()


# ----- the store ----------------------------------------------------------------------------------
def fill(rt, n: int, seed: int = 0) -> dict:
    """N fact nodes, their fact grafts and 0.1 N evidence turns, written in transactions."""
    import numpy as np

    from grm.policy.fact import Evidence, Fact, Scope
    from grm.policy.ledger import FACT, LINEAGE
    from grm.route.dense import key_width
    from grm.runtime.policy_glue import fact_text
    from grm.store.kinds import GRAFT

    rng = random.Random(seed)
    npr = np.random.default_rng(seed)
    store, tenant, identity = rt.store, rt.config.tenant, rt.lm.identity
    width = key_width(rt.exact.dialect, rt.grafts.config.channels.dense)
    d = rt.exact.dialect.head_dim
    seat = rt.exact.sinks().tokens
    corrected = min(CORRECTED, n // 5)
    claims = n - corrected
    t0 = time.time() - 3600.0

    def dense() -> str:
        k = npr.standard_normal((width // d, d)).astype(np.float32)
        k /= np.linalg.norm(k, axis=-1, keepdims=True)
        return base64.b64encode(k.astype("<f2").tobytes()).decode("ascii")

    def graft_row(txn, gid: str, kind: str, text: str, extra: dict) -> None:
        txn.put(tenant, GRAFT, gid, text=text, meta={
            "identity": identity, "kind": kind, "seat": seat, "tokens": 24, "ids": list(range(24)),
            "created": t0, "sources": [], "dense": dense(), **extra})

    def node(i: int, value: str, at: float, turn: int, supersedes: tuple[str, ...], state: str) -> Fact:
        subject = f"my {WORDS[i % len(WORDS)]} k{i}"
        ev = Evidence(f"bench#{turn}", at, "extract:rule", "created")
        return Fact(id=f"f-{turn:012x}", subject=subject, predicate="is", value=value,
                    statement=f"{subject} is {value}", scope=Scope(), lifetime="permanent", mutable=True,
                    pinned=False, intent="inferred", confidence=0.6, count=1, valid_from=at, expires_at=None,
                    created=at, graft=f"g-fact-{turn:012x}", supersedes=supersedes, reason="new fact",
                    evidence=(ev,), state=state, node_intent="inferred", node_confidence=0.6, node_count=1)

    turn = 0
    batch = 1000
    for start in range(0, claims, batch):
        with store.transaction() as txn:
            for i in range(start, min(start + batch, claims)):
                old = None
                if i < corrected:
                    turn += 1
                    old = node(i, f"{rng.randrange(10**6):06d}", t0, turn, (), "superseded")
                    txn.put(tenant, FACT, old.id, meta=old.to_meta(), text=old.statement, state="superseded")
                    graft_row(txn, old.graft, "fact", fact_text(old.statement, old.subject, "is"), {"fact": old.id})
                turn += 1
                new = node(i, f"{rng.randrange(10**6):06d}", t0 + 1.0, turn, (old.id,) if old else (), "active")
                txn.put(tenant, FACT, new.id, meta=new.to_meta(), text=new.statement, parent=old.id if old else None)
                graft_row(txn, new.graft, "fact", fact_text(new.statement, new.subject, "is"), {"fact": new.id})
                if old is not None:
                    ev = new.evidence[0]
                    txn.put(tenant, LINEAGE, old.id, parent=new.id, meta={
                        "successor": new.id, "tombstone": None, "reason": "corrected", "at": ev.at,
                        "evidence": ev.to_json()})
                    # the turn that said the old value: stale evidence, and it holds a stale value
                    graft_row(txn, f"g-turn-{turn - 1:012x}", "evidence", f"User: {old.statement}.\n",
                              {"session": "bench", "turn": turn - 1})
                elif i % 9 == 0:  # a turn saying a live fact
                    graft_row(txn, f"g-turn-{turn:012x}", "evidence", f"User: {new.statement}.\n",
                              {"session": "bench", "turn": turn})
    return {"facts": turn, "claims": claims, "corrected": corrected,
            "grafts": sum(1 for _ in store.records(tenant, GRAFT))}


def _paired(before, after, reps_before: int, reps_after: int) -> tuple[dict, dict]:
    """Median wall and CPU (this process) ms of `before` and `after`, interleaved (a before, then
    reps_after / reps_before afters) so a busy machine weighs on both alike."""
    times: dict[str, dict[str, list[float]]] = {"before": {"wall": [], "cpu": []}, "after": {"wall": [], "cpu": []}}

    def once(name: str, fn) -> None:
        gc.collect()
        w, c = time.perf_counter(), time.process_time()
        fn()
        times[name]["cpu"].append((time.process_time() - c) * 1000)
        times[name]["wall"].append((time.perf_counter() - w) * 1000)

    per = max(1, reps_after // reps_before)
    for _ in range(reps_before):
        once("before", before)
        for _ in range(per):
            once("after", after)
    out = tuple({k: round(statistics.median(v), 3) for k, v in times[name].items()} for name in ("before", "after"))
    return out  # type: ignore[return-value]


def one_size(n: int, threads: int, model: str | None, reps_before: int, reps_after: int) -> dict:
    from grm.runtime import Runtime
    from grm.runtime.answer import route_grafts
    from grm.store.kinds import GRAFT

    out: dict = {"n": n}
    with tempfile.TemporaryDirectory() as d:
        with Runtime.open(store=Path(d) / "s", model=model or "tiny-random-llama", threads=threads,
                          device="cpu", durability="volatile") as rt:
            t = time.perf_counter()
            out.update(fill(rt, n))
            out["fill_s"] = round(time.perf_counter() - t, 1)
            ctx, glue = rt.ctx, rt.policy_glue()
            rng = random.Random(1)
            questions = [f"What is my {WORDS[i % len(WORDS)]} k{i}?"
                         for i in (rng.randrange(out["claims"]) for _ in range(max(reps_before, reps_after)))]
            t = time.perf_counter()
            first = glue.exclusions()
            out["first_build_s"] = round(time.perf_counter() - t, 2)  # both indexes built, as after a restart
            old = scan_exclusions(glue.policy, ctx.grafts.grafts, time.time())
            assert first == old, "the kept exclusions differ from the scan"
            out["excluded"] = len(old)
            for q in questions[:3]:
                a = [r.graft.id for r in route_before(ctx, q)]
                b = [r.graft.id for r in route_grafts(ctx, q)]
                assert a == b, (q, a, b)
                if n >= 50_000:  # a scan takes tens of seconds there: one question checked
                    break
            out["exclusions_before_ms"], out["exclusions_after_ms"] = _paired(
                lambda: scan_exclusions(glue.policy, ctx.grafts.grafts, time.time()), glue.exclusions,
                reps_before, reps_after)
            turn = [10**9]

            def write() -> None:  # one evidence turn harvested
                turn[0] += 1
                rt.store.put(rt.config.tenant, GRAFT, f"g-new-{turn[0]}", text="User: nice weather today.\n", meta={
                    "identity": rt.lm.identity, "kind": "evidence", "seat": 0, "tokens": 4, "ids": [0, 1, 2, 3],
                    "created": time.time(), "sources": [], "session": "bench", "turn": turn[0]})

            def before_after_write() -> None:
                write()
                scan_exclusions(glue.policy, ctx.grafts.grafts, time.time())

            def after_write() -> None:
                write()
                glue.exclusions()

            if n < 50_000:
                out["exclusions_write_before_ms"], out["exclusions_write_after_ms"] = _paired(
                    before_after_write, after_write, reps_before, reps_after)
            else:  # the scan's cost is the one above, the write adds nothing to it: only the kept state's timed
                out["exclusions_write_before_ms"], out["exclusions_write_after_ms"] = None, _paired(
                    after_write, after_write, 1, reps_after)[1]
            if n < 50_000:
                assert glue.exclusions() == scan_exclusions(glue.policy, ctx.grafts.grafts, time.time())
            qs = iter(questions * 4)
            out["route_before_ms"], out["route_after_ms"] = _paired(
                lambda: route_before(ctx, next(qs)), lambda: route_grafts(ctx, next(qs)), reps_before, reps_after)
            out["reps_before"], out["reps_after"] = reps_before, reps_after
    return out


def _table(rows: list[dict]) -> list[str]:
    out = ["Median ms per call, CPU time of this process (wall clock in brackets; the machine's two cores were "
           "shared). Before: the pass over memory the old code made per question; after: the state kept in step "
           "with the store by LSN. The same excluded ids and routed grafts, checked before timing; before and "
           "after interleaved.", "",
           "| facts | grafts | excluded | exclusions before | after | one write, then exclusions: before | after | "
           "routed question before | after | routed: before / after | indexes built at the first question (s) |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]

    def ms(d: dict) -> str:
        return f"{d['cpu']:,.2f} ({d['wall']:,.2f})"

    for r in rows:
        out.append(f"| {r['facts']:,} | {r['grafts']:,} | {r['excluded']:,} | {ms(r['exclusions_before_ms'])} | "
                   f"{ms(r['exclusions_after_ms'])} | "
                   f"{ms(r['exclusions_write_before_ms']) if r['exclusions_write_before_ms'] else 'not timed'} | "
                   f"{ms(r['exclusions_write_after_ms'])} | {ms(r['route_before_ms'])} | {ms(r['route_after_ms'])} | "
                   f"{r['route_before_ms']['cpu'] / max(r['route_after_ms']['cpu'], 1e-9):,.0f}x | "
                   f"{r['first_build_s']} |")
    return out


def main(args: argparse.Namespace) -> int:
    import torch

    threads = args.threads or 2
    torch.set_num_threads(threads)
    if args.merge:  # rows of separate runs (one size each) into one table
        runs = [json.loads(Path(f).read_text()) for f in args.merge.split(",")]
        rows = [r for run in runs for r in run["sizes"]]
        command = "; ".join(run["command"] for run in runs)
    else:
        sizes = [int(s) for s in args.sizes.split(",")] if args.sizes else list(QUICK_SIZES if args.quick else SIZES)
        rows = []
        for n in sizes:
            rows.append(one_size(n, threads, args.model, reps_before=1 if n >= 50_000 else 10, reps_after=30))
            print(rows[-1], flush=True)
        flags = f" --sizes {args.sizes}" if args.sizes else ""
        command = f"python bench/routing_scale.py --threads {threads}{flags}" + (f" --name {args.name}" if args.name else "")
    write_results(args.name or "routing-scale", {"sizes": rows}, _table(rows), command, quick=args.quick)
    print("\n".join(_table(rows)))
    return 0


if __name__ == "__main__":
    def flags(p: argparse.ArgumentParser) -> None:
        p.add_argument("--sizes", default=None, help="comma-separated fact counts")
        p.add_argument("--name", default=None, help="results name (default routing-scale)")
        p.add_argument("--merge", default=None, help="comma-separated results JSON of runs to table together")

    run_cli(main, flags)
