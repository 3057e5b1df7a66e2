"""Crash workloads for `grm gc` and log compaction (grm/store/gc.py), run by the same checker as
tests/sim/workloads.py: every prefix of the op log, every subset of unsynced writes. A gc that
removed a file before the rewrite of the row naming it were durable would leave images where an
acknowledged row's payload is a miss; a compaction that retired a segment before its checkpoint
were durable would leave images that lose acknowledged rows."""

from __future__ import annotations

from grm.store.gc import collect
from tests.sim.workloads import Run, _blob, _run


def gc(mode: str = "normal") -> Run:
    """Deletes, supersessions, a payload shared by a stale and a live row, gc with retention 0,
    then writes after it (one of them the bytes of a file gc removed)."""
    run = _run(durability=mode, checkpoint_every=1000)
    s = run.open()
    run.step("put live", lambda: s.put("gus", "turn", "live", payload=_blob("live", 300), text="live"))
    run.step("put gone", lambda: s.put("gus", "turn", "gone", payload=_blob("gone", 250)))
    run.step("delete gone", lambda: s.delete("gus", "turn", "gone"))
    with_txn = lambda: _supersede(s)  # noqa: E731
    run.step("supersede", with_txn)
    run.step("twin graft", lambda: s.put("gus", "graft", "twin", payload=_blob("twin", 200)))
    if mode == "async":
        run.step("flush", s.flush)
    run.step("gc", lambda: collect(s, retain_writes=0))
    run.step("put again", lambda: s.put("gus", "turn", "again", payload=_blob("gone", 250)))
    run.step("put after", lambda: s.put("gus", "turn", "after", payload=_blob("after", 220), text="after"))
    if mode == "async":
        run.step("flush", s.flush)
    run.step("close", s.close)
    return run


def _supersede(s) -> None:
    with s.transaction() as txn:
        txn.put("gus", "fact", "new", payload=_blob("new", 180), text="code is 5678")
        txn.put("gus", "fact", "old", payload=_blob("old", 180), text="code is 1234", state="superseded")
        txn.put("gus", "fact", "twin", payload=_blob("twin", 200), text="twin", state="superseded")


def compaction(mode: str = "normal") -> Run:
    """One row rewritten many times (a long history, few live rows), compaction, writes after."""
    run = _run(durability=mode, checkpoint_every=1000)
    s = run.open()
    for i in range(12):
        run.step(f"rewrite {i}", lambda i=i: s.put("hal", "note", "counter", text=f"value {i}",
                                                   payload=_blob(f"v{i}", 120)))
    run.step("compact", lambda: collect(s, retain_writes=None))
    run.step("after", lambda: s.put("hal", "note", "after", text="after", payload=_blob("after", 140)))
    run.step("compact again", lambda: collect(s, retain_writes=None))
    run.step("close", s.close)
    return run


GC_WORKLOADS = {
    "gc-normal": lambda: gc("normal"),
    "gc-async": lambda: gc("async"),
    "compaction-normal": lambda: compaction("normal"),
    "compaction-async": lambda: compaction("async"),
}
