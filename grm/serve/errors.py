"""Errors the HTTP face answers, in the OpenAI error shape.

Every error body is `{"error": {"message": str, "type": str, "code": str | null, "param": str | null}}`,
the shape the official `openai` client parses into `openai.APIStatusError` subclasses. Handlers
raise `ApiError`; the app turns it (and GRM's typed errors, through `from_grm`) into that body.

What a client reads never names the server's store, its paths or credentials: a user mistake
(UserInputError, 400) keeps its message with those taken out (`public`); any other GRM error is a
500 that names only its type (the log has the message, passwords masked); a busy store
(StoreBusy) is a 503 with Retry-After.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Mapping

from starlette.responses import JSONResponse

from grm.errors import GrmError, StoreBusy, UserInputError, redact

log = logging.getLogger("grm.serve")
_URL = re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s'\"]+")
# an absolute or home-relative path: "/srv/grm/store", "~/x" (not "a/b", "1/2" or "tokens/s")
_PATH = re.compile(r"(?<![\w.~/])~?/[^\s'\",;()]+")


class ApiError(Exception):
    """An error answered to the client: HTTP status, message, OpenAI `type` and `code`."""

    def __init__(self, status: int, message: str, type_: str = "invalid_request_error", code: str | None = None,
                 param: str | None = None, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.type, self.code, self.param = status, message, type_, code, param
        self.headers = headers or {}

    def body(self) -> dict:
        return {"error": {"message": self.message, "type": self.type, "code": self.code, "param": self.param}}

    def response(self) -> JSONResponse:
        return JSONResponse(self.body(), status_code=self.status, headers=self.headers)


def bad_request(message: str, param: str | None = None, code: str | None = None) -> ApiError:
    return ApiError(400, message, "invalid_request_error", code, param)


def not_found(what: str, code: str = "not_found") -> ApiError:
    return ApiError(404, f"{what} not found", "invalid_request_error", code)


def public(message: str, hidden: Mapping[str, str] = {}) -> str:
    """`message` as a client may read it: each `hidden` string (the store's location, the model
    cache) replaced by its name, any other URL or absolute path by a placeholder."""
    for secret in sorted(hidden, key=len, reverse=True):
        if secret:
            message = message.replace(secret, hidden[secret])
    return _PATH.sub("<path>", _URL.sub("<url>", message))


def from_grm(exc: GrmError, hidden: Mapping[str, str] = {}) -> ApiError:
    """The API error a GRM error answers (see the module docstring)."""
    if isinstance(exc, StoreBusy):
        retry = max(1, math.ceil(exc.retry_after_s))
        return ApiError(503, f"this tenant's memory is being written by another process; retry in {retry} s",
                        "server_error", "store_busy", headers={"Retry-After": str(retry)})
    if isinstance(exc, UserInputError):
        message = public(str(exc), hidden)
        return ApiError(400, message, "invalid_request_error",
                        "context_length_exceeded" if "too long" in message else None)
    log.error("request failed: %s: %s", type(exc).__name__, redact(str(exc)))
    return ApiError(500, f"internal error ({type(exc).__name__}); the server log has the details", "server_error")
