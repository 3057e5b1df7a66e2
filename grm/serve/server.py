"""Running the app under uvicorn: `serve(...)` for `grm serve` (blocks; SIGTERM/SIGINT drain),
and `Background` for tests and benchmarks (a server on a free loopback port in a thread)."""

from __future__ import annotations

import logging
import os
import signal
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any

import uvicorn

from grm.errors import redact_logs
from grm.runtime.admin import store_folder
from grm.serve import endpoint
from grm.serve.app import Starting, create_app
from grm.serve.auth import KeyRing
from grm.serve.config import ServeConfig
from grm.serve.engine import Engine
from grm.serve.metrics import Metrics

log = logging.getLogger("grm.serve")
# RuntimeConfig fields a request cannot change: a CLI call asking for other values is refused
# (grm/cli/remote.py), never answered differently.
SETTINGS = ("block_tokens", "section_tokens", "graft_k", "repair", "blend", "reread", "lead", "extractor",
            "rules", "later", "meaning", "durability", "compress", "threads", "system")


def build(runtime_config: Any, config: ServeConfig, engine: Engine | None = None,
          local: str | None = None) -> tuple[Any, Engine]:
    """(app, engine): keys loaded, model loaded, store opened, worker started; `local` the
    store owner's credential (grm/serve/endpoint.py)."""
    keyring = KeyRing.load(config.keys) if config.keys is not None else None
    metrics = Metrics()
    if engine is None:
        engine = Engine.open(runtime_config, config, metrics)
    else:
        engine.metrics = metrics
        metrics.bind_engine(engine)
    engine.start(served_tenants(config, keyring))
    return create_app(engine, config, keyring, metrics, local), engine


def served_tenants(config: ServeConfig, keyring: KeyRing | None) -> list[str]:
    """The tenants this server answers for, as it starts: its keys' (they can be added while it
    runs), or the one tenant of an unauthenticated server."""
    return keyring.tenants if keyring is not None else [config.tenant]


def _uvicorn(app: Any, config: ServeConfig, port: int, fd: int | None = None) -> uvicorn.Server:
    return uvicorn.Server(uvicorn.Config(app, host=config.host, port=port, fd=fd, log_level="warning",
                                         timeout_graceful_shutdown=int(config.drain_s) or None,
                                         lifespan="on", access_log=False))


def local_root(runtime_config: Any) -> Path | None:
    """The store folder an endpoint file goes in; None for a Redis store (no folder to share)."""
    return store_folder(runtime_config.store)


def endpoint_info(runtime_config: Any, config: ServeConfig, engine: Engine, port: int, token: str) -> dict:
    """What the endpoint file says of this server (grm/serve/endpoint.py)."""
    from grm.runtime.locations import DEFAULT_MODEL

    rc, model = runtime_config, runtime_config.model
    if Path(model).expanduser().exists():
        model = str(Path(model).expanduser().resolve())
    lm = engine.rt.lm
    settings = {name: getattr(rc, name) for name in SETTINGS}
    settings["store_budget"] = config.store_budget
    return {"pid": os.getpid(), "host": config.host, "port": port, "model": model, "model_name": lm.name,
            "default_model": rc.model == DEFAULT_MODEL or lm.name == DEFAULT_MODEL,
            "dtype": str(lm.model.dtype).removeprefix("torch."), "device": str(lm.device),
            "tenant": config.tenant, "sealed": rc.master_key is not None, "token": token, "settings": settings}


def loading_info(runtime_config: Any, config: ServeConfig, port: int, token: str) -> dict:
    """What the endpoint file says while the model loads: where to wait, not yet what it serves."""
    return {"pid": os.getpid(), "host": config.host, "port": port, "tenant": config.tenant,
            "sealed": runtime_config.master_key is not None, "token": token, "loading": True}


