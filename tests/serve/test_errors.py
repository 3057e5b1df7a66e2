"""Error shapes over raw HTTP, and the server under load: a full queue, a timeout, a client that
goes away, SIGTERM.

Every error body is {"error": {"message", "type", "code", "param"}} (the OpenAI shape):
1. malformed JSON 400; unknown model 404 model_not_found; too long 400 context_length_exceeded;
   body over the limit 413; temperature != 0 400; no or a wrong key 401; unknown path 404.
2. A full queue answers 429 with Retry-After; a request past the timeout 504.
3. A streaming client that disconnects stops its generation long before max_tokens.
"""

from __future__ import annotations

import json
import threading
import time

import httpx2 as httpx
import pytest

from tests.serve.conftest import MODEL


def post(srv, path, body, tenant="alice", **kw):
    data = body if isinstance(body, (bytes, str)) else json.dumps(body)
    return httpx.post(srv.url + path, content=data, headers={**srv.headers(tenant), "Content-Type": "application/json"},
                      timeout=60, **kw)


def assert_error(r, status, code=None, type_=None):
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert set(err) >= {"message", "type", "code"} and err["message"]
    if code is not None:
        assert err["code"] == code
    if type_ is not None:
        assert err["type"] == type_


def test_malformed_json_is_400(server):
    assert_error(post(server, "/v1/chat/completions", b'{"model": "x", "messages": [}'), 400, "invalid_json")


def test_unknown_model_is_404(server):
    r = post(server, "/v1/chat/completions", {"model": "gpt-7", "messages": [{"role": "user", "content": "hi"}]})
    assert_error(r, 404, "model_not_found")


def test_prompt_over_the_window_is_context_length_exceeded(server):
    window = server.engine.max_positions
    r = post(server, "/v1/completions", {"model": MODEL, "prompt": "a" * (window + 10), "max_tokens": 4})
    assert_error(r, 400, "context_length_exceeded")


def test_streamed_request_that_cannot_start_gets_a_status_not_an_event(server):
    window = server.engine.max_positions
    body = {"model": MODEL, "prompt": "a" * (window + 10), "max_tokens": 4, "stream": True}
    assert_error(post(server, "/v1/completions", body), 400, "context_length_exceeded")


def test_body_over_the_limit_is_413(server):
    from grm.serve.config import ServeConfig

    limit = ServeConfig(no_auth=True).max_body_bytes
    r = post(server, "/v1/completions", {"model": MODEL, "prompt": "x" * (limit + 1)})
    assert_error(r, 413, "request_too_large")

    def chunks():  # no Content-Length: the limit holds as the body arrives
        for _ in range(limit // 65536 + 2):
            yield b"x" * 65536

    r = httpx.post(server.url + "/v1/completions", content=chunks(), headers=server.headers(), timeout=60)
    assert_error(r, 413, "request_too_large")


def test_sampling_temperature_is_refused(server):
    r = post(server, "/v1/chat/completions",
             {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "temperature": 0.7})
    assert_error(r, 400, "unsupported_value")
    assert r.json()["error"]["param"] == "temperature"


@pytest.mark.parametrize("path", ["/v1/models", "/v1/memories", "/v1/review", "/v1/documents", "/metrics"])
def test_no_key_or_a_wrong_key_is_401(server, path):
    assert_error(httpx.get(server.url + path), 401, "invalid_api_key", "authentication_error")
    r = httpx.get(server.url + path, headers={"Authorization": "Bearer grm-not-a-key"})
    assert_error(r, 401, "invalid_api_key")


def test_wrong_method_is_405_in_the_error_shape(server):
    assert_error(httpx.get(server.url + "/v1/chat/completions", headers=server.headers()), 405)


def test_health_needs_no_key_and_unknown_paths_are_404(server):
    assert httpx.get(server.url + "/healthz").json() == {"status": "ok"}
    assert httpx.get(server.url + "/readyz").json()["status"] == "ready"
    assert_error(httpx.get(server.url + "/v1/nothing", headers=server.headers()), 404, "unknown_url")


def _occupy(srv, n_waiting: int):
    """Hold the model worker with a job that waits for the returned event, and queue n more."""
    gate = threading.Event()
    started = threading.Event()
    srv.engine.run("alice", "hold", lambda m: (started.set(), gate.wait(30)))
    assert started.wait(10)
    for _ in range(n_waiting):
        srv.engine.run("alice", "hold", lambda m: None)
    return gate


def test_full_queue_is_429_with_retry_after(fresh_server):
    srv = fresh_server(queue=1)
    gate = _occupy(srv, 1)  # one running, one waiting: the queue is full
    try:
        r = post(srv, "/v1/completions", {"model": MODEL, "prompt": "hello", "max_tokens": 2})
        assert_error(r, 429, "queue_full", "rate_limit_error")
        assert int(r.headers["retry-after"]) >= 1
    finally:
        gate.set()
    r = post(srv, "/v1/completions", {"model": MODEL, "prompt": "hello", "max_tokens": 2})
    assert r.status_code == 200


def test_request_past_the_timeout_is_504(fresh_server):
    srv = fresh_server(timeout_s=0.5)
    gate = _occupy(srv, 0)
    try:
        for stream in (False, True):
            r = post(srv, "/v1/completions", {"model": MODEL, "prompt": "hello", "max_tokens": 2, "stream": stream})
            assert_error(r, 504, "request_timeout")
    finally:
        gate.set()


def test_client_disconnect_cancels_generation(server):
    body = {"model": MODEL, "prompt": "Disconnect me please.", "max_tokens": 4000, "stream": True}
    with httpx.stream("POST", server.url + "/v1/completions", json=body, headers=server.headers("bob"),
                      timeout=60) as r:
        assert r.status_code == 200
        lines = r.iter_lines()
        assert next(lines).startswith("data: ")
    # the connection is closed: the worker stops at its next token and records the request
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        trace = [t for t in server.engine.trace("bob") if "Disconnect me" in t["user"]]
        if trace:
            break
        time.sleep(0.1)
    assert trace and trace[0]["finish"] == "cancelled"
    assert trace[0]["completion_tokens"] < 4000
