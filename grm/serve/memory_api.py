"""Memory REST, in the shape users of mem0 know, over the policy plane and the store.

    POST   /v1/memories                {"memory": S} | {"facts": [S...]} | {"messages": [{role, content}...]}
                                       (+ "lifetime": permanent|project|session|volatile)
    GET    /v1/memories                ?query=Q&page=N&page_size=M: live facts, paginated
    GET    /v1/memories/{id}           one fact (any state: superseded and forgotten ones too)
    DELETE /v1/memories/{id}           forget it (a tombstone; lineage kept)
    GET    /v1/memories/{id}/history   its lineage, oldest first, with every piece of evidence
    POST   /v1/memories/{id}/correct   {"memory": S}: a new node superseding it
    GET    /v1/review                  pending review items
    POST   /v1/review/{id}/approve|reject
    POST   /v1/documents               {"name", "text", "layout": seen (default)|both|chain|sections}: an ingest job (202)
    GET    /v1/jobs/{id}               the job's status and progress
    POST   /v1/jobs/{id}/cancel        stop it (a running one after its current block)
    GET    /v1/documents               documents;  GET|DELETE /v1/documents/{id}
Every call sees only the caller's tenant: another tenant's id answers 404, like a missing one.
Writes go through the same commands as `grm memory` and chat lines (grm/policy/commands.py), so
they follow the same conflict rules and never edit a node in place.
"""

from __future__ import annotations

import re
import secrets
import time
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from grm.runtime import commands
from grm.runtime.commands import LIFETIMES, OPERATOR_SETTING
from grm.runtime.config import DEFAULT_LAYOUT, LAYOUTS
from grm.serve.errors import ApiError, bad_request, not_found
from grm.serve.http import read_json, tenant_of, wait_or_disconnect

_ID = re.compile(r"[a-z]{1,4}-[0-9a-f]{4,64}")
_DOC = re.compile(r"[0-9a-f]{64}")
MAX_PAGE = 200


def fact_json(f: Any) -> dict:
    return {"id": f.id, "memory": f.statement, "subject": f.subject, "predicate": f.predicate, "value": f.value,
            "state": f.state, "scope": f.scope.label(), "lifetime": f.lifetime, "intent": f.intent,
            "confidence": f.confidence, "count": f.count, "pinned": f.pinned, "mutable": f.mutable,
            "valid_from": f.valid_from, "expires_at": f.expires_at, "created_at": f.created, "graft": f.graft,
            "supersedes": list(f.supersedes), "reason": f.reason, "evidence": [e.to_json() for e in f.evidence]}


def review_json(i: Any) -> dict:
    return {"id": i.id, "memory": i.proposal.statement, "intent": i.proposal.intent, "conflicts": i.conflicts,
            "reason": i.reason, "status": i.status, "created_at": i.created,
            "evidence": [e.to_json() for e in i.evidence]}


def document_json(rec: Any, grafts: list[dict] | None = None) -> dict:
    m = rec.meta
    out = {"id": rec.key, "object": "document", "name": m.get("name"), "layout": m.get("layout"),
           "bytes": m.get("bytes", rec.payload_size), "blocks": len(m.get("blocks", ()))}
    if grafts is not None:
        out["grafts"] = grafts
    return out


def graft_json(g: Any, nbytes: int) -> dict:
    m = g.record.meta
    return {"id": g.id, "kind": g.kind, "tokens": g.tokens, "bytes": nbytes,
            "tier": "archived" if m.get("archived") else "exact", "retired": bool(g.retired),
            "sources": list(m.get("sources", ())), "text": (g.text or "")[:200]}


def _check_id(value: str, what: str) -> str:
    if not _ID.fullmatch(value):
        raise not_found(what)
    return value


async def _run(request: Request, label: str, fn: Any, writes: bool = False) -> Any:
    engine = request.app.state.engine
    job = engine.run(tenant_of(request), label, fn, writes)
    return await wait_or_disconnect(request, job, request.app.state.config.timeout_s)


def _eid() -> str:
    return f"api-{int(time.time() * 1000)}-{secrets.token_hex(3)}"


def _lifetime(body: dict) -> str | None:
    lifetime = body.get("lifetime")
    if lifetime is not None and lifetime not in LIFETIMES:
        raise bad_request(f"'lifetime' must be one of {', '.join(LIFETIMES)}", param="lifetime")
    return lifetime


