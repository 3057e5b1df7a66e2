"""One memory, several processes (issue 17 item 5): `--store redis://HOST:PORT/NAMESPACE` through
the CLI and `Runtime.open`, against a real redis-server on a loopback port.

1. A document ingested by one process (the CLI) is answered from stored K/V by another process
   (the runtime API): tokens come from memory, and the answer equals the answer computed
   without memory (the exact tier is bit-identical).
2. A fact written by one process is routed (mounted in `grafts` mode) by another.
3. The writer-per-tenant lease holds across processes: a second writer of the tenant is refused
   while the first holds it, and writes once it is released; other tenants are not blocked.
4. redis-server (appendonly yes, appendfsync always) SIGKILLed and restarted mid-run while a
   writer process writes: every write it acknowledged is there, payload verified (plain and
   encrypted namespaces).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from grm.errors import StoreError
from grm.store.opener import open_backend
from tests.cli.conftest import _restore_torch_threads, grm  # noqa: F401  (`grm` in-process)
from tests.conftest import ROOT, free_port, lorem, start_redis

redis = pytest.importorskip("redis", reason="the redis package is not installed (pip install redis==8.1.0)")


def _namespace(redis_url: str) -> str:
    """A fresh namespace on the session's server: tests never see each other's rows."""
    return redis_url.rsplit("/", 1)[0] + f"/t{uuid.uuid4().hex[:10]}"


def _env() -> dict:
    return {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}


def _worker(*args: str, timeout: float = 240) -> dict:
    done = subprocess.run([sys.executable, "-m", "tests.scale.worker", *args], cwd=ROOT, env=_env(),
                          capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _grm(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "grm", *args], cwd=ROOT, env=_env(), capture_output=True,
                          text=True, timeout=240)


def test_a_document_ingested_by_one_process_is_answered_from_stored_kv_by_another(redis_url, tmp_path, grm):
    """The ingest is a `grm` child of its own (one thread, as the worker's cold reading); `grm stats`
    reads the namespace from this process (grm.cli.main)."""
    url = _namespace(redis_url)
    doc = tmp_path / "harbor.txt"
    doc.write_text(lorem(6, seed=3))
    ingest = _grm("ingest", str(doc), "--store", url, "--model", "tiny-random-llama", "--layout", "chain",
                  "--block-tokens", "32", "--json")
    assert ingest.returncode == 0, ingest.stderr[-2000:]
    assert json.loads(ingest.stdout)["blocks"] >= 3
    code, stdout, stderr = grm("stats", "--store", url, "--json")
    assert code == 0, stderr
    st = json.loads(stdout)
    assert st["backend"] == "redis" and st["kinds"]["block"]["active"] >= 3 and st["records"] >= 4
    got = _worker("ask", url, doc.read_text() + "\nThe harbor")
    assert got["from_memory"] > 3 * 32 and got["computed"] < got["cold_computed"]
    assert got["warm"] == got["cold"]  # stored K/V served bit-identically
    with open_backend(url) as s:  # and the rows are in Redis, not in a local folder
        assert s.stats()["backend"] == "redis" and any(True for _ in s.records("default", "block"))


def test_a_fact_written_by_one_process_is_routed_by_another(redis_url, grm):
    """Written by one worker, routed by another, listed by `grm memory list` in this process."""
    url = _namespace(redis_url)
    wrote = _worker("remember", url, "remember permanently: my locker code is 1234")
    assert wrote["changed"] and any("1234" in s for s in wrote["statements"])
    graft = wrote["grafts"][0]
    assert graft
    routed = _worker("route", url, "What is my locker code?")
    assert graft in routed["mounted"]
    code, stdout, stderr = grm("memory", "list", "--store", url, "--json")
    assert code == 0, stderr
    assert any("1234" in f["statement"] for f in json.loads(stdout)["facts"])


def test_the_writer_lease_holds_across_processes(redis_url):
    url = _namespace(redis_url)
    holder = subprocess.Popen([sys.executable, "-m", "tests.scale.worker", "hold", url, "alice"], cwd=ROOT,
                              env=_env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert json.loads(holder.stdout.readline()) == {"held": "alice"}
        with open_backend(url) as s:
            assert s.get("alice", "note", "held") is not None  # readers are never blocked
            with pytest.raises(StoreError, match="being written by another GRM process"):
                s.put("alice", "note", "mine", text="refused")
            s.put("bob", "note", "mine", text="another tenant is not blocked")
        holder.stdin.write("\n")
        holder.stdin.flush()
        assert holder.wait(30) == 0
    finally:
        if holder.poll() is None:
            holder.kill()
    with open_backend(url) as s:  # released on close: the next writer gets it at once
        assert s.put("alice", "note", "mine", text="now mine").text == "now mine"


def test_a_master_key_with_redis_encrypts_and_is_not_ignored(redis_url, grm):
    url = _namespace(redis_url)
    with open_backend(url, master_key=b"k" * 32) as s:  # tests/store/test_redis_encryption.py
        assert s.stats()["encrypted"] is True
    with pytest.raises(StoreError, match="is encrypted: give its master key"):
        open_backend(url)
    code, stdout, _err = grm("stats", "--store", _namespace(redis_url), "--json")  # (in this process)
    assert code == 0 and json.loads(stdout)["records"] == 0  # an empty namespace reads empty
    code, _out, stderr = grm("fsck", "--salvage", "--store", _namespace(redis_url))
    assert code == 2 and "local store folder" in stderr


# ------------------------------------------------------------------------ server killed mid-run


@pytest.mark.skipif(shutil.which("redis-server") is None, reason="redis-server is not installed")
@pytest.mark.parametrize("master_key", [None, bytes(range(32))], ids=["plain", "encrypted"])
def test_redis_killed_and_restarted_mid_run_loses_nothing_acknowledged(tmp_path, master_key):
    port = free_port()
    server = start_redis(port, tmp_path, appendonly="yes", appendfsync="always")
    url = f"redis://127.0.0.1:{port}/kill"
    env = {k: v for k, v in _env().items() if k != "GRM_MASTER_KEY"}
    if master_key is not None:
        env["GRM_MASTER_KEY"] = master_key.hex()
    writer = subprocess.Popen([sys.executable, "-m", "tests.scale.worker", "writer", url, "6"], cwd=ROOT,
                              env=env, stdout=subprocess.PIPE, text=True)
    acked: list[str] = []
    try:
        while len(acked) < 30:  # the writer is running: kill the server under it
            line = writer.stdout.readline()
            assert line, "writer ended early"
            acked.append(json.loads(line)["ack"])
        server.send_signal(signal.SIGKILL)
        server.wait(10)
        time.sleep(0.3)
        server = start_redis(port, tmp_path, appendonly="yes", appendfsync="always")
        for line in writer.stdout:
            obj = json.loads(line)
            if "ack" in obj:
                acked.append(obj["ack"])
            else:
                summary = obj
        assert writer.wait(60) == 0
        assert summary["done"] == len(acked) and summary["done"] > 30
        assert summary["failures"] >= 1  # the server really went away under the writer
        with open_backend(url, master_key=master_key) as s:
            assert s.stats()["encrypted"] == (master_key is not None)
            for key in acked:
                rec = s.get("default", "note", key)
                assert rec is not None, f"acknowledged {key} lost"
                assert s.read_payload(rec) == f"payload {key} ".encode() * 8
    finally:
        if writer.poll() is None:
            writer.kill()
        server.kill()
        server.wait(10)
