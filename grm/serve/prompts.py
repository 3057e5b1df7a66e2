"""OpenAI request bodies -> what GRM reads: validation, and chat messages rendered as one prompt.

Chat messages are rendered with the model's own chat template (the HF tokenizer's
`apply_chat_template`, add_generation_prompt=True), the runtime's system message first where the
chat has none (`render_chat`). A model without one (the tiny test models) gets ChatML, SmolLM2's
format:

    <|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n

Both put every earlier turn before the new one byte for byte, so the prompt of turn N is a prefix
of the prompt of turn N+1 (the client resends the answer it got): the blocks stored for turn N
are what turn N+1 starts with, and they load from memory.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from grm.runtime.config import ASK_MODES
from grm.serve.errors import bad_request

ROLES = ("system", "developer", "user", "assistant", "tool")
MAX_STOPS = 4


@dataclass(frozen=True)
class Params:
    model: str
    max_tokens: int
    stops: tuple[str, ...]
    stream: bool
    include_usage: bool
    memory: bool
    mode: str  # the runtime's ask mode (completions may pick one; chat is always exact)


def _int(body: dict, name: str, default: int, lo: int, hi: int) -> int:
    v = body.get(name)
    if v is None:
        return default
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
        raise bad_request(f"'{name}' must be an integer in {lo}..{hi}, got {v!r}", param=name)
    return v


def parse_params(body: Any, default_max_tokens: int, token_limit: int) -> Params:
    """The fields both endpoints share. Greedy generation only: temperature must be 0 (or absent),
    top_p 1, n 1."""
    if not isinstance(body, dict):
        raise bad_request("the request body must be a JSON object")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise bad_request("'model' is required (GET /v1/models lists it)", param="model")
    max_tokens = _int(body, "max_completion_tokens", 0, 1, token_limit) or _int(
        body, "max_tokens", default_max_tokens, 1, token_limit)
    temperature = body.get("temperature", 0)
    if temperature is not None and (isinstance(temperature, bool) or not isinstance(temperature, (int, float))
                                    or temperature != 0):
        raise bad_request(f"only greedy decoding is implemented: 'temperature' must be 0, got {temperature!r}",
                          param="temperature", code="unsupported_value")
    top_p = body.get("top_p", 1)
    if top_p is not None and top_p != 1:
        raise bad_request("only greedy decoding is implemented: 'top_p' must be 1", param="top_p",
                          code="unsupported_value")
    if body.get("n", 1) not in (1, None):
        raise bad_request("'n' must be 1", param="n", code="unsupported_value")
    stop = body.get("stop")
    if stop is None:
        stops: tuple[str, ...] = ()
    elif isinstance(stop, str):
        stops = (stop,)
    elif isinstance(stop, list) and all(isinstance(s, str) for s in stop) and len(stop) <= MAX_STOPS:
        stops = tuple(stop)
    else:
        raise bad_request(f"'stop' must be a string or a list of at most {MAX_STOPS} strings", param="stop")
    if any(not s for s in stops):
        raise bad_request("'stop' strings must not be empty", param="stop")
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise bad_request("'stream' must be a boolean", param="stream")
    opts = body.get("stream_options") or {}
    if not isinstance(opts, dict):
        raise bad_request("'stream_options' must be an object", param="stream_options")
    ext = body.get("grm") or {}
    if not isinstance(ext, dict) or not isinstance(ext.get("memory", True), bool):
        raise bad_request("'grm' must be an object like {\"memory\": false}", param="grm")
    mode = ext.get("mode", "exact")
    if mode not in ASK_MODES:
        raise bad_request(f"'grm.mode' must be one of {', '.join(ASK_MODES)}", param="grm")
    return Params(model, max_tokens, stops, stream, bool(opts.get("include_usage")), ext.get("memory", True), mode)


def completion_prompt(body: dict) -> str:
    prompt = body.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
        prompt = prompt[0]
    if not isinstance(prompt, str) or not prompt:
        raise bad_request("'prompt' must be a non-empty string (one prompt per request)", param="prompt")
    return prompt


def _content(msg: dict, i: int) -> str:
    c = msg.get("content")
    if isinstance(c, str):
        return c
    if isinstance(c, list):  # [{"type": "text", "text": ...}, ...]
        parts = []
        for part in c:
            if not isinstance(part, dict) or part.get("type") != "text" or not isinstance(part.get("text"), str):
                raise bad_request(f"messages[{i}].content: only text parts are supported", param="messages")
            parts.append(part["text"])
        return "".join(parts)
    if c is None and msg.get("role") == "assistant":
        return ""
    raise bad_request(f"messages[{i}].content must be a string or a list of text parts", param="messages")


def chat_messages(body: dict) -> list[dict[str, str]]:
    msgs = body.get("messages")
    if not isinstance(msgs, list) or not msgs:
        raise bad_request("'messages' must be a non-empty list", param="messages")
    out = []
    for i, m in enumerate(msgs):
        if not isinstance(m, dict) or m.get("role") not in ROLES:
            raise bad_request(f"messages[{i}] needs a 'role' in {', '.join(ROLES)}", param="messages")
        role = "system" if m["role"] == "developer" else m["role"]
        out.append({"role": role, "content": _content(m, i)})
    if out[-1]["role"] != "user":
        raise bad_request("the last message must be the user's", param="messages")
    return out


def chatml(messages: list[dict[str, str]]) -> str:
    turns = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)
    return turns + "<|im_start|>assistant\n"


def render_chat(tokenizer: Any, messages: list[dict[str, str]]) -> str:
    """The prompt text for `messages`: the model's chat template, else ChatML. A chat without a
    system message of its own gets the runtime's (RuntimeConfig.system, the one the sinks read),
    so its prompt starts with the sinks' bytes and its memory is served."""
    template = getattr(tokenizer, "template", None)
    if template is not None and (not messages or messages[0]["role"] not in ("system", "developer")):
        messages = [{"role": "system", "content": template.system}, *messages]
    hf = getattr(tokenizer, "_tok", None)  # grm.models.tokenizer.HFTokenizer wraps the HF tokenizer
    if hf is not None and getattr(hf, "chat_template", None):
        return hf.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    return chatml(messages)

