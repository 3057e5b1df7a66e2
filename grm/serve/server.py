"""Running the app under uvicorn: `serve(...)` for `grm serve` (blocks; SIGTERM/SIGINT drain),
and `Background` for tests and benchmarks (a server on a free loopback port in a thread)."""

from __future__ import annotations

import logging
import signal
import socket
import sys
import threading
import time
from typing import Any

import uvicorn

from grm.errors import redact_logs
from grm.serve.app import Starting, create_app
from grm.serve.auth import KeyRing
from grm.serve.config import ServeConfig
from grm.serve.engine import Engine
from grm.serve.metrics import Metrics

log = logging.getLogger("grm.serve")


def build(runtime_config: Any, config: ServeConfig, engine: Engine | None = None) -> tuple[Any, Engine]:
    """(app, engine): keys loaded, model loaded, store opened, worker started."""
    keyring = KeyRing.load(config.keys) if config.keys is not None else None
    metrics = Metrics()
    if engine is None:
        engine = Engine.open(runtime_config, config, metrics)
    else:
        engine.metrics = metrics
        metrics.bind_engine(engine)
    engine.start()
    return create_app(engine, config, keyring, metrics), engine


def _uvicorn(app: Any, config: ServeConfig, port: int, fd: int | None = None) -> uvicorn.Server:
    return uvicorn.Server(uvicorn.Config(app, host=config.host, port=port, fd=fd, log_level="warning",
                                         timeout_graceful_shutdown=int(config.drain_s) or None,
                                         lifespan="on", access_log=False))


def serve(runtime_config: Any, config: ServeConfig) -> int:
    """Listen at once (GET /healthz answers, /readyz says 503) while the model loads in a thread;
    answer until SIGTERM or SIGINT; then finish in-flight requests and close the store. A load
    failure stops the server and is raised here (the CLI prints it as one line, exit 2)."""
    keyring = KeyRing.load(config.keys) if config.keys is not None else None
    metrics = Metrics()
    app = create_app(Starting(), config, keyring, metrics)
    server = _uvicorn(app, config, config.port)
    redact_logs("uvicorn", "uvicorn.error", "uvicorn.access")  # uvicorn's handlers exist from here on
    failed: list[BaseException] = []

    def load() -> None:
        try:
            engine = Engine.open(runtime_config, config, metrics).start()
        except BaseException as e:  # raised in the main thread once the server stopped
            failed.append(e)
            server.should_exit = True
            return
        app.state.engine = engine
        print(f"grm serve: {engine.model_name} ready on http://{config.host}:{config.port}/v1 "
              f"({'no auth, tenant ' + config.tenant if config.no_auth else 'API keys from ' + str(config.keys)}); "
              "inspector at /ui", file=sys.stderr)

    # uvicorn drains on SIGTERM/SIGINT, then re-raises the signal to the handler it found: make that
    # one a no-op so a drained server exits 0 instead of dying by the signal.
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: None)
    threading.Thread(target=load, name="grm-serve-load", daemon=True).start()
    server.run()
    if failed:
        raise failed[0]
    return 0 if server.started else 2


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


class Background:
    """A server in a background thread: `with Background(runtime_config, config) as srv:
    srv.url ...`; leaving the block shuts it down gracefully (as SIGTERM does)."""

    def __init__(self, runtime_config: Any, config: ServeConfig, engine: Engine | None = None) -> None:
        self.app, self.engine = build(runtime_config, config, engine)
        self.port = config.port or free_port(config.host)
        self.url = f"http://{config.host}:{self.port}"
        self.server = _uvicorn(self.app, config, self.port)
        self.server.install_signal_handlers = lambda: None  # not the main thread
        self.thread = threading.Thread(target=self.server.run, name="grm-serve", daemon=True)

    def __enter__(self) -> "Background":
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the server did not start")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(60)

    def __exit__(self, *exc: object) -> None:
        self.stop()
