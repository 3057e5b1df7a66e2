"""Workloads the crash simulator runs on a RecordingFS: each is a sequence of steps (one API
call, or one transaction) whose op-log span, LSN, durable LSN and resulting rows are recorded,
so the checker knows, for any crash point, what was acknowledged and under which promise.
A call that commits twice (a policy command: the fact's graft, then the fact transaction) makes
its first commit a step of its own, nested inside it, so every commit ends a step.
A workload may add an invariant of its own (`Run.invariant`), checked on every recovered store."""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from grm.store.config import StoreConfig
from grm.store.record import canonical_json
from tests.sim.recordfs import RecordingFS
from grm.store.store import Store

ROOT = Path("/s")
KEY = bytes(range(32))


def view_of(store: Store) -> frozenset:
    return frozenset((r.tenant, r.kind, r.key, r.parent, canonical_json(r.meta), r.payload,
                      r.payload_size, r.text, r.state, r.lsn) for r in store.records())


@dataclass
class Step:
    name: str
    start: int  # op-log index when the call began
    end: int  # op-log index when it returned (acknowledged)
    lsn: int  # store.last_lsn after it
    durable: int  # store.durable_lsn after it
    mode: str  # durability mode in force after it
    view: frozenset


@dataclass
class Run:
    """What a workload left: the op log, the steps, and the bytes of every payload written."""

    config: StoreConfig
    fs: RecordingFS
    steps: list[Step] = field(default_factory=list)
    payloads: dict[tuple[str, str], bytes] = field(default_factory=dict)  # (tenant, name) -> bytes
    may_miss: set[tuple[str, str]] = field(default_factory=set)  # written unsynced or damaged on purpose
    store: Store | None = None
    invariant: Callable[[Store], list[str]] | None = None  # extra checks of a recovered store: violations

    def open(self) -> Store:
        self.store = self.step("open", lambda: Store.open(self.config))
        return self.store

    def step(self, name: str, fn: Callable[[], object]):
        start = len(self.fs.ops)
        out = fn()
        s = out if isinstance(out, Store) else self.store
        assert s is not None
        mode = s.durability
        if s._closed:  # a close acknowledges nothing new, but may flush (durable_lsn moves)
            last = self.steps[-1]
            self.steps.append(replace(last, name=name, start=start, end=len(self.fs.ops), durable=s.durable_lsn))
            return out
        for r in s.records():
            if r.payload is not None and (r.tenant, r.payload) not in self.payloads:
                data = s.read_payload(r)
                if data is not None:
                    self.payloads[(r.tenant, r.payload)] = data
                    if mode == "volatile":
                        self.may_miss.add((r.tenant, r.payload))
        self.steps.append(Step(name, start, len(self.fs.ops), s.last_lsn, s.durable_lsn, mode, view_of(s)))
        return out


