"""`grm serve` as a process: refusing unsafe flags, answering, draining on SIGTERM, restarting.

1. --no-auth on a non-loopback host, and no keys at all, exit 2 with one line (no model loaded).
2. --add-key prints a key once and stores only its SHA-256.
3. SIGTERM while a request is in flight: that request is answered in full (200), the process
   exits 0, and what it acknowledged is in the store: after a restart the same prompt loads
   from memory.
4. /metrics counts prompt tokens and hits in tokens, per tenant; and what the model read per
   request (tokens and forward calls, decoding apart): a chat served again from memory reads fewer.
"""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx2 as httpx

from grm.serve.server import free_port
from tests.serve.conftest import MODEL

ROOT = Path(__file__).resolve().parents[2]


def grm(*args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "grm", *args], capture_output=True, text=True, timeout=120,
                          cwd=ROOT, **kw)


def test_unsafe_or_keyless_serving_is_refused(tmp_path):
    r = grm("serve", "--no-auth", "--host", "0.0.0.0", "--store", str(tmp_path / "s"))
    assert r.returncode == 2 and "loopback" in r.stderr and "Traceback" not in r.stderr
    r = grm("serve", "--store", str(tmp_path / "s"))
    assert r.returncode == 2 and "--keys FILE" in r.stderr
    (tmp_path / "bad").write_text("alice not-a-hash\n")
    r = grm("serve", "--keys", str(tmp_path / "bad"), "--store", str(tmp_path / "s"), "--model", MODEL)
    assert r.returncode == 2 and "TENANT sha256:HEX64" in r.stderr


def test_add_key_prints_the_key_once_and_stores_its_hash(tmp_path):
    keys = tmp_path / "keys.txt"
    r = grm("serve", "--add-key", "carol", "--keys", str(keys))
    assert r.returncode == 0, r.stderr
    key = r.stdout.strip()
    text = keys.read_text()
    assert key not in text and f"carol sha256:{hashlib.sha256(key.encode()).hexdigest()}" in text
    assert oct(keys.stat().st_mode & 0o777) == "0o600"


