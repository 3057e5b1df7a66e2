"""Tenants never meet, tried on every endpoint with two keys (alice, bob).

Alice stores facts, a review item, a document, a conversation and requests; for each endpoint,
bob's key sees none of it (404 for her ids, empty lists, no `tenant="alice"` metric sample, no
page text of hers), and alice still sees all of it (so the checks can fail).
"""

from __future__ import annotations

import time

import httpx2 as httpx
import pytest

from tests.serve.conftest import MODEL

SECRET = "the vault code is 4471"
DOC = "Harbor Station opened in 1911. Its first keeper was Ada Lindqvist.\n\n" * 4


def call(srv, method, path, tenant, **kw):
    return httpx.request(method, srv.url + path, headers=srv.headers(tenant), timeout=60, **kw)


@pytest.fixture(scope="module")
def alice(server):
    """Alice's memory: a fact, a review item contradicting it, a document, a conversation."""
    r = call(server, "POST", "/v1/memories", "alice", json={"memory": SECRET})
    fact = r.json()["results"][0]["id"]
    r = call(server, "POST", "/v1/memories", "alice",
             json={"messages": [{"role": "user", "content": "the vault code is 9999"}]})
    review = next(x["id"] for x in r.json()["results"] if x["event"] == "REVIEW")
    job = call(server, "POST", "/v1/documents", "alice", json={"name": "harbor.txt", "text": DOC}).json()
    for _ in range(300):
        job = call(server, "GET", f"/v1/jobs/{job['id']}", "alice").json()
        if job["status"] in ("done", "failed"):
            break
        time.sleep(0.1)
    assert job["status"] == "done", job
    chat = {"model": MODEL, "messages": [{"role": "user", "content": DOC + "Who was the first keeper?"}],
            "max_tokens": 4}
    first = call(server, "POST", "/v1/chat/completions", "alice", json=chat).json()
    call(server, "POST", "/v1/completions", "alice", json={"model": MODEL, "prompt": "alice-only marker", "max_tokens": 2})
    return {"fact": fact, "review": review, "job": job["id"], "doc": job["document"], "chat": chat,
            "chat_prompt_tokens": first["usage"]["prompt_tokens"]}


def test_memories_list_and_search_are_per_tenant(server, alice):
    mine = call(server, "GET", "/v1/memories", "alice", params={"query": "vault code"}).json()
    assert [m["id"] for m in mine["results"]] == [alice["fact"]]
    theirs = call(server, "GET", "/v1/memories", "bob", params={"query": "vault code"}).json()
    assert theirs["results"] == [] and theirs["total"] == 0
    assert all(m["memory"] != SECRET for m in call(server, "GET", "/v1/memories", "bob").json()["results"])


@pytest.mark.parametrize("method,suffix", [("GET", ""), ("GET", "/history"), ("POST", "/correct"), ("DELETE", "")])
def test_another_tenants_memory_id_is_404(server, alice, method, suffix):
    kw = {"json": {"memory": "the vault code is 0000"}} if method == "POST" else {}
    r = call(server, method, f"/v1/memories/{alice['fact']}{suffix}", "bob", **kw)
    assert r.status_code == 404 and r.json()["error"]["message"]
    if method == "GET":
        assert call(server, "GET", f"/v1/memories/{alice['fact']}{suffix}", "alice").status_code == 200
    assert call(server, "GET", f"/v1/memories/{alice['fact']}", "alice").json()["state"] == "active"


def test_review_buffer_is_per_tenant(server, alice):
    assert [i["id"] for i in call(server, "GET", "/v1/review", "alice").json()["results"]] == [alice["review"]]
    assert call(server, "GET", "/v1/review", "bob").json()["results"] == []
    for action in ("approve", "reject"):
        assert call(server, "POST", f"/v1/review/{alice['review']}/{action}", "bob").status_code == 404
        page = call(server, "POST", f"/ui/review/{alice['review']}/{action}", "bob", follow_redirects=True)
        assert "no such review item" in page.text
    assert call(server, "GET", "/v1/review", "alice").json()["results"][0]["status"] == "pending"


def test_documents_and_jobs_are_per_tenant(server, alice):
    assert [d["id"] for d in call(server, "GET", "/v1/documents", "alice").json()["results"]] == [alice["doc"]]
    assert call(server, "GET", "/v1/documents", "bob").json()["results"] == []
    assert call(server, "GET", f"/v1/documents/{alice['doc']}", "bob").status_code == 404
    assert call(server, "DELETE", f"/v1/documents/{alice['doc']}", "bob").status_code == 404
    assert call(server, "GET", f"/v1/jobs/{alice['job']}", "bob").status_code == 404
    assert call(server, "GET", f"/v1/documents/{alice['doc']}", "alice").status_code == 200
    assert call(server, "GET", f"/v1/jobs/{alice['job']}", "alice").status_code == 200


def test_stored_kv_is_never_served_to_another_tenant(server, alice):
    again = call(server, "POST", "/v1/chat/completions", "alice", json=alice["chat"]).json()
    assert again["usage"]["prompt_tokens_details"]["cached_tokens"] >= alice["chat_prompt_tokens"] - 1
    bobs = call(server, "POST", "/v1/chat/completions", "bob", json=alice["chat"]).json()
    sinks = len(server.engine.tokenizer().sink_ids)
    assert bobs["usage"]["prompt_tokens_details"]["cached_tokens"] == sinks  # only the model's sinks
    assert bobs["grm"]["mounted"] == []


def test_models_answers_every_key(server, alice):
    for t in ("alice", "bob"):
        assert call(server, "GET", "/v1/models", t).json()["data"][0]["id"] == MODEL


def test_metrics_show_only_the_callers_tenant(server, alice):
    mine = call(server, "GET", "/metrics", "alice").text
    theirs = call(server, "GET", "/metrics", "bob").text
    assert 'tenant="alice"' in mine and 'grm:prefix_cache_hits_total{tenant="alice"}' in mine
    assert 'tenant="alice"' not in theirs
    assert "grm:queue_depth" in theirs


@pytest.mark.parametrize("page", ["/ui", "/ui/facts", "/ui/review", "/ui/documents", "/ui/requests"])
def test_inspector_pages_show_only_the_callers_tenant(server, alice, page):
    mine = call(server, "GET", page, "alice")
    theirs = call(server, "GET", page, "bob")
    assert mine.status_code == theirs.status_code == 200
    marks = {"/ui": ">alice<", "/ui/facts": SECRET, "/ui/review": alice["review"], "/ui/documents": "harbor.txt",
             "/ui/requests": "alice-only marker"}
    assert marks[page] in mine.text
    assert marks[page] not in theirs.text
    assert call(server, "GET", f"/ui/facts/{alice['fact']}", "bob").status_code == 404


def test_inspector_without_a_key_redirects_to_login(server):
    r = httpx.get(server.url + "/ui/facts", follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/ui/login"
    bad = httpx.post(server.url + "/ui/login", data={"key": "grm-wrong"}, follow_redirects=False)
    assert bad.status_code == 401
    ok = httpx.post(server.url + "/ui/login", data={"key": server.keys["bob"]}, follow_redirects=False)
    assert ok.status_code == 303
    page = httpx.get(server.url + "/ui", cookies={"grm_key": server.keys["bob"]})
    assert ">bob<" in page.text
