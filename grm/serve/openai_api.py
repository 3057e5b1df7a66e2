"""OpenAI-compatible endpoints: GET /v1/models, POST /v1/chat/completions, POST /v1/completions.

Non-streaming answers are one JSON object; `"stream": true` answers server-sent events, one
`data: {chunk}` per new piece of text, a last chunk with `finish_reason` and the `grm` extension,
a usage chunk when `stream_options.include_usage`, then `data: [DONE]`. Usage:
`prompt_tokens` counts every token in context before generation (the sinks included),
`prompt_tokens_details.cached_tokens` those served from stored K/V. A client that disconnects
cancels its generation; a request past the server's timeout gets 504 (or an error event).
"""

from __future__ import annotations

import asyncio
import json
import secrets
import time
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from grm.serve.engine import Job
from grm.serve.errors import ApiError, bad_request
from grm.serve.generation import GenRequest, GenResult
from grm.serve.http import read_json, tenant_of, wait_or_disconnect
from grm.serve.prompts import Params, chat_messages, completion_prompt, parse_params, render_chat

_DONE = object()


def _usage(res: GenResult) -> dict:
    return {"prompt_tokens": res.prompt_tokens, "completion_tokens": res.completion_tokens,
            "total_tokens": res.prompt_tokens + res.completion_tokens,
            "prompt_tokens_details": {"cached_tokens": res.tokens_from_memory}}


def _finish(res: GenResult) -> str:
    return "length" if res.finish_reason == "length" else "stop"


async def models(request: Request) -> JSONResponse:
    tenant_of(request)
    engine = request.app.state.engine
    return JSONResponse({"object": "list", "data": [
        {"id": engine.model_name, "object": "model", "created": request.app.state.started, "owned_by": "grm"}]})


def _check(request: Request, body: Any) -> Params:
    engine = request.app.state.engine
    params = parse_params(body, request.app.state.config.max_tokens, engine.max_positions)
    if params.model != engine.model_name:
        raise ApiError(404, f"the model {params.model!r} does not exist; this server serves {engine.model_name!r}",
                       "invalid_request_error", "model_not_found", "model")
    return params


async def chat_completions(request: Request) -> Any:
    tenant = tenant_of(request)
    body = await read_json(request)
    params = _check(request, body)
    messages = chat_messages(body)
    if params.mode != "exact":
        raise bad_request("chat completions read the conversation in exact mode; 'grm.mode' is for /v1/completions",
                          param="grm")
    engine = request.app.state.engine
    prompt = render_chat(engine.tokenizer(), messages)
    req = GenRequest(prompt, params.max_tokens, params.stops, params.memory, messages[-1]["content"], "chat")
    return await _answer(request, tenant, req, params, chat=True)


async def completions(request: Request) -> Any:
    tenant = tenant_of(request)
    body = await read_json(request)
    params = _check(request, body)
    prompt = completion_prompt(body)
    if body.get("echo") or body.get("suffix") or body.get("logprobs"):
        raise bad_request("echo, suffix and logprobs are not supported", code="unsupported_value")
    req = GenRequest(prompt, params.max_tokens, params.stops, params.memory, None, "completions", params.mode)
    return await _answer(request, tenant, req, params, chat=False)


async def _answer(request: Request, tenant: str, req: GenRequest, params: Params, chat: bool) -> Any:
    engine, timeout = request.app.state.engine, request.app.state.config.timeout_s
    rid = ("chatcmpl-" if chat else "cmpl-") + secrets.token_hex(12)
    created = int(time.time())
    if params.stream:
        loop = asyncio.get_running_loop()
        q: asyncio.Queue = asyncio.Queue()
        job = engine.complete(tenant, req, lambda d: loop.call_soon_threadsafe(q.put_nowait, d))
        job.future.add_done_callback(lambda _f: loop.call_soon_threadsafe(q.put_nowait, _DONE))
        return EventStream(job, q, Chunks(rid, created, engine.model_name, chat, params.include_usage), timeout)
    job = engine.complete(tenant, req)
    res: GenResult = await wait_or_disconnect(request, job, timeout)
    if chat:
        choice = {"index": 0, "message": {"role": "assistant", "content": res.text}, "logprobs": None,
                  "finish_reason": _finish(res)}
        obj = "chat.completion"
    else:
        choice = {"index": 0, "text": res.text, "logprobs": None, "finish_reason": _finish(res)}
        obj = "text_completion"
    return JSONResponse({"id": rid, "object": obj, "created": created, "model": engine.model_name,
                         "choices": [choice], "usage": _usage(res), "grm": res.grm})


