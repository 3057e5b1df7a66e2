"""Shared fixtures: tiny random models (built once per session) and runtimes on temp stores."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

# Tests never use all cores blindly: two threads, like CI's machine.
os.environ.setdefault("OMP_NUM_THREADS", "2")

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def tiny_models():
    """name -> LoadedModel for the three tiny random families."""
    from grm.models import load_model

    cache = Path(os.environ.get("GRM_CACHE", Path.home() / ".cache" / "grm"))
    return {n: load_model(f"tiny-random-{n}", cache) for n in ("llama", "gemma3", "gpt2")}


@pytest.fixture()
def make_runtime(tmp_path):
    """Factory: make_runtime(model="tiny-random-llama", tenant="default", store=None) -> Runtime."""
    from grm.runtime import Runtime

    opened = []

    def make(model: str = "tiny-random-llama", tenant: str = "default", store: Path | None = None, **kw):
        kw.setdefault("device", "cpu")  # the suite's bit-identity checks are CPU's; GPU tests are marked `gpu`
        rt = Runtime.open(store=store or tmp_path / "store", model=model, tenant=tenant, threads=2, **kw)
        opened.append(rt)
        return rt

    yield make
    for rt in opened:
        try:
            rt.close()
        except Exception:
            pass


@contextmanager
def forward_reads(rt) -> Iterator[list[tuple[int, list[int]]]]:
    """Every forward call the runtime's model makes inside the block, decoding aside (what
    `rt.reads` counts), as (its first seat, its token ids): which text the model read where, and
    how many times."""
    calls: list[tuple[int, list[int]]] = []

    def hook(module, args, kwargs) -> None:
        if not rt.reads.paused_depth:
            calls.append((int(kwargs["position_ids"][0, 0]), kwargs["input_ids"][0].tolist()))

    handle = rt.lm.model.register_forward_pre_hook(hook, with_kwargs=True)
    try:
        yield calls
    finally:
        handle.remove()


def lorem(n_paragraphs: int, seed: int = 0) -> str:
    """Deterministic English-like text with paragraph structure."""
    import random

    rng = random.Random(seed)
    words = ("the station harbor seal boat winter river orchard apple robot wheel sensor light team "
             "morning water temperature village market frost meeting member record north south").split()
    paras = []
    for _ in range(n_paragraphs):
        sents = []
        for _ in range(rng.randint(2, 5)):
            s = " ".join(rng.choice(words) for _ in range(rng.randint(5, 14)))
            sents.append(s.capitalize() + rng.choice([".", ".", "!", "?"]))
        paras.append(" ".join(sents))
    return "\n\n".join(paras) + "\n"


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory) -> str:
    """A real redis-server on a free loopback port, for this test session (skipped, with the
    reason, when redis-server or the redis package is missing)."""
    redis = pytest.importorskip("redis", reason="the redis package is not installed (pip install redis==8.1.0)")
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed (apt-get install redis-server)")
    port = free_port()
    proc = start_redis(port, tmp_path_factory.mktemp("redis"))
    yield f"redis://127.0.0.1:{port}/0"
    proc.terminate()
    proc.wait(10)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_redis(port: int, work: Path, appendonly: str = "no", appendfsync: str = "everysec",
                password: str | None = None) -> subprocess.Popen:
    """redis-server on 127.0.0.1:`port` with its files in `work` (and `password` required, if
    given), answering PING when returned."""
    import redis

    auth = ["--requirepass", password] if password else []
    proc = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                             "--appendonly", appendonly, "--appendfsync", appendfsync, "--dir", str(work), *auth],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    client = redis.Redis(port=port, password=password)
    deadline = time.monotonic() + 10
    while True:
        try:
            client.ping()
            client.close()
            return proc
        except redis.ConnectionError:
            if time.monotonic() > deadline or proc.poll() is not None:
                proc.kill()
                pytest.fail("redis-server did not start")
            time.sleep(0.02)
