"""Memory REST semantics (one tenant; tests/serve/test_tenants.py checks the isolation).

1. POST /v1/memories stores facts; GET lists them (search, pagination); GET one by id.
2. A correction supersedes: the old id stays readable as superseded, its history names both.
3. DELETE forgets (tombstone): the fact leaves the list, its node stays readable.
4. A contradiction from chat goes to review; approving it through the API makes it the fact.
5. POST /v1/documents is a job with progress; DELETE /v1/documents/{id} removes its blocks and
   grafts only: facts and another document (even one sharing its first block) stay.
"""

from __future__ import annotations

import time

import httpx2 as httpx

from tests.serve.conftest import MODEL


def call(srv, method, path, tenant="alice", **kw):
    return httpx.request(method, srv.url + path, headers=srv.headers(tenant), timeout=60, **kw)


def add(srv, statement, tenant="alice"):
    r = call(srv, "POST", "/v1/memories", tenant, json={"memory": statement})
    assert r.status_code == 200, r.text
    return r.json()["results"][0]["id"]


def ingest(srv, name, text, tenant="alice", layout="both"):
    job = call(srv, "POST", "/v1/documents", tenant, json={"name": name, "text": text, "layout": layout})
    assert job.status_code == 202 and job.json()["status"] in ("queued", "running", "done")
    body = job.json()
    for _ in range(600):
        body = call(srv, "GET", f"/v1/jobs/{body['id']}", tenant).json()
        if body["status"] in ("done", "failed"):
            break
        time.sleep(0.05)
    assert body["status"] == "done", body
    assert body["progress"]["done"] == body["progress"]["total"] > 0
    return body["document"]


def test_add_list_search_paginate_get(fresh_server):
    srv = fresh_server()
    ids = [add(srv, f"the boat number {i} is blue") for i in range(5)]
    add(srv, "my editor is vim")
    listed = call(srv, "GET", "/v1/memories", params={"page_size": 4}).json()
    assert listed["total"] == 6 and len(listed["results"]) == 4
    page2 = call(srv, "GET", "/v1/memories", params={"page_size": 4, "page": 2}).json()
    assert len(page2["results"]) == 2
    assert {m["id"] for m in listed["results"] + page2["results"]} >= set(ids)
    found = call(srv, "GET", "/v1/memories", params={"query": "editor"}).json()["results"]
    assert [m["memory"] for m in found] == ["my editor is vim"]
    loose = call(srv, "GET", "/v1/memories", params={"query": "which editor do I use"}).json()["results"]
    assert loose[0]["memory"] == "my editor is vim"
    assert call(srv, "GET", "/v1/memories", params={"query": "zebra"}).json()["results"] == []
    one = call(srv, "GET", f"/v1/memories/{ids[0]}").json()
    assert one["memory"] == "the boat number 0 is blue" and one["state"] == "active"
    assert call(srv, "GET", "/v1/memories/f-000000000000").status_code == 404
    assert call(srv, "GET", "/v1/memories", params={"page": 0}).status_code == 400


def test_correct_supersedes_and_history_keeps_lineage(fresh_server):
    srv = fresh_server()
    old = add(srv, "my locker code is 1234")
    r = call(srv, "POST", f"/v1/memories/{old}/correct", json={"memory": "5678"}).json()
    assert r["corrected"] is True and r["superseded"] == [old]
    new = r["id"]
    assert new != old and call(srv, "GET", f"/v1/memories/{new}").json()["memory"] == "my locker code is 5678"
    assert call(srv, "GET", f"/v1/memories/{old}").json()["state"] == "superseded"
    hist = call(srv, "GET", f"/v1/memories/{new}/history").json()
    assert [h["id"] for h in hist["history"]] == [old, new] and hist["current"] == new
    assert hist["history"][0]["edge"]["successor"] == new
    listed = [m["id"] for m in call(srv, "GET", "/v1/memories").json()["results"]]
    assert listed == [new]


def test_delete_forgets_but_keeps_the_node(fresh_server):
    srv = fresh_server()
    fid = add(srv, "the spare key is under the mat")
    r = call(srv, "DELETE", f"/v1/memories/{fid}").json()
    assert r["deleted"] is True
    assert call(srv, "GET", "/v1/memories").json()["results"] == []
    assert call(srv, "GET", f"/v1/memories/{fid}").json()["state"] == "superseded"
    assert call(srv, "DELETE", f"/v1/memories/{fid}").json()["deleted"] is False


