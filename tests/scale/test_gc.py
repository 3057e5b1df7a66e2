"""`grm gc` (grm/store/gc.py): orphans and superseded payloads past the retention window go,
rows and lineage stay, shared payloads stay, the log is compacted, dry runs change nothing."""

from __future__ import annotations

import json

import pytest

from grm.errors import UserInputError
from grm.store import Store, StoreConfig
from grm.store.gc import collect
from tests.cli.conftest import _restore_torch_threads, grm  # noqa: F401  (`grm` in-process)


def _open(path, **kw) -> Store:
    return Store.open(StoreConfig(root=path, checkpoint_every=1_000_000, **kw))


def _fill(s: Store) -> None:
    s.put("t", "turn", "live", payload=b"live bytes" * 50, text="kept")
    s.put("t", "turn", "gone", payload=b"deleted bytes" * 50)
    s.delete("t", "turn", "gone")  # its file is now an orphan
    s.put("t", "fact", "old", payload=b"old fact kv" * 50, text="my locker code is 1234")
    s.put("t", "fact", "new", payload=b"new fact kv" * 50, text="my locker code is 5678", parent="old")
    s.set_state("t", "fact", "old", "superseded")
    s.put("t", "fact", "twin", payload=b"shared kv" * 50, text="twin")
    s.put("t", "graft", "twin", payload=b"shared kv" * 50, text="twin graft")
    s.set_state("t", "fact", "twin", "superseded")  # superseded, but its bytes are also a live graft's
    for i in range(20):
        s.put("t", "note", f"n{i}", text=f"filler {i}")


@pytest.mark.parametrize("encrypted", [False, True])
def test_gc_removes_orphans_and_stale_payloads_and_keeps_rows_and_shared_bytes(tmp_path, encrypted):
    kw = {"master_key": bytes(range(32))} if encrypted else {}
    s = _open(tmp_path / "s", **kw)
    _fill(s)
    assert len(s.fsck().orphans) == 1
    rep = collect(s, retain_writes=5)
    # deleted + old's file; encrypted names are keyed per kind, so the twins share no file there
    assert sorted(rep.stale) == ["t/fact/old", "t/fact/twin"] and len(rep.orphans) == (3 if encrypted else 2)
    assert rep.bytes_freed > 1000 and rep.checkpoint_lsn == s.last_lsn
    old = s.get("t", "fact", "old")
    assert old.payload is None and old.state == "superseded" and old.text == "my locker code is 1234"
    assert old.meta["gc_payload"]["size"] == len(b"old fact kv" * 50)
    assert s.get("t", "fact", "new").parent == "old"  # lineage readable
    assert s.read_payload(s.get("t", "graft", "twin")) == b"shared kv" * 50
    assert s.read_payload(s.get("t", "turn", "live")) == b"live bytes" * 50
    f = s.fsck()
    assert f.orphans == [] and f.damaged == [] and f.lost == []
    view = sorted((r.ident, r.payload, r.state, r.text) for r in s.records())
    s.close()
    s = _open(tmp_path / "s", **kw)  # and the same after reopening
    assert sorted((r.ident, r.payload, r.state, r.text) for r in s.records()) == view
    # the same bytes written again after their file went are written again, not trusted by name
    s.put("t", "turn", "again", payload=b"deleted bytes" * 50)
    assert s.read_payload(s.get("t", "turn", "again")) == b"deleted bytes" * 50
    s.close()


def test_the_same_bytes_put_again_in_the_same_open_after_gc_are_rewritten(tmp_path):
    s = _open(tmp_path / "s")
    s.put("t", "turn", "a", payload=b"x" * 300)
    s.delete("t", "turn", "a")
    collect(s)
    s.put("t", "turn", "b", payload=b"x" * 300)  # same content address as the removed file
    assert s.read_payload(s.get("t", "turn", "b")) == b"x" * 300
    s.close()


def test_retention_window_and_forever(tmp_path):
    s = _open(tmp_path / "s")
    _fill(s)
    assert collect(s, retain_writes=None).stale == []  # forever: superseded payloads kept
    assert s.get("t", "fact", "old").payload is not None
    assert collect(s, retain_writes=10_000).stale == []  # not old enough
    assert len(collect(s, retain_writes=0).stale) == 2
    with pytest.raises(UserInputError):
        collect(s, retain_writes=-1)
    s.close()


def test_dry_run_changes_nothing(tmp_path):
    s = _open(tmp_path / "s")
    _fill(s)
    before = (sorted(map(str, s.records())), s.fsck().orphans, s.stats()["log_bytes"])
    rep = collect(s, retain_writes=0, dry_run=True)
    assert rep.dry_run and len(rep.stale) == 2 and len(rep.orphans) == 2 and rep.checkpoint_lsn == 0
    assert (sorted(map(str, s.records())), s.fsck().orphans, s.stats()["log_bytes"]) == before
    s.close()


def test_compaction_bounds_the_log_by_live_rows(tmp_path):
    s = _open(tmp_path / "s")
    for i in range(400):  # one row rewritten 400 times: history grows, live data does not
        s.put("t", "note", "counter", text=f"value {i} " * 20)
    grown = s.stats()["log_bytes"]
    rep = collect(s)
    assert rep.log_bytes_before == grown and rep.log_bytes_after < grown / 50
    assert s.stats()["log_segments"] == 1
    s.close()
    s = _open(tmp_path / "s")
    assert s.get("t", "note", "counter").text == "value 399 " * 20
    s.close()


def test_grm_gc_cli(tmp_path, grm):
    """`grm gc` run in this process (grm.cli.main, as tests/cli does where the process itself does
    not matter): each run opens the store and closes it again before the next."""
    s = _open(tmp_path / "s")
    _fill(s)
    s.close()
    code, stdout, stderr = grm("gc", "--store", str(tmp_path / "s"), "--retain-writes", "0", "--dry-run", "--json")
    assert code == 0, stderr
    assert json.loads(stdout)["dry_run"] is True and len(json.loads(stdout)["orphans"]) == 2
    code, stdout, stderr = grm("gc", "--store", str(tmp_path / "s"), "--retain-writes", "0", "--json")
    assert code == 0, stderr
    out = json.loads(stdout)
    assert len(out["stale"]) == 2 and len(out["orphans"]) == 2 and out["checkpoint_lsn"] > 0
    code, stdout, stderr = grm("gc", "--store", str(tmp_path / "s"), "--json")
    assert json.loads(stdout)["orphans"] == [] and json.loads(stdout)["bytes_freed"] == 0
    code, stdout, stderr = grm("gc", "--store", str(tmp_path / "nothing"))
    assert code == 2 and "no GRM store" in stderr
    code, stdout, stderr = grm("gc", "--store", str(tmp_path / "s"), "--retain-writes", "soon")
    assert code == 2 and "retain-writes" in stderr