# ----- memories --------------------------------------------------------------------------------
async def add_memories(request: Request) -> JSONResponse:
    body = await read_json(request)
    if not isinstance(body, dict):
        raise bad_request("the request body must be a JSON object")
    lifetime = _lifetime(body)
    statements: list[str] = []
    if isinstance(body.get("memory"), str):
        statements.append(body["memory"])
    facts = body.get("facts", [])
    if not isinstance(facts, list) or not all(isinstance(s, str) for s in facts):
        raise bad_request("'facts' must be a list of strings", param="facts")
    statements += facts
    messages = body.get("messages", [])
    if not isinstance(messages, list) or not all(
            isinstance(m, dict) and isinstance(m.get("content"), str) for m in messages):
        raise bad_request("'messages' must be a list of {role, content} objects", param="messages")
    user_lines = [m["content"] for m in messages if m.get("role", "user") == "user"]
    if any(commands.sets_durability(text) for text in user_lines):
        raise ApiError(403, OPERATOR_SETTING, "permission_error", "operator_setting", "messages")
    if not any(s.strip() for s in statements) and not any(s.strip() for s in user_lines):
        raise bad_request("give 'memory', 'facts' or 'messages' with some text")

    def work(m: Any) -> dict:
        pol, results, ran = m.policy, [], []
        for s in statements:
            res = commands.remember(pol, s.strip(), lifetime, _eid())
            ran.append(res.to_json())
            results += [{"id": f, "memory": pol.fact(f).statement, "event": "ADD" if res.changed else "NONE"}
                        for f in res.facts]
            if res.review:
                results.append({"id": res.review, "memory": s, "event": "REVIEW"})
        for text in user_lines:
            eid = _eid()
            res = m.commands(text, eid)
            if res is not None:
                ran.append(res)
                continue
            for o in pol.observe(text, evidence_id=eid):
                if o.fact:
                    results.append({"id": o.fact, "memory": pol.fact(o.fact).statement, "event": o.action.upper()})
                elif o.review:
                    results.append({"id": o.review, "memory": text, "event": "REVIEW"})
        return {"results": results, "commands": ran}

    return JSONResponse(await _run(request, "memories.add", work, writes=True))


async def list_memories(request: Request) -> JSONResponse:
    q = request.query_params
    query = q.get("query")
    try:
        page, size = int(q.get("page", "1")), int(q.get("page_size", "50"))
    except ValueError:
        raise bad_request("'page' and 'page_size' must be integers") from None
    if page < 1 or not 1 <= size <= MAX_PAGE:
        raise bad_request(f"'page' must be >= 1 and 'page_size' 1..{MAX_PAGE}")

    def work(m: Any) -> dict:
        facts = m.policy.facts()
        facts.sort(key=lambda f: (-f.created, f.id))
        if query:  # the facts holding all its words; else those sharing any, most shared first
            facts = commands.search(m.policy, query, facts)
        chunk = facts[(page - 1) * size: page * size]
        return {"results": [fact_json(f) for f in chunk], "page": page, "page_size": size, "total": len(facts)}

    return JSONResponse(await _run(request, "memories.list", work))


async def get_memory(request: Request) -> JSONResponse:
    fid = _check_id(request.path_params["id"], "memory")
    fact = await _run(request, "memories.get", lambda m: m.policy.fact(fid))
    if fact is None:
        raise not_found("memory")
    return JSONResponse(fact_json(fact))


async def delete_memory(request: Request) -> JSONResponse:
    fid = _check_id(request.path_params["id"], "memory")

    def work(m: Any) -> Any:
        fact = m.policy.fact(fid)
        if fact is None:
            return None
        if fact.state != "active":
            return {"id": fid, "deleted": False, "message": f"{fid} is already {fact.state}"}
        res = commands.forget(m.policy, fid, _eid())
        return {"id": fid, "deleted": res.changed, "message": res.text}

    out = await _run(request, "memories.delete", work)
    if out is None:
        raise not_found("memory")
    return JSONResponse(out)


async def memory_history(request: Request) -> JSONResponse:
    fid = _check_id(request.path_params["id"], "memory")

    def work(m: Any) -> Any:
        pol = m.policy
        if pol.fact(fid) is None:
            return None
        nodes = pol.ledger.lineage(fid)
        after = pol.ledger.successor(fid)
        return {"id": fid, "history": [{**fact_json(n), "edge": pol.ledger.edge(n.id)} for n in nodes],
                "current": after.id if after is not None else None}

    out = await _run(request, "memories.history", work)
    if out is None:
        raise not_found("memory")
    return JSONResponse(out)