class Chunks:
    """The SSE chunk objects of one streamed answer."""

    def __init__(self, rid: str, created: int, model: str, chat: bool, include_usage: bool) -> None:
        self.rid, self.created, self.model, self.chat, self.include_usage = rid, created, model, chat, include_usage

    def _wrap(self, choices: list, **extra: Any) -> dict:
        return {"id": self.rid, "object": "chat.completion.chunk" if self.chat else "text_completion",
                "created": self.created, "model": self.model, "choices": choices, **extra}

    def _choice(self, text: str | None, finish: str | None, role: bool = False) -> dict:
        if self.chat:
            delta: dict = {} if text is None else {"content": text}
            if role:
                delta["role"] = "assistant"
            return {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return {"index": 0, "text": text or "", "logprobs": None, "finish_reason": finish}

    def first(self) -> dict | None:
        return self._wrap([self._choice("", None, role=True)]) if self.chat else None

    def delta(self, text: str) -> dict:
        return self._wrap([self._choice(text, None)])

    def last(self, res: GenResult) -> list[dict]:
        out = [self._wrap([self._choice(None if self.chat else "", _finish(res))], grm=res.grm)]
        if self.include_usage:
            out.append(self._wrap([], usage=_usage(res)))
        return out


def _event(obj: dict) -> bytes:
    return b"data: " + json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode() + b"\n\n"


class EventStream:
    """An ASGI response streaming one job's pieces as server-sent events; it cancels the job when
    the client disconnects or the timeout passes."""

    def __init__(self, job: Job, q: asyncio.Queue, chunks: Chunks, timeout: float) -> None:
        self.job, self.q, self.chunks, self.timeout = job, q, chunks, timeout

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        async def watch() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass
            self.job.cancel()

        watcher = asyncio.create_task(watch())
        deadline = time.monotonic() + self.timeout
        try:
            item = await self._next(deadline)
            if item is None or (item is _DONE and self.job.future.exception() is not None):
                # no piece yet (timed out, too long, ...): a plain error response with its status
                self.job.cancel()
                err = _timeout(self.timeout) if item is None else _error(self.job.future.exception())
                await err.response()(scope, receive, send)
                return
            await send({"type": "http.response.start", "status": 200, "headers": [
                (b"content-type", b"text/event-stream; charset=utf-8"), (b"cache-control", b"no-cache"),
                (b"x-accel-buffering", b"no")]})
            first = self.chunks.first()
            if first is not None:
                await self._send(send, _event(first))
            while item is not None:
                if item is _DONE:
                    await self._finish(send)
                    break
                await self._send(send, _event(self.chunks.delta(item)))
                item = await self._next(deadline)
            if item is None:  # timed out
                self.job.cancel()
                await self._send(send, _event(_timeout(self.timeout).body()))
            await self._send(send, b"data: [DONE]\n\n")
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        except OSError:  # the client is gone
            self.job.cancel()
        finally:
            watcher.cancel()
            if not self.job.future.done():
                self.job.cancel()

    async def _next(self, deadline: float) -> Any:
        """The next piece, _DONE, or None when the deadline passed."""
        try:
            return await asyncio.wait_for(self.q.get(), max(0.0, deadline - time.monotonic()))
        except asyncio.TimeoutError:
            return None

    async def _send(self, send: Any, data: bytes) -> None:
        await send({"type": "http.response.body", "body": data, "more_body": True})

    async def _finish(self, send: Any) -> None:
        exc = self.job.future.exception()
        if exc is None:
            for chunk in self.chunks.last(self.job.future.result()):
                await self._send(send, _event(chunk))
            return
        await self._send(send, _event(_error(exc).body()))


def _timeout(seconds: float) -> ApiError:
    return ApiError(504, f"request not answered within {seconds:g} s", "timeout_error", "request_timeout")


def _error(exc: BaseException) -> ApiError:
    """A job's exception as the API error it answers (the worker made GRM's errors ApiErrors)."""
    if isinstance(exc, ApiError):
        return exc
    return ApiError(500, "internal error while generating", "server_error")


ROUTES = [
    Route("/v1/models", models, methods=["GET"]),
    Route("/v1/chat/completions", chat_completions, methods=["POST"]),
    Route("/v1/completions", completions, methods=["POST"]),
]
