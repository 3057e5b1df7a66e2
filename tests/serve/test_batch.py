"""Concurrent requests generated in one batch (grm/serve/engine.py, ServeConfig.batch).

Expectations:
1. Four requests waiting together (chat and text completions, streamed and not, two tenants,
   different limits) are decoded in one batch (/metrics: steps of four requests) and each gets the
   answer the same request gets alone; a streamed one adds up to it; each reports its own reads.
2. A client that disconnects mid-stream stops its own generation (finish "cancelled") while the
   others in the batch finish with the answers they get alone.
3. --batch 1 generates one answer at a time: no batched step at all.
3a. `grm ask`'s endpoint (/v1/ask) waiting beside others is decoded in the same batch, each answer
   the one it gets alone.
4. --batch below 1 is refused; `grm serve --help` names the default, the ServeConfig default.
"""

from __future__ import annotations

import threading
import time

import httpx2 as httpx

from tests.serve.conftest import MODEL
from tests.serve.test_lifecycle import _sample

REQUESTS = [
    ("alice", "/v1/chat/completions", {"messages": [{"role": "user", "content": "Name a river in the north."}],
                                       "max_tokens": 12}),
    ("bob", "/v1/completions", {"prompt": "The orchard in winter", "max_tokens": 20}),
    ("alice", "/v1/completions", {"prompt": "A harbor at dawn, and then", "max_tokens": 7, "stream": True}),
    ("bob", "/v1/chat/completions", {"messages": [{"role": "user", "content": "Say something about trains."}],
                                     "max_tokens": 16, "stream": True}),
]


def _hold(srv):
    """Hold the model worker with a job that waits for the returned event."""
    gate, started = threading.Event(), threading.Event()
    srv.engine.run("alice", "hold", lambda m: (started.set(), gate.wait(60)))
    assert started.wait(10)
    return gate


def _send(srv, tenant: str, path: str, body: dict) -> str:
    body = {"model": MODEL, "temperature": 0, "grm": {"memory": False}, **body}
    text = ""
    if body.get("stream"):
        with httpx.stream("POST", srv.url + path, json=body, headers=srv.headers(tenant), timeout=120) as r:
            assert r.status_code == 200
            for line in r.iter_lines():
                if line.startswith("data: {"):
                    import json

                    for choice in json.loads(line[6:]).get("choices", []):
                        text += (choice.get("delta") or {}).get("content") or choice.get("text") or ""
        return text
    r = httpx.post(srv.url + path, json=body, headers=srv.headers(tenant), timeout=120)
    assert r.status_code == 200, r.text
    choice = r.json()["choices"][0]
    assert r.json()["grm"]["model_reads"]["calls"] >= 1
    return choice["message"]["content"] if "message" in choice else choice["text"]


def _together(srv, requests: list[tuple[str, str, dict]]) -> list[str]:
    """Send `requests` at once while the worker is held, so they wait together; their answers."""
    return _at_once(srv, [lambda r=r: _send(srv, *r) for r in requests])


def _at_once(srv, calls: list) -> list:
    """Run `calls` (each sends one request) at once while the worker is held, so their requests
    wait together; what each returned."""
    out: list = [None] * len(calls)
    gate = _hold(srv)

    def one(i: int) -> None:
        out[i] = calls[i]()

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(calls))]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 30
    while srv.engine.queue_depth < len(calls) and time.monotonic() < deadline:
        time.sleep(0.05)
    gate.set()
    for t in threads:
        t.join(120)
    return out


def _steps(srv) -> tuple[float, float]:
    """(batched decoding steps, their rows summed) from /metrics."""
    text = httpx.get(srv.url + "/metrics", headers=srv.headers("alice")).text
    return _sample(text, "grm:decode_batch_rows_count"), _sample(text, "grm:decode_batch_rows_sum")


def test_waiting_requests_are_decoded_together_with_their_answers_alone(fresh_server):
    srv = fresh_server(batch=4)
    together = _together(srv, REQUESTS)
    steps, rows = _steps(srv)
    assert steps > 0 and rows / steps > 2  # four at first, fewer as they finish
    alone = [_send(srv, *req) for req in REQUESTS]
    assert together == alone
    assert all(alone)


