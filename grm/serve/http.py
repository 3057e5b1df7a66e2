"""HTTP plumbing every endpoint shares: who is asking (API key -> tenant), reading a bounded JSON
body, and waiting for a job while watching for the client to go away."""

from __future__ import annotations

import asyncio
import hmac
import json
from typing import Any

from starlette.requests import Request

from grm.runtime.admin import tenant_ok
from grm.serve.endpoint import TENANT_HEADER
from grm.serve.engine import Job
from grm.serve.errors import ApiError, bad_request

PUBLIC = ("/healthz", "/readyz", "/ui/login", "/ui/static/")
COOKIE = "grm_key"


def bearer(headers: dict[str, str]) -> str | None:
    auth = headers.get("authorization", "")
    scheme, _, key = auth.partition(" ")
    return key.strip() if scheme.lower() == "bearer" and key.strip() else None


class AuthMiddleware:
    """Puts the caller's tenant in `scope["state"]["tenant"]`, or answers 401 (the inspector's
    pages redirect to its login form instead). The key is `Authorization: Bearer KEY`; under
    /ui also the `grm_key` cookie. With --no-auth every request is the configured tenant. The
    store owner's local credential (grm/serve/endpoint.py: what `grm ask` and `grm ingest` send)
    acts for the tenant named in the X-GRM-Tenant header, else the server's own."""

    def __init__(self, app: Any, keyring: Any, no_auth_tenant: str | None, local: str | None = None,
                 local_tenant: str = "default") -> None:
        self.app, self.keyring, self.no_auth_tenant = app, keyring, no_auth_tenant
        self.local, self.local_tenant = local, local_tenant

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope.get("path", "")
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        key = bearer(headers)
        if self.local is not None and key is not None and hmac.compare_digest(key.encode(), self.local.encode()):
            tenant = headers.get(TENANT_HEADER.lower(), self.local_tenant)
            if not tenant_ok(tenant):
                err = ApiError(400, f"bad tenant name in {TENANT_HEADER}: 1-64 letters, digits, '_', '.', '-', "
                               "not starting with '_'", "invalid_request_error", "invalid_tenant")
                await err.response()(scope, receive, send)
                return
        elif TENANT_HEADER.lower() in headers:  # never served as another tenant than the one it names
            err = ApiError(401, f"{TENANT_HEADER} needs the store owner's local credential", "authentication_error",
                           "invalid_api_key", headers={"WWW-Authenticate": "Bearer"})
            await err.response()(scope, receive, send)
            return
        else:
            tenant = self.no_auth_tenant
        if tenant is None:
            if key is None and path.startswith("/ui"):
                key = Request(scope).cookies.get(COOKIE)
            tenant = self.keyring.tenant_for(key)
        if tenant is None and not (path in PUBLIC or path.startswith(PUBLIC[-1])):
            if path.startswith("/ui"):
                await _redirect(send, "/ui/login")
                return
            err = ApiError(401, "a valid API key is required (Authorization: Bearer KEY)", "authentication_error",
                           "invalid_api_key", headers={"WWW-Authenticate": "Bearer"})
            await err.response()(scope, receive, send)
            return
        scope.setdefault("state", {})["tenant"] = tenant
        await self.app(scope, receive, send)


async def _redirect(send: Any, location: str) -> None:
    await send({"type": "http.response.start", "status": 303, "headers": [(b"location", location.encode())]})
    await send({"type": "http.response.body", "body": b""})


class BodyLimit:
    """413 for a body over the limit, by Content-Length or as it arrives."""

    def __init__(self, app: Any, limit: int) -> None:
        self.app, self.limit = app, limit

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for k, v in scope.get("headers", []):
            if k.lower() == b"content-length" and v.isdigit() and int(v) > self.limit:
                await _too_large(self.limit)(scope, receive, send)
                return
        seen = 0

        async def counted() -> dict:
            nonlocal seen
            msg = await receive()
            if msg["type"] == "http.request":
                seen += len(msg.get("body", b""))
                if seen > self.limit:
                    raise _TooLarge()
            return msg

        try:
            await self.app(scope, counted, send)
        except _TooLarge:
            await _too_large(self.limit)(scope, receive, send)


class _TooLarge(Exception):
    pass


def _too_large(limit: int) -> Any:
    return ApiError(413, f"request body over the server's limit of {limit} bytes", "invalid_request_error",
                    "request_too_large").response()


def tenant_of(request: Request) -> str:
    tenant = getattr(request.state, "tenant", None)
    if tenant is None:  # a public route asked for a tenant: never serve one
        raise ApiError(401, "a valid API key is required", "authentication_error", "invalid_api_key")
    return tenant


MAX_DEPTH = 64  # nesting levels of a request body (this API's bodies nest four at most)


async def read_json(request: Request) -> Any:
    """The body as JSON, or 400: not JSON, nested past MAX_DEPTH, or holding a string that is not
    valid Unicode (a lone surrogate such as "\\ud800", which JSON can spell but UTF-8 cannot)."""
    raw = await request.body()
    try:
        body = json.loads(raw)
    except RecursionError:  # the decoder's recursion ran out long before the bytes did
        raise _too_deep() from None
    except (ValueError, UnicodeDecodeError) as e:
        raise bad_request(f"the request body is not valid JSON: {e}", code="invalid_json") from e
    check_json(body)
    return body


def _too_deep() -> ApiError:
    return bad_request(f"the request body nests deeper than {MAX_DEPTH} levels", code="invalid_json")


def check_json(value: Any) -> None:
    """400 if `value` nests past MAX_DEPTH or holds a key or string that UTF-8 cannot encode."""
    stack = [(value, 1)]
    while stack:
        v, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise _too_deep()
        if isinstance(v, dict):
            stack.extend((x, depth + 1) for x in (*v.keys(), *v.values()))
        elif isinstance(v, list):
            stack.extend((x, depth + 1) for x in v)
        elif isinstance(v, str):
            try:
                v.encode("utf-8")
            except UnicodeEncodeError as e:
                bad = v[e.start:e.end].encode("unicode_escape").decode()
                raise bad_request(f"the request body holds text that is not valid Unicode (a lone surrogate {bad})",
                                  code="invalid_unicode") from None


async def wait_or_disconnect(request: Request, job: Job, timeout: float) -> Any:
    """The job's result; the job is cancelled if the client disconnects first (then this raises
    ApiError 499, which nobody reads) or after `timeout` (504)."""

    async def watch() -> None:
        while (await request.receive())["type"] != "http.disconnect":
            pass

    watcher = asyncio.create_task(watch())
    waiter = asyncio.create_task(job.wait(timeout))
    try:
        done, _ = await asyncio.wait({watcher, waiter}, return_when=asyncio.FIRST_COMPLETED)
        if waiter not in done:
            job.cancel()
            waiter.cancel()
            raise ApiError(499, "client closed the request", "cancelled", "client_closed")
        return waiter.result()
    finally:
        watcher.cancel()
