"""One writer, any number of readers (issue 14, bugs 2, 3 and 8).

1. Two processes creating the same new store at once (plain and encrypted mixed): the lock is
   taken before the marker is written, so every acknowledged put reads back afterwards.
2. Removing LOCK does not let a second writer in (the lock is on the root folder); a writer whose
   log was appended to by someone else refuses to write instead of colliding LSNs.
3. A read-only open works beside a live writer (stats, fsck, search, payloads; writes refused),
   keeps working while the writer checkpoints, changes no file, and works on read-only media.
"""

from __future__ import annotations

import multiprocessing
import os
import stat
import threading
import time
from pathlib import Path

import pytest

from grm.errors import StoreError
from grm.store import Store, StoreConfig
from grm.store.log import HEADER_SIZE, encode_body, encode_frame, read_header

KEY = bytes(range(32))


def _create_and_put(root: str, key: bytes | None, who: int, start: float, out) -> None:
    time.sleep(max(0.0, start - time.time()))
    try:
        with Store.open(StoreConfig(root, master_key=key, lock_timeout=5.0)) as s:
            s.put("t", "block", f"w{who}", payload=f"payload of writer {who}".encode() * 8)
        out.put((who, "ok"))
    except StoreError as e:  # refused (e.g. the other one made it encrypted): not acknowledged
        out.put((who, f"refused: {e}"))


