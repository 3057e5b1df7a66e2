"""Errors the HTTP face answers, in the OpenAI error shape.

Every error body is `{"error": {"message": str, "type": str, "code": str | null, "param": str | null}}`,
the shape the official `openai` client parses into `openai.APIStatusError` subclasses. Handlers
raise `ApiError`; the app turns it (and GRM's typed errors) into that body.
"""

from __future__ import annotations

from starlette.responses import JSONResponse


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