async def correct_memory(request: Request) -> JSONResponse:
    fid = _check_id(request.path_params["id"], "memory")
    body = await read_json(request)
    text = body.get("memory", body.get("text")) if isinstance(body, dict) else None
    if not isinstance(text, str) or not text.strip():
        raise bad_request("give the corrected statement (or just the new value) as 'memory'", param="memory")

    def work(m: Any) -> Any:
        fact = m.policy.fact(fid)
        if fact is None:
            return None
        res = commands.correct(m.policy, fid, text.strip(), _eid())
        return {"id": res.facts[0] if res.changed and res.facts else fid, "corrected": res.changed, "ok": res.ok,
                "superseded": list(res.superseded), "message": res.text}

    out = await _run(request, "memories.correct", work)
    if out is None:
        raise not_found("memory")
    return JSONResponse(out, status_code=200 if out["ok"] else 409)


# ----- review ----------------------------------------------------------------------------------
async def list_review(request: Request) -> JSONResponse:
    items = await _run(request, "review.list", lambda m: [review_json(i) for i in m.policy.reviews.pending()])
    return JSONResponse({"results": items})


def decide_review(m: Any, rid: str, action: str) -> dict | None:
    if m.policy.reviews.get(rid) is None:
        return None
    res = commands.decide_review(m.policy, action, rid, _eid())
    return {"id": rid, "status": m.policy.reviews.get(rid).status, "ok": res.ok, "facts": list(res.facts),
            "message": res.text}


async def review_action(request: Request) -> JSONResponse:
    rid = _check_id(request.path_params["id"], "review item")
    action = request.path_params["action"]
    if action not in ("approve", "reject"):
        raise not_found("review action")
    out = await _run(request, f"review.{action}", lambda m: decide_review(m, rid, action))
    if out is None:
        raise not_found("review item")
    return JSONResponse(out, status_code=200 if out["ok"] else 409)


# ----- documents and jobs ------------------------------------------------------------------------
async def add_document(request: Request) -> JSONResponse:
    body = await read_json(request)
    if not isinstance(body, dict) or not isinstance(body.get("text"), str) or not body["text"].strip():
        raise bad_request("give the document as 'text' (UTF-8), with an optional 'name' and 'layout'", param="text")
    name = body.get("name") or "document"
    layout = body.get("layout", DEFAULT_LAYOUT)
    if not isinstance(name, str) or len(name) > 256:
        raise bad_request("'name' must be a string of at most 256 characters", param="name")
    if layout not in LAYOUTS:
        raise bad_request(f"'layout' must be one of {', '.join(LAYOUTS)}", param="layout")
    job = request.app.state.engine.ingest(tenant_of(request), name, body["text"], layout)
    return JSONResponse(job.to_json(), status_code=202)


async def get_job(request: Request) -> JSONResponse:
    job = request.app.state.engine.job(tenant_of(request), request.path_params["id"])
    if job is None:
        raise not_found("job")
    return JSONResponse(job.to_json())


async def cancel_job(request: Request) -> JSONResponse:
    """Cancel an ingest job: a queued one never runs; a running one stops after its current block
    ("cancelling", then "cancelled"), removing what it stored that no document uses."""
    job = request.app.state.engine.cancel_job(tenant_of(request), request.path_params["id"])
    if job is None:
        raise not_found("job")
    return JSONResponse(job.to_json())


async def list_documents(request: Request) -> JSONResponse:
    docs = await _run(request, "documents.list", lambda m: [document_json(d) for d in m.documents()])
    return JSONResponse({"results": docs})


async def document(request: Request) -> JSONResponse:
    did = request.path_params["id"]
    if not _DOC.fullmatch(did):
        raise not_found("document")
    if request.method == "DELETE":
        out = await _run(request, "documents.delete", lambda m: m.delete_document(did))
    else:
        def work(m: Any) -> Any:
            rec = m.document(did)
            return None if rec is None else document_json(
                rec, [graft_json(g, m.graft_bytes(g)) for g in m.document_grafts(rec)])

        out = await _run(request, "documents.get", work)
    if out is None:
        raise not_found("document")
    return JSONResponse(out)


ROUTES = [
    Route("/v1/memories", add_memories, methods=["POST"]),
    Route("/v1/memories", list_memories, methods=["GET"]),
    Route("/v1/memories/{id}", get_memory, methods=["GET"]),
    Route("/v1/memories/{id}", delete_memory, methods=["DELETE"]),
    Route("/v1/memories/{id}/history", memory_history, methods=["GET"]),
    Route("/v1/memories/{id}/correct", correct_memory, methods=["POST"]),
    Route("/v1/review", list_review, methods=["GET"]),
    Route("/v1/review/{id}/{action}", review_action, methods=["POST"]),
    Route("/v1/documents", add_document, methods=["POST"]),
    Route("/v1/documents", list_documents, methods=["GET"]),
    Route("/v1/documents/{id}", document, methods=["GET", "DELETE"]),
    Route("/v1/jobs/{id}", get_job, methods=["GET"]),
    Route("/v1/jobs/{id}/cancel", cancel_job, methods=["POST"]),
]
