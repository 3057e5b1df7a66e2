"""The HTTP face: OpenAI-compatible endpoints, memory REST, metrics and a web memory inspector.

Modules: config (ServeConfig), auth (API keys -> tenants), engine (the one model worker; the
only module here that calls the runtime), prompts (request bodies, chat templates), openai_api,
memory_api, ask_api (`grm ask` over HTTP), metrics, ui (Jinja2 pages), http (auth, body limit,
waiting), app (the Starlette app), server (uvicorn), endpoint (the file in the store that tells
the CLI a server holds it). The rest of GRM imports only `endpoint` (the CLI, grm/cli/remote.py).
"""

from grm.serve.config import ServeConfig

__all__ = ["ServeConfig"]
