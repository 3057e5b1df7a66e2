"""A real server (uvicorn on a free loopback port, in a thread) over a tiny random model, with two
API keys: alice and bob."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pytest

MODEL = "tiny-random-llama"


@dataclass
class Srv:
    url: str
    keys: dict[str, str]  # tenant -> API key
    engine: object
    store: Path

    def headers(self, tenant: str = "alice") -> dict[str, str]:
        return {"Authorization": f"Bearer {self.keys[tenant]}"}

    def client(self, tenant: str = "alice"):
        import openai

        return openai.OpenAI(base_url=self.url + "/v1", api_key=self.keys[tenant], max_retries=0, timeout=60)


def start(tmp: Path, model: str = MODEL, runtime: dict | None = None, **serve_fields):
    from grm.runtime.config import RuntimeConfig
    from grm.serve.auth import add_key
    from grm.serve.config import ServeConfig
    from grm.serve.server import Background

    keys = {t: add_key(tmp / "keys.txt", t) for t in ("alice", "bob")}
    cache = Path(os.environ.get("GRM_CACHE", Path.home() / ".cache" / "grm"))
    rc = RuntimeConfig.from_options(store=tmp / "store", cache_dir=cache, model=model, threads=2, **(runtime or {}))
    bg = Background(rc, ServeConfig(port=0, keys=tmp / "keys.txt", **serve_fields))
    bg.__enter__()
    return bg, Srv(bg.url, keys, bg.engine, tmp / "store")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    bg, srv = start(tmp_path_factory.mktemp("serve"))
    yield srv
    bg.stop()


@pytest.fixture()
def fresh_server(tmp_path):
    """A server of its own (for tests that change the queue, timeouts or stop it)."""
    started = []

    def make(**fields):
        bg, srv = start(tmp_path, **fields)
        started.append(bg)
        return srv

    yield make
    for bg in started:
        bg.stop()