def _blob(tag: str, n: int) -> bytes:
    seed = hashlib.sha256(tag.encode()).digest()
    return (seed * (n // 32 + 1))[:n]


def _run(**kw) -> Run:
    # The async flusher never fires on its own here: workloads call flush(), so op logs are
    # deterministic (the timed flusher has its own test).
    base = dict(root=ROOT, fs=RecordingFS(), checkpoint_every=1000, async_flush_ms=3_600_000,
                async_max_pending=1 << 30)
    cfg = StoreConfig(**{**base, **kw})
    return Run(cfg, cfg.fs)  # type: ignore[arg-type]


def ingest(mode: str = "normal", **kw) -> Run:
    """Chains of blocks with parents and payloads, a document with text, a re-put of the same
    bytes, checkpoints with segment rotation."""
    run = _run(durability=mode, checkpoint_every=9, **kw)
    s = run.open()
    for doc in range(3):
        parent = None
        for i in range(5):
            key = f"d{doc}b{i}"
            run.step(f"put {key}", lambda k=key, p=parent: s.put(
                "alice", "block", k, parent=p, payload=_blob(k, 300 + 97 * i), text=f"block {k} text",
                meta={"i": i}))
            parent = key
        run.step(f"doc {doc}", lambda d=doc: s.put("alice", "document", f"doc{d}", payload=_blob(f"doc{d}", 200),
                                                    text=f"document {d}"))
        if mode == "async":
            run.step("flush", s.flush)
    run.step("same bytes", lambda: s.put("alice", "graft", "g0", payload=_blob("d0b0", 300), parent="d0b0"))
    run.step("close", s.close)
    return run


def chat(mode: str = "full", **kw) -> Run:
    """Chat turns as transactions, supersession with set_state, deletes, replaced payloads."""
    run = _run(durability=mode, checkpoint_every=14, **kw)
    s = run.open()

    def turn(i: int) -> None:
        with s.transaction() as txn:
            txn.put("bob", "turn", f"t{i}", text=f"user says {i}", payload=_blob(f"t{i}", 150))
            txn.put("bob", "fact", f"f{i}", text=f"fact {i}", parent=f"t{i}")
            if i:
                txn.set_state("bob", "fact", f"f{i - 1}", "superseded")

    for i in range(6):
        run.step(f"turn {i}", lambda i=i: turn(i))
        if mode == "async" and i % 2:
            run.step("flush", s.flush)
    run.step("delete", lambda: s.delete("bob", "turn", "t1"))
    run.step("replace", lambda: s.put("bob", "turn", "t2", payload=_blob("t2 new", 180), text="edited"))
    run.step("other tenant", lambda: s.put("carol", "turn", "t0", payload=_blob("t0", 150)))
    run.step("close", s.close)
    return run


def _graft(s: Store, tenant: str, kind: str, text: str, **extra) -> str:
    """A graft as GraftMemory.harvest writes it: kind "graft", payload = its K/V (here stand-in
    bytes of the right order of size), text, and meta with the token ids and routing keys."""
    ids = list(text.encode())
    gid = hashlib.sha256(f"{kind}|{text}|{extra}".encode()).hexdigest()[:32]
    meta = {"identity": "sim-model", "kind": kind, "seat": 4, "tokens": len(ids), "ids": ids, "created": 0.0,
            "sources": [], "dense": [[0.25, -0.5, 0.125, 1.0]], **extra}
    s.put(tenant, "graft", gid, parent=None, text=text, payload=_blob(gid, 64 * len(ids)), meta=meta)
    return gid


def one_live_claim_per_scope(tenant: str) -> Callable[[Store], list[str]]:
    """The policy plane's invariant: never two active facts of one single-valued claim (subject,
    predicate) in one scope, and every superseded fact has its lineage edge (a supersession is one
    transaction)."""

    def check(store: Store) -> list[str]:
        from grm.policy.ledger import Ledger  # model-free

        ledger = Ledger(store, tenant)
        nodes = list(ledger.nodes())
        live = Counter((f.key, f.scope.label()) for f in nodes if f.state == "active" and not f.multi_valued)
        return ([f"{n} active facts of {claim} in scope {scope}" for (claim, scope), n in live.items() if n > 1]
                + [f"superseded fact {f.id} has no lineage edge" for f in nodes
                   if f.state != "active" and ledger.edge(f.id) is None])

    return check


def memory_chat(mode: str = "normal", **kw) -> Run:
    """The memory chat without a model: each turn a graft (kind "graft": payload, text, meta), and
    the policy plane (PolicyMemory) observing "My locker code is 1234.", then "correct memory:
    locker code 1234 => 5678" (fact graft, then new node + old superseded + lineage in one
    transaction), a project-scoped locker fact beside it, a reinforcement, a second correction."""
    from grm.policy import PolicyConfig, PolicyMemory  # model-free

    tenant, session, t0 = "bob", "s1", 1_700_000_000.0
    run = _run(durability=mode, checkpoint_every=12, **kw)
    run.invariant = one_live_claim_per_scope(tenant)
    s = run.open()

    def fact_graft(fact) -> str:  # the chat's grafter: the statement's graft, before the fact's transaction
        return run.step(f"fact graft {fact.id}", lambda: _graft(s, tenant, "fact", f"{fact.statement}.\n\n",
                                                                fact=fact.id))

    mem = PolicyMemory(s, PolicyConfig(tenant=tenant, project="p1", session=session), grafter=fact_graft)
    n = 0

    def turn(text: str) -> None:
        nonlocal n
        n += 1
        run.step(f"turn {n}", lambda: _graft(s, tenant, "evidence", f"User: {text}\nAssistant: ok\n\n",
                                             session=session, turn=n))

    def policy(name: str, fn: Callable[[], object], want: str) -> None:
        out = run.step(name, fn)
        got = out[0].action if isinstance(out, list) else ("changed" if out.changed else out.text)
        assert got == want, (name, out)  # the workload does what it says, or its images prove little

    def observe(text: str, want: str) -> None:
        turn(text)
        policy(f"observe {n}", lambda: mem.observe(text, evidence_id=f"{session}#{n}", now=t0 + n), want)

    def command(text: str) -> None:
        nonlocal n
        n += 1
        policy(text, lambda: mem.handle(text, evidence_id=f"{session}#{n}", now=t0 + n), "changed")

    script: list[tuple[Callable[..., None], tuple[str, ...]]] = [
        (turn, ("Tell me about the village market.",)),
        (observe, ("My locker code is 1234.", "created")),
        (turn, ("What did the market record in winter?",)),
        (command, ("correct memory: locker code 1234 => 5678",)),
        (command, ("remember this for the project: my locker code is 4321",)),
        (observe, ("My locker code is 5678.", "reinforced")),
        (command, ("correct memory: locker code 5678 => 9012",)),
        (turn, ("Which stalls opened first?",)),
    ]
    for i, (act, args) in enumerate(script):
        act(*args)
        if mode == "async" and i % 4 == 3:
            run.step("flush", s.flush)
    run.step("close", s.close)
    return run


def mode_change(**kw) -> Run:
    """normal -> async (flush) -> volatile -> strict, each with writes, then a checkpoint."""
    run = _run(durability="normal", **kw)
    s = run.open()
    n = 0
    for mode in ("async", "volatile", "strict", "normal"):
        run.step(f"mode {mode}", lambda m=mode: s.set_durability(m))
        for _ in range(2):
            run.step(f"put {n}", lambda n=n: s.put("dan", "block", f"k{n}", payload=_blob(f"k{n}", 120 + n),
                                                   parent=f"k{n - 1}" if n else None))
            n += 1
        if mode == "async":
            run.step("flush", s.flush)
    run.step("checkpoint", s.checkpoint)
    run.step("after", lambda: s.put("dan", "block", "last", payload=_blob("k0", 120)))
    run.step("close", s.close)
    return run


def fsck_repair(**kw) -> Run:
    """An aborted transaction leaves an orphan; a payload is damaged on disk; fsck --repair."""
    run = _run(durability="normal", **kw)
    s = run.open()
    run.step("put a", lambda: s.put("eve", "block", "a", payload=_blob("a", 200)))
    bad = run.step("put b", lambda: s.put("eve", "block", "b", payload=_blob("b", 220), parent="a"))

    def abort() -> None:
        try:
            with s.transaction() as txn:
                txn.put("eve", "block", "c", payload=_blob("c", 240))
                raise KeyboardInterrupt  # anything: the transaction applies nothing
        except KeyboardInterrupt:
            pass

    run.step("abort", abort)

    def damage() -> None:  # a rogue write through the same file system, then synced
        h = run.fs.open_write(str(s.payload_path(bad)))
        h.write(b"rot" * 70)
        h.fsync()
        h.close()

    run.step("damage", damage)
    run.may_miss.add(("eve", bad.payload))
    run.step("fsck", lambda: s.fsck(repair=True))
    run.step("put d", lambda: s.put("eve", "block", "d", payload=_blob("d", 260), parent="b"))
    run.step("close", s.close)
    return run


def encrypted(**kw) -> Run:
    """The ingest workload on an encrypted, compressed store."""
    return ingest("normal", master_key=KEY, compress=True, **kw)


WORKLOADS: dict[str, Callable[[], Run]] = {
    "ingest-normal": lambda: ingest("normal"),
    "ingest-async": lambda: ingest("async"),
    "chat-full": lambda: chat("full"),
    "chat-async": lambda: chat("async"),
    "chat-strict": lambda: chat("strict"),
    "memory-chat": memory_chat,
    "memory-chat-async": lambda: memory_chat("async"),
    "mode-change": mode_change,
    "fsck-repair": fsck_repair,
    "encrypted": encrypted,
    "encrypted-async": lambda: ingest("async", master_key=KEY, compress=True),
}


def reopen_config(run: Run, fs) -> StoreConfig:
    return replace(run.config, fs=fs, durability="normal")
