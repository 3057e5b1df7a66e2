"""The HTTP face: OpenAI-compatible endpoints, memory REST, metrics and a web memory inspector.

Modules: config (ServeConfig), auth (API keys -> tenants), engine (the one model worker; the
only module here that calls the runtime), prompts (request bodies, chat templates), openai_api,
memory_api, metrics, ui (Jinja2 pages), http (auth, body limit, waiting), app (the Starlette
app), server (uvicorn). Nothing here is imported by the rest of GRM.
"""

from grm.serve.config import ServeConfig

__all__ = ["ServeConfig"]
