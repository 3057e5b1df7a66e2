"""The crash-image checker: run a workload on a RecordingFS, build the disk images a crash after
every prefix of its operation log could leave, recover each in a fresh Store on a fresh MemoryFS
(sharing no memory with the writer), and check the invariants:

1. recovery succeeds (power-loss images of a volatile stretch are exempt: volatile promises
   nothing there) and the recovered LSNs are exactly 1..m: the recovered rows, LSNs included,
   equal the rows after some step j, and m is that step's last LSN;
2. nothing never written: step j had started before the crash point;
3. everything acknowledged under the promise is there: m >= the LSN of every step acknowledged
   before the crash point (process-crash image "all"), or >= the durable LSN the store had
   reported by then (power-loss images); deleted rows stay deleted because the whole row set
   must equal step j's;
4. every served payload verifies: read_payload returns exactly the bytes written, or None only
   for a record the promise did not cover (or one damaged on purpose);
5. (sampled) the recovered store takes a write and recovers it again (recovery is idempotent);
6. the workload's own invariant, if it has one (`Run.invariant`: e.g. the memory chat's "never
   two active facts of one claim in one scope, every superseded fact has its lineage").
Images are deduplicated by content; each distinct image is recovered once and checked against
every crash point that produced it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field

from grm.errors import GrmError
from grm.store.memfs import MemoryFS
from tests.sim.recordfs import Image, images
from tests.sim.workloads import Run, Step, reopen_config, view_of
from grm.store.store import Store


@dataclass
class Outcome:
    error: str | None
    lsn: int = 0
    view: frozenset = frozenset()
    payloads: dict = field(default_factory=dict)  # (tenant, name, kind, key) -> bytes | None
    reopen_ok: bool | None = None
    broken: list[str] = field(default_factory=list)  # the workload invariant's violations


@dataclass
class CrashReport:
    workload: str
    ops: int = 0
    images: int = 0  # (crash point, variant) pairs checked
    distinct: int = 0  # distinct disk images recovered
    violations: list[str] = field(default_factory=list)


def _recover(run: Run, image: Image, dirs: set[str], reopen: bool) -> Outcome:
    fs = MemoryFS()
    for d in sorted(dirs):
        fs.makedirs(d)
    for path, data in image.items():
        h = fs.open_write(path)
        h.write(data)
        h.close()
    cfg = reopen_config(run, fs)
    try:
        s = Store.open(cfg)
    except GrmError as e:
        return Outcome(f"{type(e).__name__}: {e}")
    try:
        out = Outcome(None, s.recovered_lsn, frozenset(v for v in view_of(s)))
        for r in s.records():
            if r.payload is not None:
                out.payloads[(r.tenant, r.payload, r.kind, r.key)] = s.read_payload(r)
        if run.invariant is not None:
            out.broken = run.invariant(s)
        if reopen:
            s.put("zz-sim", "probe", "k", payload=b"probe")
            s.close()
            with Store.open(cfg) as s2:
                r = s2.get("zz-sim", "probe", "k")
                out.reopen_ok = (r is not None and s2.read_payload(r) == b"probe"
                                 and view_of(s2) - {v for v in view_of(s2) if v[0] == "zz-sim"} == out.view)
    finally:
        s.close()
    return out


def _volatile_spans(steps: list[Step]) -> list[tuple[int, int]]:
    """Op ranges during which something written under volatile may still be unsynced."""
    spans, start = [], None
    for st in steps:
        if st.mode == "volatile" and start is None:
            start = st.start
        elif st.mode != "volatile" and start is not None:
            spans.append((start, st.end))
            start = None
    if start is not None:
        spans.append((start, 1 << 60))
    return spans


def check_run(name: str, run: Run, seed: int = 0, subsets: int = 3, reopen_every: int = 10) -> CrashReport:
    ops = run.fs.ops
    rep = CrashReport(name, ops=len(ops))
    cache: dict[bytes, Outcome] = {}  # one recovery per distinct image
    spans = _volatile_spans(run.steps)
    empty = Step("empty", -1, 0, 0, 0, run.steps[0].mode, frozenset())
    steps = [empty] + run.steps
    for p in range(len(ops) + 1):
        acked = [st for st in steps if st.end <= p]
        acked_lsn = max(st.lsn for st in acked)
        durable_lsn = max(st.durable for st in acked)
        started = [st for st in steps if st.start < p]
        volatile = any(a < p <= b for a, b in spans)
        for variant, image, dirs in images(ops, p, seed, subsets):
            power = variant != "all"
            if power and volatile:
                continue
            rep.images += 1
            key = hashlib.sha256(repr(sorted(image.items())).encode()).digest()
            out = cache.get(key)
            if out is None:
                out = _recover(run, image, dirs, reopen=rep.distinct % reopen_every == 0)
                cache[key] = out
                rep.distinct += 1
            where = f"{name} p={p}/{len(ops)} {variant}"
            bad = _violations(run, out, started, acked_lsn if not power else durable_lsn, power, durable_lsn)
            rep.violations.extend(f"{where}: {b}" for b in bad)
    return rep


def _violations(run: Run, out: Outcome, started: list[Step], floor: int, power: bool,
                durable_lsn: int) -> list[str]:
    if out.error is not None:
        return [f"recovery failed: {out.error}"]
    bad = []
    match = [st for st in started if st.view == out.view and st.lsn == out.lsn]
    if not match:
        bad.append(f"recovered rows at lsn {out.lsn} match no state after a started step")
    if out.lsn < floor:
        bad.append(f"acknowledged lsn {floor} lost (recovered up to {out.lsn})")
    for (tenant, pname, kind, key), data in out.payloads.items():
        want = run.payloads.get((tenant, pname))
        if data is not None and data != want:
            bad.append(f"wrong payload bytes served for {tenant}/{kind}/{key}")
        if data is None and (tenant, pname) not in run.may_miss:
            lsn = max((v[9] for v in out.view if v[:3] == (tenant, kind, key)), default=0)
            if not power or lsn <= durable_lsn:
                bad.append(f"acknowledged payload of {tenant}/{kind}/{key} (lsn {lsn}) is a miss")
    if out.reopen_ok is False:
        bad.append("recovered store did not take and recover a new write")
    return bad + out.broken


def run_all(workloads: dict[str, Callable[[], Run]], seed: int = 0, subsets: int = 3) -> list[CrashReport]:
    return [check_run(name, make(), seed, subsets) for name, make in workloads.items()]