def test_review_approve_makes_the_proposal_the_fact(fresh_server):
    srv = fresh_server()
    fid = add(srv, "my car is red")
    r = call(srv, "POST", "/v1/memories", json={"messages": [{"role": "user", "content": "my car is green"}]}).json()
    rid = next(x["id"] for x in r["results"] if x["event"] == "REVIEW")
    pending = call(srv, "GET", "/v1/review").json()["results"]
    assert [(p["id"], p["conflicts"]) for p in pending] == [(rid, fid)]
    out = call(srv, "POST", f"/v1/review/{rid}/approve").json()
    assert out["status"] == "approved" and out["ok"]
    assert [m["memory"] for m in call(srv, "GET", "/v1/memories").json()["results"]] == ["my car is green"]
    assert call(srv, "GET", "/v1/review").json()["results"] == []
    again = call(srv, "POST", f"/v1/review/{rid}/reject")
    assert again.status_code == 409


def test_document_delete_removes_its_blocks_and_grafts_only(fresh_server):
    srv = fresh_server()
    head = "Shared opening paragraph about the harbor. " * 20 + "\n\n"
    one = ingest(srv, "one.txt", head + "The first document ends with apples. " * 30)
    two = ingest(srv, "two.txt", head + "The second document ends with pears. " * 30)
    fid = add(srv, "the ferry leaves at 7")
    doc = call(srv, "GET", f"/v1/documents/{one}").json()
    assert doc["name"] == "one.txt" and doc["blocks"] >= 1 and doc["grafts"]
    store = srv.engine.rt.store
    kinds_before = {k: sum(1 for _ in store.records("alice", k)) for k in ("block", "graft", "document")}
    out = call(srv, "DELETE", f"/v1/documents/{one}").json()
    assert out["deleted"] is True and out["blocks"] >= 1 and out["grafts"] >= 1
    assert call(srv, "GET", f"/v1/documents/{one}").status_code == 404
    assert [d["id"] for d in call(srv, "GET", "/v1/documents").json()["results"]] == [two]
    kinds_after = {k: sum(1 for _ in store.records("alice", k)) for k in ("block", "graft", "document")}
    assert kinds_after["document"] == kinds_before["document"] - 1
    assert kinds_after["block"] == kinds_before["block"] - out["blocks"]
    assert kinds_after["graft"] == kinds_before["graft"] - out["grafts"]
    assert call(srv, "GET", f"/v1/memories/{fid}").json()["state"] == "active"
    # the other document still answers from memory, whole (its first block was shared and kept)
    prompt = head + "The second document ends with pears. " * 30
    r = call(srv, "POST", "/v1/completions", json={"model": MODEL, "prompt": prompt, "max_tokens": 2}).json()
    assert r["usage"]["prompt_tokens_details"]["cached_tokens"] >= r["usage"]["prompt_tokens"] - 1


def test_bad_bodies_are_400(fresh_server):
    srv = fresh_server()
    assert call(srv, "POST", "/v1/memories", json={}).status_code == 400
    assert call(srv, "POST", "/v1/memories", json={"memory": "x", "lifetime": "forever"}).status_code == 400
    assert call(srv, "POST", "/v1/documents", json={"name": "a"}).status_code == 400
    assert call(srv, "POST", "/v1/documents", json={"text": "a", "layout": "zigzag"}).status_code == 400
    assert call(srv, "GET", "/v1/jobs/job-nope").status_code == 404


def test_completion_can_ask_a_question_over_ingested_documents(fresh_server):
    srv = fresh_server()
    ingest(srv, "bridge.txt", "The Velmora Bridge is 412 meters long and opened in 1931.\n\n" * 3, layout="sections")
    ingest(srv, "orchard.txt", "The orchard grows winter apples near the river mill.\n\n" * 3, layout="sections")
    body = {"model": MODEL, "prompt": "How long is the Velmora Bridge?", "max_tokens": 4,
            "grm": {"mode": "exact-section"}}
    r = call(srv, "POST", "/v1/completions", json=body).json()
    assert r["grm"]["mode"] == "exact-section"
    assert [m["source"] for m in r["grm"]["mounted"]] == ["bridge.txt"]
    assert r["usage"]["prompt_tokens_details"]["cached_tokens"] > 40  # the section's K/V, not re-read
    body["grm"] = {"mode": "sideways"}
    assert call(srv, "POST", "/v1/completions", json=body).status_code == 400
    chat = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "grm": {"mode": "grafts"}}
    assert call(srv, "POST", "/v1/chat/completions", json=chat).status_code == 400