def test_a_disconnected_stream_leaves_the_batch_and_the_others_finish(fresh_server):
    srv = fresh_server(batch=4)
    others = REQUESTS[:2]
    gate = _hold(srv)
    out: list[str | None] = [None, None]
    first: list[str] = []
    body = {"model": MODEL, "prompt": "Disconnect me in the batch.", "max_tokens": 4000, "stream": True,
            "grm": {"memory": False}}

    def disconnecting() -> None:
        with httpx.stream("POST", srv.url + "/v1/completions", json=body, headers=srv.headers("bob"),
                          timeout=60) as r:
            assert r.status_code == 200
            first.append(next(r.iter_lines()))  # then the connection closes

    threads = [threading.Thread(target=disconnecting)]
    threads += [threading.Thread(target=lambda i=i: out.__setitem__(i, _send(srv, *others[i]))) for i in range(2)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 30
    while srv.engine.queue_depth < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    gate.set()
    for t in threads:
        t.join(120)
    assert first and first[0].startswith("data: ")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        trace = [t for t in srv.engine.trace("bob") if "Disconnect me" in t["user"]]
        if trace:
            break
        time.sleep(0.1)
    assert trace and trace[0]["finish"] == "cancelled" and trace[0]["completion_tokens"] < 4000
    assert out == [_send(srv, *req) for req in others]
    steps, rows = _steps(srv)
    assert rows / steps > 1


def _ask(srv, tenant: str, question: str, mode: str) -> str:
    r = httpx.post(srv.url + "/v1/ask", json={"question": question, "mode": mode, "max_new_tokens": 9},
                   headers=srv.headers(tenant), timeout=120)
    assert r.status_code == 200, r.text
    return r.json()["answer"]


def _ingest(srv, tenant: str, text: str) -> None:
    r = httpx.post(srv.url + "/v1/documents", json={"name": "notes.txt", "text": text}, headers=srv.headers(tenant),
                   timeout=60)
    assert r.status_code in (200, 202), r.text
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        job = httpx.get(srv.url + f"/v1/jobs/{r.json()['id']}", headers=srv.headers(tenant), timeout=60).json()
        if job["status"] == "done":
            return
        assert job["status"] in ("queued", "running"), job
        time.sleep(0.05)
    raise AssertionError("ingest did not finish")


def test_asks_are_decoded_in_the_batch_beside_chats(fresh_server):
    srv = fresh_server(batch=4)
    for tenant in ("alice", "bob"):
        _ingest(srv, tenant, "The harbor master of Quintar keeps the blue ledger. The orchard grows apples.")
    asks = [("alice", "Where is the harbor?", "none"), ("bob", "What does the orchard grow?", "none"),
            ("alice", "Who keeps the ledger?", "grafts")]
    out = _at_once(srv, [lambda a=a: _ask(srv, *a) for a in asks] + [lambda: _send(srv, *REQUESTS[0])])
    steps, rows = _steps(srv)
    assert steps > 0 and rows / steps > 1  # the asks decoded together, not one at a time
    assert out == [_ask(srv, *a) for a in asks] + [_send(srv, *REQUESTS[0])]


def test_batch_1_generates_one_at_a_time(fresh_server):
    srv = fresh_server(batch=1)
    together = _together(srv, REQUESTS[:2])
    assert all(together)
    assert _steps(srv) == (0, 0)


def test_batch_below_1_is_refused_and_help_names_the_default():
    import pytest

    from grm.cli import build_parser
    from grm.errors import UserInputError
    from grm.serve.config import ServeConfig

    with pytest.raises(UserInputError, match="--batch"):
        ServeConfig(no_auth=True, batch=0)
    assert ServeConfig(no_auth=True).batch == 8
    serve = build_parser()._subparsers._group_actions[0].choices["serve"]
    assert "(default 8)" in next(a.help for a in serve._actions if "--batch" in a.option_strings)