def _spawn(tmp_path: Path, port: int) -> subprocess.Popen:
    env = {**os.environ, "OMP_NUM_THREADS": "2"}
    return subprocess.Popen([sys.executable, "-m", "grm", "serve", "--no-auth", "--port", str(port), "--model", MODEL,
                             "--store", str(tmp_path / "store"), "--threads", "2"], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _ready(url: str, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.stderr.read()
        try:
            if httpx.get(url + "/readyz", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise AssertionError("server not ready")


def test_sigterm_drains_in_flight_requests_and_keeps_what_it_acknowledged(tmp_path):
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    prompt = "The keeper's log for the winter of 1911, page one. " * 12
    proc = _spawn(tmp_path, port)
    try:
        _ready(url, proc)
        result: dict = {}

        def ask() -> None:
            body = {"model": MODEL, "prompt": prompt, "max_tokens": 400}
            result["r"] = httpx.post(url + "/v1/completions", json=body, timeout=120)

        t = threading.Thread(target=ask)
        t.start()
        time.sleep(0.5)  # the request is being answered
        proc.send_signal(signal.SIGTERM)
        t.join(120)
        assert proc.wait(60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    r = result["r"]
    assert r.status_code == 200, r.text
    assert r.json()["usage"]["completion_tokens"] > 0
    proc = _spawn(tmp_path, port)
    try:
        _ready(url, proc)
        again = httpx.post(url + "/v1/completions", json={"model": MODEL, "prompt": prompt, "max_tokens": 2},
                           timeout=60).json()
        assert again["usage"]["prompt_tokens_details"]["cached_tokens"] >= again["usage"]["prompt_tokens"] - 1
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)


def _sample(text: str, name: str) -> float:
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{name} not in metrics")


def test_metrics_count_queries_and_hits_in_tokens(fresh_server):
    srv = fresh_server()
    h = srv.headers("alice")
    body = {"model": MODEL, "prompt": "A prompt read twice for the metrics. " * 5, "max_tokens": 2}
    first = httpx.post(srv.url + "/v1/completions", json=body, headers=h).json()["usage"]
    second = httpx.post(srv.url + "/v1/completions", json=body, headers=h).json()["usage"]
    text = httpx.get(srv.url + "/metrics", headers=h).text
    queries = _sample(text, 'grm:prefix_cache_queries_total{tenant="alice"}')
    hits = _sample(text, 'grm:prefix_cache_hits_total{tenant="alice"}')
    assert queries == first["prompt_tokens"] + second["prompt_tokens"]
    assert hits == first["prompt_tokens_details"]["cached_tokens"] + second["prompt_tokens_details"]["cached_tokens"]
    assert _sample(text, 'grm:time_to_first_token_seconds_count{memory="on",tenant="alice"}') == 2
    assert _sample(text, 'grm:request_duration_seconds_count{memory="on",tenant="alice"}') == 2
    assert _sample(text, 'grm:store_bytes{tenant="alice",tier="exact"}') > 0
    assert _sample(text, 'grm:page_ins_total{plane="device",tenant="alice"}') >= 0
    assert _sample(text, "grm:queue_depth") == 0


def test_metrics_count_the_model_reads_of_each_request(fresh_server):
    """1. A chat completion reports what the model read for it (`grm.model_reads`): at least the
    prompt tokens it computed, in one forward call or more, and a decode step per generated token
    after the first at most. 2. The same chat again is served from memory: it reads fewer tokens.
    3. /metrics sums the requests' reads per tenant, and counts one histogram sample a request."""
    srv = fresh_server()
    h = srv.headers("alice")
    body = {"model": MODEL, "max_tokens": 4,
            "messages": [{"role": "user", "content": "Count the model reads of this message, please. " * 4}]}
    first, second = (httpx.post(srv.url + "/v1/chat/completions", json=body, headers=h).json() for _ in range(2))
    r1, r2 = first["grm"]["model_reads"], second["grm"]["model_reads"]
    assert first["grm"]["tokens_computed"] > 0
    assert r1["tokens"] >= first["grm"]["tokens_computed"] and r1["calls"] >= 1
    assert r1["decode_steps"] <= first["usage"]["completion_tokens"]
    assert second["grm"]["tokens_from_memory"] > first["grm"]["tokens_from_memory"]
    assert r2["tokens"] < r1["tokens"]
    text = httpx.get(srv.url + "/metrics", headers=h).text
    assert _sample(text, 'grm:model_tokens_read_total{tenant="alice"}') == r1["tokens"] + r2["tokens"]
    assert _sample(text, 'grm:model_forward_calls_total{tenant="alice"}') == r1["calls"] + r2["calls"]
    assert _sample(text, 'grm:model_decode_steps_total{tenant="alice"}') == r1["decode_steps"] + r2["decode_steps"]
    assert _sample(text, 'grm:model_tokens_read_per_request_count{tenant="alice"}') == 2
    assert _sample(text, 'grm:model_tokens_read_per_request_sum{tenant="alice"}') == r1["tokens"] + r2["tokens"]


def test_a_repeated_context_is_served_from_the_host_tier(fresh_server):
    """With a host budget, the third identical request mounts its stored blocks from RAM (the
    first stores them, the second reads them from the store and keeps them); /metrics shows the
    tier's hits and bytes for the caller's tenant only."""
    srv = fresh_server(runtime={"host_budget": 64 << 20})
    body = {"model": MODEL, "prompt": "A context read three times for the host tier. " * 20, "max_tokens": 2}
    answers = [httpx.post(srv.url + "/v1/completions", json=body, headers=srv.headers("alice")).json()
               for _ in range(3)]
    assert answers[1]["choices"][0]["text"] == answers[2]["choices"][0]["text"]
    text = httpx.get(srv.url + "/metrics", headers=srv.headers("alice")).text
    assert _sample(text, 'grm:host_tier_hits_total{tenant="alice"}') > 0
    assert _sample(text, 'grm:host_tier_bytes{tenant="alice"}') > 0
    assert _sample(text, 'grm:host_tier_bytes_served_total{tenant="alice"}') > 0
    assert _sample(text, 'grm:host_tier_evictions_total{tenant="alice"}') == 0
    theirs = httpx.get(srv.url + "/metrics", headers=srv.headers("bob")).text
    assert 'tenant="alice"' not in theirs


def test_while_the_model_loads_health_answers_and_the_rest_is_503(tmp_path):
    """grm serve listens before its model is loaded: /healthz 200, /readyz 503, requests 503 +
    Retry-After (the app with the engine's stand-in, run by uvicorn as `serve` runs it)."""
    from grm.serve.app import Starting, create_app
    from grm.serve.config import ServeConfig
    from grm.serve.metrics import Metrics
    from grm.serve.server import _uvicorn

    config = ServeConfig(no_auth=True)
    port = free_port()
    server = _uvicorn(create_app(Starting(), config, None, Metrics()), config, port)
    server.install_signal_handlers = lambda: None
    t = threading.Thread(target=server.run, daemon=True)
    t.start()
    try:
        deadline = time.monotonic() + 30
        while not server.started and time.monotonic() < deadline:
            time.sleep(0.05)
        url = f"http://127.0.0.1:{port}"
        assert httpx.get(url + "/healthz").status_code == 200
        assert httpx.get(url + "/readyz").status_code == 503
        r = httpx.post(url + "/v1/completions", json={"model": MODEL, "prompt": "hi"})
        assert r.status_code == 503 and r.json()["error"]["code"] == "loading" and r.headers["retry-after"] == "5"
        assert httpx.get(url + "/v1/models").status_code == 503
    finally:
        server.should_exit = True
        t.join(30)


def test_a_model_that_cannot_load_ends_serve_with_one_line(tmp_path):
    r = grm("serve", "--no-auth", "--port", str(free_port()), "--model", "no-such-model",
            "--store", str(tmp_path / "s"))
    assert r.returncode == 2 and "no-such-model" in r.stderr and "Traceback" not in r.stderr


def test_a_served_tenants_routing_state_is_built_before_the_server_is_ready(tmp_path):
    """A server builds each served tenant's fact and graft indexes as it starts (Engine.start), so
    the first question does not pay for reading every fact; a request then reads only the rows
    written since (no second listing)."""
    from grm.runtime import Runtime
    from tests.serve.conftest import start

    cache = Path(os.environ.get("GRM_CACHE", Path.home() / ".cache" / "grm"))
    with Runtime.open(store=tmp_path / "store", cache_dir=cache, model=MODEL, tenant="alice", threads=2) as rt:
        rt.chat().send("remember permanently: my locker code is 4471")
    bg, srv = start(tmp_path)
    try:
        alice = srv.engine.view("alice")
        facts, grafts = alice.policy_glue().policy.index, alice.ctx.grafts.index()
        listed = facts.full_reads
        assert listed > 0 and grafts.full_reads == 1  # built before any request came
        assert [f.value for f in facts.live.values()] == ["4471"]
        body = {"model": MODEL, "max_tokens": 2, "messages": [{"role": "user", "content": "What is my locker code?"}]}
        assert httpx.post(srv.url + "/v1/chat/completions", json=body, headers=srv.headers("alice")).status_code == 200
        assert (facts.full_reads, grafts.full_reads) == (listed, 1)
    finally:
        bg.stop()


def test_a_server_warms_its_model_up_before_it_is_ready(tmp_path, caplog):
    """Engine.start reads through the model before /readyz says ready (Runtime.warm_up: the
    sinks, then a question-shaped read and a decoding-shaped one, discarded), so a new server's
    first request does not page in the weights. The discarded reads are no request's reads."""
    import logging

    from grm.runtime import Runtime
    from grm.runtime.runtime import WARM_UP_TOKENS
    from tests.serve.conftest import start

    cache = Path(os.environ.get("GRM_CACHE", Path.home() / ".cache" / "grm"))
    with Runtime.open(store=tmp_path / "store", cache_dir=cache, model=MODEL, threads=2) as rt:
        rt.exact.sinks()  # stored: a later warm-up loads them instead of reading them
    with Runtime.open(store=tmp_path / "store", cache_dir=cache, model=MODEL, threads=2) as rt:
        calls: list[int] = []
        hook = rt.lm.model.register_forward_pre_hook(
            lambda _m, _a, kw: calls.append(int(kw["input_ids"].shape[1])), with_kwargs=True)
        before = rt.reads.snapshot()
        assert rt.warm_up() > 0
        hook.remove()
        assert calls == [WARM_UP_TOKENS, 1] and rt.reads.snapshot() == before
    with caplog.at_level(logging.INFO, logger="grm"):
        bg, srv = start(tmp_path)
    try:
        assert any(r.getMessage().startswith("model warmed up in") for r in caplog.records)
        assert httpx.get(srv.url + "/readyz").json()["status"] == "ready"
    finally:
        bg.stop()
