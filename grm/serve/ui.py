"""The web memory inspector at /ui: server-rendered Jinja2 pages, no JavaScript, no CDN.

Pages (each shows only the signed-in tenant's memory): overview (store and hit-rate figures),
facts (with validity; each fact's lineage and evidence), review buffer (approve/reject forms),
documents and grafts (kind, size, tier), and the request trace (what was loaded or mounted for
each recent request). Sign-in: the API key posted once to /ui/login is kept in an HttpOnly,
SameSite=Strict cookie (so another site cannot post the review forms with it).
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse
from starlette.routing import Route

from grm.serve.http import COOKIE, tenant_of, wait_or_disconnect
from grm.serve.memory_api import decide_review, document_json, fact_json, graft_json, review_json

_ENV = Environment(loader=FileSystemLoader(Path(__file__).parent / "templates"), autoescape=select_autoescape())
_ENV.filters["when"] = lambda t: dt.datetime.fromtimestamp(float(t), dt.timezone.utc).strftime(
    "%Y-%m-%d %H:%M:%S") if t else ""


def _page(request: Request, template: str, title: str, here: str, **ctx: Any) -> HTMLResponse:
    html = _ENV.get_template(template).render(title=title, here=here, tenant=tenant_of(request),
                                             model=request.app.state.engine.model_name, **ctx)
    return HTMLResponse(html)


async def _run(request: Request, fn: Any) -> Any:
    engine = request.app.state.engine
    job = engine.run(tenant_of(request), "ui", fn)
    return await wait_or_disconnect(request, job, request.app.state.config.timeout_s)


async def _form(request: Request) -> dict[str, str]:
    raw = (await request.body()).decode("utf-8", errors="replace")
    return {k: v[0] for k, v in parse_qs(raw).items()}


async def login(request: Request) -> Any:
    keyring = request.app.state.keyring
    if keyring is None:
        return RedirectResponse("/ui", status_code=303)
    if request.method == "GET":
        return HTMLResponse(_ENV.get_template("login.html").render(error=None))
    key = (await _form(request)).get("key", "").strip()
    if keyring.tenant_for(key) is None:
        return HTMLResponse(_ENV.get_template("login.html").render(error="that key is not valid"), status_code=401)
    resp = RedirectResponse("/ui", status_code=303)
    resp.set_cookie(COOKIE, key, httponly=True, samesite="strict", path="/ui")
    return resp


async def overview(request: Request) -> HTMLResponse:
    tenant = tenant_of(request)
    engine = request.app.state.engine

    def work(m: Any) -> dict:
        return {"store": m.store_stats(), "facts": len(m.policy.facts()), "reviews": len(m.policy.reviews.pending())}

    data = await _run(request, work)
    hits, queries = request.app.state.metrics.hit_rate(tenant)
    rate = f"{hits / queries:.1%}" if queries else "n/a"
    return _page(request, "overview.html", "Overview", "/ui", hit_rate=rate, hits=hits, queries=queries,
                 requests=len(engine.trace(tenant)), queue=engine.queue_depth, **data)


async def facts(request: Request) -> HTMLResponse:
    rows = await _run(request, lambda m: [fact_json(f) for f in m.policy.facts()])
    return _page(request, "facts.html", "Facts", "/ui/facts", facts=rows)


async def fact(request: Request) -> HTMLResponse:
    fid = request.path_params["id"]

    def work(m: Any) -> Any:
        pol = m.policy
        if pol.fact(fid) is None:
            return None
        after = pol.ledger.successor(fid)
        return {"history": [{**fact_json(n), "edge": pol.ledger.edge(n.id)} for n in pol.ledger.lineage(fid)],
                "current": after.id if after is not None else None}

    data = await _run(request, work)
    if data is None:
        return HTMLResponse("<p>no such fact</p>", status_code=404)
    return _page(request, "fact.html", f"Fact {fid}", "/ui/facts", **data)


async def review(request: Request) -> HTMLResponse:
    items = await _run(request, lambda m: [review_json(i) for i in m.policy.reviews.pending()])
    return _page(request, "review.html", "Review buffer", "/ui/review", reviews=items,
                 message=request.query_params.get("message"))


async def review_action(request: Request) -> Any:
    rid, action = request.path_params["id"], request.path_params["action"]
    if action not in ("approve", "reject"):
        return HTMLResponse("<p>unknown action</p>", status_code=404)
    out = await _run(request, lambda m: decide_review(m, rid, action))
    msg = "no such review item" if out is None else out["message"]
    return RedirectResponse("/ui/review?" + urlencode({"message": msg}), status_code=303)


async def documents(request: Request) -> HTMLResponse:
    def work(m: Any) -> dict:
        return {"documents": [document_json(d) for d in m.documents()],
                "grafts": [graft_json(g, m.graft_bytes(g)) for g in m.grafts()]}

    return _page(request, "documents.html", "Documents and grafts", "/ui/documents", **(await _run(request, work)))


async def requests_page(request: Request) -> HTMLResponse:
    trace = list(request.app.state.engine.trace(tenant_of(request)))
    return _page(request, "requests.html", "Request trace", "/ui/requests", trace=trace)


ROUTES = [
    Route("/ui/login", login, methods=["GET", "POST"]),
    Route("/ui", overview, methods=["GET"]),
    Route("/ui/facts", facts, methods=["GET"]),
    Route("/ui/facts/{id}", fact, methods=["GET"]),
    Route("/ui/review", review, methods=["GET"]),
    Route("/ui/review/{id}/{action}", review_action, methods=["POST"]),
    Route("/ui/documents", documents, methods=["GET"]),
    Route("/ui/requests", requests_page, methods=["GET"]),
]
