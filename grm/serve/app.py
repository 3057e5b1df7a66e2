"""The ASGI app: routes, auth, body limit, errors in the OpenAI shape, health and metrics.

`create_app(engine, config, keyring, metrics)` assembles it; grm/serve/server.py runs it under
uvicorn. GET /healthz answers while the process is up; GET /readyz 200 once the model is loaded,
the store open and the worker running (503 while starting or draining). GET /metrics is the
Prometheus text exposition, filtered to the caller's tenant.
"""

from __future__ import annotations

import contextlib
import logging
import time
from typing import Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from grm.errors import GrmError
from grm.serve import ask_api, memory_api, openai_api, ui
from grm.serve.errors import ApiError, from_grm
from grm.serve.http import AuthMiddleware, BodyLimit, tenant_of

log = logging.getLogger("grm.serve")


class Starting:
    """Stands in for the engine while the model loads (grm serve listens at once): not ready, and
    every other use answers 503 with Retry-After."""

    ready = False

    def __getattr__(self, name: str) -> Any:
        raise ApiError(503, "the model is still loading; retry shortly", "server_error", "loading",
                       headers={"Retry-After": "5"})


async def healthz(request: Request) -> JSONResponse:
    return JSONResponse({"status": "ok"})


async def readyz(request: Request) -> JSONResponse:
    engine = request.app.state.engine
    if engine.ready:
        return JSONResponse({"status": "ready", "model": engine.model_name})
    return JSONResponse({"status": "not ready"}, status_code=503)


async def metrics(request: Request) -> Response:
    body = request.app.state.metrics.render(tenant_of(request))
    return Response(body, media_type="text/plain; version=0.0.4; charset=utf-8")


async def _api_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ApiError)
    return exc.response()


async def _grm_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, GrmError)
    engine = request.app.state.engine
    return from_grm(exc, {} if isinstance(engine, Starting) else engine.hidden).response()


async def _not_found(request: Request, exc: Exception) -> Response:
    status = getattr(exc, "status_code", 404)
    msg = "no such endpoint" if status == 404 else "method not allowed" if status == 405 else str(exc)
    return ApiError(status, f"{msg}: {request.method} {request.url.path}", "invalid_request_error",
                    "unknown_url" if status == 404 else None).response()


def create_app(engine: Any, config: Any, keyring: Any, metrics_: Any, local: str | None = None) -> Starlette:
    """`local`: the store owner's credential (grm/serve/endpoint.py), accepted besides the keys."""

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette):
        yield
        # uvicorn calls this after it stopped accepting and in-flight requests finished (SIGTERM):
        # the endpoint file goes first (a CLI call now opens the store itself, once it is free),
        # the worker drains what is queued, then the store closes (nothing acknowledged is lost).
        if app.state.endpoint is not None:
            app.state.endpoint.withdraw()
        if not isinstance(app.state.engine, Starting):
            app.state.engine.close(timeout=config.drain_s)

    routes = [Route("/healthz", healthz), Route("/readyz", readyz), Route("/metrics", metrics),
              *openai_api.ROUTES, *memory_api.ROUTES, *ask_api.ROUTES, *ui.ROUTES]
    app = Starlette(
        routes=routes, lifespan=lifespan,
        middleware=[Middleware(BodyLimit, limit=config.max_body_bytes),
                    Middleware(AuthMiddleware, keyring=keyring, no_auth_tenant=config.tenant if config.no_auth else None,
                               local=local, local_tenant=config.tenant)],
        exception_handlers={ApiError: _api_error, GrmError: _grm_error, 404: _not_found, 405: _not_found},
    )
    app.state.engine, app.state.config, app.state.keyring, app.state.metrics = engine, config, keyring, metrics_
    app.state.started = int(time.time())
    app.state.endpoint = None  # the endpoint file once published (grm/serve/server.py)
    return app