def publish(app: Any, runtime_config: Any, config: ServeConfig, engine: Engine | None, port: int,
            token: str) -> None:
    """Write the endpoint file into a local store: the loading one (`engine` None), then the
    whole one (a failure is logged: the server still answers)."""
    root = local_root(runtime_config)
    if root is None or engine is None and not Path(root).is_dir():  # a new store is made by the load
        return
    info = (loading_info(runtime_config, config, port, token) if engine is None
            else endpoint_info(runtime_config, config, engine, port, token))
    try:
        app.state.endpoint = endpoint.publish(root, info)
    except OSError as e:
        log.warning("cannot write the endpoint file in the store (%s); grm ask/ingest will not find this server",
                    e.strerror or e)


def serve(runtime_config: Any, config: ServeConfig) -> int:
    """Listen at once (GET /healthz answers, /readyz says 503) while the model loads in a thread;
    once the port listens, publish the endpoint file as loading (grm/serve/endpoint.py: a `grm ask`
    meanwhile waits for this server instead of failing on the store's lock), and once the model is
    loaded, publish it whole; answer until SIGTERM or SIGINT; then withdraw the file, finish
    in-flight requests and close the store. A load failure stops the server and is raised here (the
    CLI prints it as one line, exit 2)."""
    keyring = KeyRing.load(config.keys) if config.keys is not None else None
    metrics = Metrics()
    token = endpoint.new_token()
    app = create_app(Starting(), config, keyring, metrics, endpoint.credential(token, runtime_config.master_key))
    server = _uvicorn(app, config, config.port)
    redact_logs("uvicorn", "uvicorn.error", "uvicorn.access")  # uvicorn's handlers exist from here on
    failed: list[BaseException] = []

    def load() -> None:
        while not server.started and not server.should_exit:  # the port listens before the file says so
            time.sleep(0.02)
        if server.should_exit:
            return
        port = _bound_port(server, config.port)
        publish(app, runtime_config, config, None, port, token)
        try:
            engine = Engine.open(runtime_config, config, metrics).start(served_tenants(config, keyring))
        except BaseException as e:  # raised in the main thread once the server stopped
            failed.append(e)
            server.should_exit = True
            return
        app.state.engine = engine
        if server.should_exit:
            return
        publish(app, runtime_config, config, engine, port, token)
        print(f"grm serve: {engine.model_name} ready on http://{config.host}:{port}/v1 "
              f"({'no auth, tenant ' + config.tenant if config.no_auth else 'API keys from ' + str(config.keys)}); "
              "inspector at /ui", file=sys.stderr)

    # uvicorn drains on SIGTERM/SIGINT, then re-raises the signal to the handler it found: make that
    # one a no-op so a drained server exits 0 instead of dying by the signal.
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: None)
    threading.Thread(target=load, name="grm-serve-load", daemon=True).start()
    try:
        server.run()
    finally:
        if app.state.endpoint is not None:
            app.state.endpoint.withdraw()
    if failed:
        raise failed[0]
    return 0 if server.started else 2


def _bound_port(server: uvicorn.Server, port: int) -> int:
    """The port uvicorn listens on (`port`, or the one the OS chose for 0)."""
    for srv in getattr(server, "servers", ()):
        for sock in srv.sockets:
            return int(sock.getsockname()[1])
    return port


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


class Background:
    """A server in a background thread: `with Background(runtime_config, config) as srv:
    srv.url ...`; leaving the block shuts it down gracefully (as SIGTERM does). `publish=True`
    writes the endpoint file into the store as `grm serve` does (tests of the CLI's way to it)."""

    def __init__(self, runtime_config: Any, config: ServeConfig, engine: Engine | None = None,
                 publish: bool = False) -> None:
        self.runtime_config, self.config, self.publish = runtime_config, config, publish
        self.token = endpoint.new_token()
        self.app, self.engine = build(runtime_config, config, engine,
                                      endpoint.credential(self.token, runtime_config.master_key))
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
        if self.publish:
            publish(self.app, self.runtime_config, self.config, self.engine, self.port, self.token)
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(60)

    def __exit__(self, *exc: object) -> None:
        self.stop()