@pytest.mark.parametrize("keys", [(KEY, KEY), (None, KEY), (KEY, None)], ids=["enc+enc", "plain+enc", "enc+plain"])
def test_racing_creators_never_lose_an_acknowledged_put(tmp_path: Path, keys) -> None:
    ctx = multiprocessing.get_context("fork")
    for run in range(6):  # x 3 mixes = 18 races
        root = str(tmp_path / f"s{run}")
        out = ctx.Queue()
        start = time.time() + 0.2
        procs = [ctx.Process(target=_create_and_put, args=(root, keys[i], i, start, out)) for i in range(2)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(30)
        results = dict(out.get(timeout=5) for _ in procs)
        acked = [who for who, r in results.items() if r == "ok"]
        assert acked, results
        for who in acked:
            with Store.open(StoreConfig(root, master_key=keys[who], read_only=True)) as s:
                rec = s.get("t", "block", f"w{who}")
                assert rec is not None, (run, results)
                assert s.read_payload(rec) == f"payload of writer {who}".encode() * 8, (run, results)


def test_removing_lock_does_not_let_a_second_writer_in(root: Path) -> None:
    with Store.open(StoreConfig(root)) as a:
        a.put("t", "k", "a1")
        (root / "LOCK").unlink()
        with pytest.raises(StoreError, match="in use"):
            Store.open(StoreConfig(root))
        for i in range(3):
            a.put("t", "k", f"a{i + 2}")
    with Store.open(StoreConfig(root)) as s:
        assert sorted(r.key for r in s.records()) == ["a1", "a2", "a3", "a4"]
        assert s.last_lsn == 8


def test_writer_refuses_when_someone_else_appended_to_its_log(root: Path) -> None:
    with Store.open(StoreConfig(root)) as a:
        a.put("t", "k", "mine")
        seg = sorted((root / "log").glob("*.seg"))[-1]
        data = seg.read_bytes()
        salt = read_header(str(seg), data).salt
        intruder = encode_frame(salt, a.last_lsn + 1, encode_body({"op": "commit", "txn": a.last_lsn + 1,
                                                                   "count": 0, "dur": 0}))
        with open(seg, "ab") as f:
            f.write(intruder)
        with pytest.raises(StoreError, match="another process"):
            a.put("t", "k", "after")
        assert seg.read_bytes() == data + intruder  # nothing of ours landed on top of it
        with pytest.raises(StoreError):
            a.put("t", "k", "later")  # poisoned until reopened
    assert HEADER_SIZE < len(data)


def test_read_only_open_beside_a_live_writer(root: Path) -> None:
    with Store.open(StoreConfig(root)) as w:
        rec = w.put("t", "doc", "d", payload=b"bytes" * 10, text="harbor seal winter")
        before = {p: p.stat().st_mtime_ns for p in root.rglob("*") if p.is_file()}
        with Store.open(StoreConfig(root, read_only=True)) as r:
            assert r.read_payload(r.get("t", "doc", "d")) == b"bytes" * 10
            assert [x.key for x, _ in r.search_text("t", "harbor")] == ["d"]
            assert r.stats()["records"] == 1 and r.fsck().damaged == []
            with pytest.raises(StoreError, match="read-only"):
                r.put("t", "doc", "e")
            with pytest.raises(StoreError, match="read-only"):
                r.fsck(repair=True)
        w.put("t", "doc", "e", text="later")  # the writer is undisturbed
        after = {p: p.stat().st_mtime_ns for p in root.rglob("*") if p.is_file()}
        assert set(after) == set(before) and all(after[p] == before[p] for p in before if "log" not in p.parts
                                                 and not p.name.startswith("catalog"))
        assert rec.lsn == 1


def test_readers_see_a_committed_prefix_while_the_writer_checkpoints(root: Path) -> None:
    stop = threading.Event()
    w = Store.open(StoreConfig(root, checkpoint_every=6, durability="volatile"))

    def write() -> None:
        i = 0
        while not stop.is_set():
            with w.transaction() as txn:  # each transaction puts two rows: a reader sees both or neither
                txn.put("t", "a", f"k{i}", text=f"row {i}")
                txn.put("t", "b", f"k{i}", text=f"row {i}")
            i += 1
            time.sleep(0.002)  # paced: an unpaced writer grows the log each reader replays without bound

    thread = threading.Thread(target=write)
    thread.start()
    try:
        seen = []
        for _ in range(30):
            with Store.open(StoreConfig(root, read_only=True)) as r:
                a, b = {x.key for x in r.records("t", "a")}, {x.key for x in r.records("t", "b")}
                assert a == b
                seen.append(len(a))
    finally:
        stop.set()
        thread.join()
        w.close()
    assert seen == sorted(seen) and seen[-1] > 0


def test_read_only_open_on_read_only_media(root: Path) -> None:
    with Store.open(StoreConfig(root, master_key=KEY)) as w:
        w.put("t", "doc", "d", payload=b"on a CD-ROM", text="ro")
    mode = {}
    for p in [root, *root.rglob("*")]:
        mode[p] = p.stat().st_mode
        os.chmod(p, mode[p] & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
    try:
        with Store.open(StoreConfig(root, master_key=KEY, read_only=True)) as r:
            assert r.read_payload(r.get("t", "doc", "d")) == b"on a CD-ROM"
            assert r.fsck().damaged == []
    finally:
        for p, m in mode.items():
            os.chmod(p, m)


def test_read_only_open_never_creates_a_store(root: Path) -> None:
    with pytest.raises(StoreError, match="not a GRM store"):
        Store.open(StoreConfig(root, read_only=True))
    assert not root.exists()


def test_grm_stats_and_fsck_work_while_another_process_writes(root: Path) -> None:
    import subprocess
    import sys

    from grm.cli import main

    with Store.open(StoreConfig(root)) as s:
        s.put("default", "doc", "d", payload=b"x" * 10, text="hello")
    code = ("import sys, time\nfrom grm.store import Store, StoreConfig\n"
            f"s = Store.open(StoreConfig({str(root)!r}))\ns.put('default', 'doc', 'e', text='live')\n"
            "print('holding', flush=True)\nsys.stdin.readline()\ns.close()\n")
    child = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                             cwd=Path(__file__).resolve().parents[2])
    try:
        assert child.stdout.readline().strip() == "holding"
        assert main(["stats", "--store", str(root), "--json"]) == 0
        assert main(["fsck", "--store", str(root), "--json"]) == 0
        with Store.open(StoreConfig(root, read_only=True)) as r:
            assert {x.key for x in r.records("default")} == {"d", "e"}  # what the writer committed
        with pytest.raises(StoreError, match="in use"):
            Store.open(StoreConfig(root))  # a second writer is still refused
    finally:
        child.communicate("\n", timeout=30)
