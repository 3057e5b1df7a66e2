"""`grm ask` and `grm ingest` through a `grm serve` running on the same store (grm/cli/remote.py,
grm/serve/endpoint.py).

1. Ingest and ask sent to a running server give the same report, the same records and the same
   answer (same JSON shape) as the local path on a store of their own; stderr says which server
   answered.
2. A stale endpoint file (dead pid; live pid but nothing listening) is ignored and removed: the
   command runs locally.
3. A flag the server cannot honour (another --model, another --grafts) fails with one line naming
   the server; nothing is answered differently.
4. A real `grm serve` process writes its endpoint file 0600 once ready, a `grm ask` process is
   served by it, another command's lock error names it, and SIGTERM removes the file.
5. While the server loads its model (its file says `loading`), `grm ask` says it waits and is
   served once the file is whole, instead of failing on the store's lock; a loading file nothing
   listens behind is stale: removed, the command runs here.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from grm.cli.terminal import printable
from grm.serve import endpoint
from tests.cli.conftest import TINY, one_error_line, subprocess_grm
from tests.conftest import ROOT

DOC = ("The lighthouse keeper Ada Brandt kept a log of every ship that passed the point. " * 6
       + "\n\nThe ferry to Sandvik leaves at nine in the morning and returns at six.\n")
QUESTION = "When does the ferry to Sandvik leave?"


def served_by(err: str, port: int) -> bool:
    return f"grm: served by the running grm serve at 127.0.0.1:{port} (pid {os.getpid()})" in err


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """A server publishing its endpoint file on its own store, in this process."""
    from grm.runtime.config import RuntimeConfig
    from grm.serve.config import ServeConfig
    from grm.serve.server import Background

    tmp = tmp_path_factory.mktemp("resident")
    rc = RuntimeConfig.from_options(store=tmp / "store", model=TINY, threads=2)
    bg = Background(rc, ServeConfig(port=0, no_auth=True), publish=True).__enter__()
    yield bg, tmp / "store"
    bg.stop()


def records(store: Path) -> list[tuple[str, str, str]]:
    from grm.store import Store, StoreConfig

    with Store.open(StoreConfig(root=store, read_only=True)) as st:
        return sorted((r.kind, r.key, r.state) for r in st.records("default"))


def test_ingest_and_ask_through_the_server_match_the_local_path(grm, server, tmp_path):
    bg, remote_store = server
    doc = tmp_path / "ferry.txt"
    doc.write_text(DOC)
    local_store = tmp_path / "local"
    outs = {}
    for where, store in (("local", local_store), ("remote", remote_store)):
        code, out, err = grm("ingest", doc, "--store", store, "--model", TINY, "--json")
        assert code == 0, err
        assert served_by(err, bg.port) == (where == "remote"), err
        code, ans, err = grm("ask", QUESTION, "--store", store, "--model", TINY, "--json", "--max-new-tokens", 8)
        assert code == 0, err
        assert served_by(err, bg.port) == (where == "remote"), err
        outs[where] = json.loads(out), json.loads(ans)
    (ingest_l, ask_l), (ingest_r, ask_r) = outs["local"], outs["remote"]
    # a local ingest reports the store folder's growth, measured closed; the server, which holds the
    # store open, the payload bytes its rows name: the files' bytes, less the log and catalog
    sizes = {"stored_bytes", "bytes_per_token"}
    assert {k: v for k, v in ingest_r.items() if k not in sizes} == {k: v for k, v in ingest_l.items() if k not in sizes}
    assert 0 < ingest_r["stored_bytes"] <= ingest_l["stored_bytes"] < 2 * ingest_r["stored_bytes"]
    assert ingest_l["computed"] > 0
    assert ask_r.keys() == ask_l.keys()
    timing = {"ttft_s", "total_s"}
    assert {k: v for k, v in ask_r.items() if k not in timing} == {k: v for k, v in ask_l.items() if k not in timing}
    assert ask_l["mode"] == "exact-section" and ask_l["tokens_from_memory"] > 0
    # plain output goes through the server too
    code, out, err = grm("ask", QUESTION, "--store", remote_store, "--model", TINY, "--max-new-tokens", 8)
    assert code == 0 and out.strip() == printable(ask_l["answer"]) and served_by(err, bg.port)
    # the records written through the server are the ones the local path wrote
    assert records(remote_store) == records(local_store)


def test_a_flag_the_server_cannot_honour_fails_naming_it(grm, server):
    bg, store = server
    where = f"the running grm serve at 127.0.0.1:{bg.port} (pid {os.getpid()})"
    code, _, err = grm("ask", QUESTION, "--store", store, "--model", "tiny-random-gemma3")
    line = one_error_line(err)
    assert code == 2 and where in line and "--model tiny-random-gemma3" in line and "served by" not in err
    code, _, err = grm("ask", QUESTION, "--store", store, "--model", TINY, "--grafts", 5)
    line = one_error_line(err)
    assert code == 2 and where in line and "--grafts 5" in line and "--grafts 3" in line
    code, _, err = grm("ingest", __file__, "--store", store, "--model", TINY, "--block-tokens", 64)
    assert code == 2 and where in one_error_line(err) and "--block-tokens 64" in err
    code, _, err = grm("ask", QUESTION, "--store", store, "--model", TINY, "--system", "model")
    line = one_error_line(err)
    assert code == 2 and where in line and "--system model" in line and "--system memory" in line


def test_a_command_waits_for_a_server_still_loading_its_model(grm, server, tmp_path):
    import threading

    bg, store = server
    whole = endpoint.read(store)
    loading = {k: whole[k] for k in ("pid", "host", "port", "tenant", "sealed", "token")}
    endpoint.publish(store, {**loading, "loading": True})
    done = threading.Timer(1.5, lambda: endpoint.publish(store, {k: v for k, v in whole.items()
                                                                 if k not in ("format", "version")}))
    done.start()
    try:
        code, out, err = grm("ask", QUESTION, "--store", store, "--model", TINY, "--max-new-tokens", 4)
    finally:
        done.join()
    assert code == 0 and out.strip() and served_by(err, bg.port), err
    assert f"waiting for the running grm serve at 127.0.0.1:{bg.port} (pid {os.getpid()}) to load its model" in err
    from grm.serve.server import free_port

    other = tmp_path / "other"
    path = _stale(other, os.getpid(), free_port(), loading=True)  # nothing listens behind it
    code, _, err = grm("ask", QUESTION, "--store", other, "--model", TINY, "--max-new-tokens", 4)
    assert "waiting" not in err and "served by" not in err and not path.exists()


def _stale(store: Path, pid: int, port: int, loading: bool = False) -> Path:
    store.mkdir(parents=True, exist_ok=True)
    whole = {"model": TINY, "model_name": TINY, "default_model": False, "dtype": "float32", "device": "cpu",
             "settings": {}}
    endpoint.publish(store, {"pid": pid, "host": "127.0.0.1", "port": port, "tenant": "default", "sealed": False,
                             "token": endpoint.new_token(), **({"loading": True} if loading else whole)})
    return endpoint.path_for(store)


def test_a_stale_endpoint_file_is_ignored_and_removed(grm, tmp_path):
    from grm.serve.server import free_port

    doc = tmp_path / "ferry.txt"
    doc.write_text(DOC)
    store = tmp_path / "store"
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    path = _stale(store, int(dead.stdout), free_port())  # a pid that has exited
    code, out, err = grm("ingest", doc, "--store", store, "--model", TINY, "--json")
    assert code == 0 and json.loads(out)["documents"] == 1 and "served by" not in err, err
    assert not path.exists()
    path = _stale(store, os.getpid(), free_port())  # a live pid, but nothing listens on the port
    code, out, err = grm("ask", QUESTION, "--store", store, "--model", TINY, "--json", "--max-new-tokens", 4)
    assert code == 0 and json.loads(out)["answer"] is not None and "served by" not in err, err
    assert not path.exists()


def test_a_file_others_may_read_is_not_trusted(grm, tmp_path):
    store = tmp_path / "store"
    path = _stale(store, os.getpid(), 1)
    path.chmod(0o644)
    code, _, err = grm("ask", QUESTION, "--store", store, "--model", TINY)
    assert "ignoring" in err and "not private" in err and path.exists()


def test_grm_serve_publishes_a_private_endpoint_and_removes_it_on_sigterm(tmp_path):
    from grm.serve.server import free_port

    store, port = tmp_path / "store", free_port()
    doc = tmp_path / "ferry.txt"
    doc.write_text(DOC)
    env = {**os.environ, "OMP_NUM_THREADS": "2"}
    proc = subprocess.Popen([sys.executable, "-m", "grm", "serve", "--no-auth", "--port", str(port), "--model", TINY,
                             "--store", str(store), "--threads", "2"], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    path = endpoint.path_for(store)
    try:
        deadline = time.monotonic() + 120
        while not path.exists() or json.loads(path.read_text()).get("loading"):  # published loading, then whole
            assert proc.poll() is None, proc.stderr.read()
            assert time.monotonic() < deadline, "no endpoint file"
            time.sleep(0.1)
        assert path.stat().st_mode & 0o777 == 0o600
        info = json.loads(path.read_text())
        assert (info["pid"], info["port"], info["model_name"]) == (proc.pid, port, TINY)
        r = subprocess_grm("ingest", str(doc), "--store", str(store), "--model", TINY, "--json", timeout=120,
                           text=True)
        assert r.returncode == 0 and json.loads(r.stdout)["documents"] == 1, r.stderr
        assert f"served by the running grm serve at 127.0.0.1:{port} (pid {proc.pid})" in r.stderr
        r = subprocess_grm("chat", "--store", str(store), "--model", TINY, timeout=120, text=True, input="")
        line = one_error_line(r.stderr)
        assert r.returncode == 2 and f"in use by grm serve (pid {proc.pid}) at 127.0.0.1:{port}" in line
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(60)
    assert code == 0 and not path.exists()


def test_an_encrypted_store_needs_its_master_key_not_just_the_token(grm, tmp_path):
    """The endpoint file's token alone is no credential for an encrypted store: the CLI must hold
    the master key (it sends HMAC(key, token)); a wrong key is refused by the server."""
    from grm.runtime.config import RuntimeConfig
    from grm.serve.config import ServeConfig
    from grm.serve.server import Background

    key = bytes(range(32))
    (tmp_path / "key").write_text(key.hex())
    (tmp_path / "wrong").write_text(bytes(32).hex())
    store = tmp_path / "store"
    rc = RuntimeConfig.from_options(store=store, model=TINY, threads=2, master_key=key)
    with Background(rc, ServeConfig(port=0, no_auth=True), publish=True) as bg:
        assert endpoint.read(store)["sealed"] is True
        code, _, err = grm("ask", QUESTION, "--store", store, "--model", TINY, "--mode", "exact")
        assert code == 2 and "encrypted" in one_error_line(err) and f"127.0.0.1:{bg.port}" in err
        code, _, err = grm("ask", QUESTION, "--store", store, "--model", TINY, "--mode", "exact",
                           "--key-file", tmp_path / "wrong")
        assert code == 2 and "refused" in one_error_line(err)
        code, out, err = grm("ask", QUESTION, "--store", store, "--model", TINY, "--mode", "exact",
                             "--key-file", tmp_path / "key", "--json", "--max-new-tokens", 4)
        assert code == 0 and served_by(err, bg.port) and json.loads(out)["mode"] == "exact", err
