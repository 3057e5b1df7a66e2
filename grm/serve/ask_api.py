"""GRM's own ask endpoint: a question over memory with `grm ask`'s modes, answered as `grm ask
--json` answers it (what the CLI sends a running server; grm/cli/remote.py).

    POST /v1/ask   {"question": S, "mode": auto|exact|exact-section|grafts|none|rag-text (default auto),
                    "max_new_tokens": N (default the server's 48), "model": NAME (optional: checked)}
                   -> 200 {"answer", "mode", "ttft_s", "total_s", "prompt_tokens", "tokens_from_memory",
                           "tokens_computed", "mounted", "lossy", "abstained", ...}: Answer.to_json()

The same runtime call as `grm ask` (Runtime.ask with the mode and the generation limit), on the
server's one worker; the caller's tenant only. Documents go in through POST /v1/documents.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from grm.runtime.config import ASK_MODES
from grm.serve.errors import ApiError, bad_request
from grm.serve.http import read_json, tenant_of, wait_or_disconnect


async def ask(request: Request) -> JSONResponse:
    tenant = tenant_of(request)
    body = await read_json(request)
    if not isinstance(body, dict):
        raise bad_request("the request body must be a JSON object")
    question = body.get("question")
    if not isinstance(question, str) or not question.strip():
        raise bad_request("'question' must be a non-empty string", param="question")
    mode = body.get("mode", "auto")
    if mode not in ASK_MODES:
        raise bad_request(f"'mode' must be one of {', '.join(ASK_MODES)}", param="mode")
    engine = request.app.state.engine
    max_new = body.get("max_new_tokens")
    if max_new is not None and (isinstance(max_new, bool) or not isinstance(max_new, int)
                                or not 1 <= max_new <= engine.max_positions):
        raise bad_request(f"'max_new_tokens' must be an integer in 1..{engine.max_positions}", param="max_new_tokens")
    model = body.get("model")
    if model is not None and model != engine.model_name:
        raise ApiError(404, f"the model {model!r} does not exist; this server serves {engine.model_name!r}",
                       "invalid_request_error", "model_not_found", "model")
    job = engine.ask(tenant, question, mode, max_new)
    return JSONResponse(await wait_or_disconnect(request, job, request.app.state.config.timeout_s))


ROUTES = [Route("/v1/ask", ask, methods=["POST"])]
