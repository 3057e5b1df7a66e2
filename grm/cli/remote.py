"""Sending `grm ask` and `grm ingest` to a `grm serve` running on the same store, instead of
loading the model again (and failing on the store's lock).

`find(args, settings)` reads the store's endpoint file (grm/serve/endpoint.py) and returns the
`Server` to send the request to, or None when no server holds the store: no file, or a stale one
(its pid dead, its port refusing), which is removed. A server still loading its model (its file
says `loading`) is waited for, with one line saying so, up to LOAD_WAIT_S. A flag the server
cannot honour ends in one line naming the server, never in an answer computed differently: another
model, dtype or device, another master key, or a setting it runs with (`settings`: the command's
own, by RuntimeConfig field). Requests use the server's own API over urllib (POST /v1/ask; POST
/v1/documents, then GET /v1/jobs/ID), with the store owner's local credential. `locked(...)` is
the store's lock error naming the server that holds it. Imports nothing heavy: a call sent to a
server stays fast.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Callable

from grm.cli.common import master_key, store_root
from grm.cli.terminal import say
from grm.errors import GrmError, StoreLocked, UserInputError
from grm.serve import endpoint

PROBE_TIMEOUT_S = 10.0  # /readyz and job polls; an answer may take as long as the server allows
POLL_S = (0.05, 0.5)  # job polling interval: first, most
LOAD_WAIT_S = 600.0  # the longest a command waits for a server loading its model (a first load prepares it)


class Server:
    """A running `grm serve` on this store, as its endpoint file names it."""

    def __init__(self, info: dict, tenant: str, key: bytes | None) -> None:
        self.info, self.tenant = info, tenant
        self.url, self.address, self.pid = endpoint.url(info), endpoint.address(info), info["pid"]
        self._credential = endpoint.credential(info["token"], key if info.get("sealed") else None)

    @property
    def name(self) -> str:
        return f"the running grm serve at {self.address} (pid {self.pid})"

    def announce(self) -> None:
        say(f"grm: served by {self.name}", file=sys.stderr)

    def request(self, method: str, path: str, body: dict | None = None, timeout: float | None = None) -> Any:
        """The JSON answer of `method path`; one-line errors that name the server."""
        data = None if body is None else json.dumps(body, ensure_ascii=False).encode("utf-8")
        req = urllib.request.Request(self.url + path, data=data, method=method, headers={
            "Authorization": f"Bearer {self._credential}", endpoint.TENANT_HEADER: self.tenant,
            "Content-Type": "application/json", "Accept": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                return json.loads(resp.read())
        except urllib.error.HTTPError as e:
            raise self._error(e.code, _message(e)) from None
        except (urllib.error.URLError, OSError) as e:
            why = getattr(e, "reason", e)
            raise GrmError(f"{self.name} did not answer: {why}") from None

    def _error(self, status: int, message: str) -> GrmError:
        if status == 401:
            return UserInputError(f"{self.name} refused this store's local credential"
                                  f"{' (a different master key?)' if self.info.get('sealed') else ''}")
        if status < 500:
            return UserInputError(f"{self.name}: {message}")
        return GrmError(f"{self.name} failed: {message}")

    def ready(self) -> bool | None:
        """True when it answers ready with the model its file names; False while it loads or
        drains; None when nothing listens there (a stale file) or another server does."""
        try:
            with urllib.request.urlopen(self.url + "/readyz", timeout=PROBE_TIMEOUT_S) as resp:
                doc = json.loads(resp.read())
        except urllib.error.HTTPError as e:
            return False if e.code == 503 else None
        except (urllib.error.URLError, OSError, ValueError):
            return None
        return doc.get("model") == self.info.get("model_name") or None

    # ----- the calls -------------------------------------------------------------------------
    def ask(self, question: str, mode: str, max_new_tokens: int) -> dict:
        """`grm ask`'s answer as Answer.to_json() (grm/serve/ask_api.py)."""
        return self.request("POST", "/v1/ask", {"question": question, "mode": mode, "max_new_tokens": max_new_tokens,
                                                "model": self.info.get("model_name")})

    def ingest(self, name: str, text: str, layout: str, progress: Callable[[int, int], None] | None = None) -> dict:
        """Store one document through an ingest job; its result (tokens, blocks, computed,
        stored_bytes, truncated_bytes). Ctrl-C cancels the job (what it stored is removed)."""
        job = self.request("POST", "/v1/documents", {"name": name, "text": text, "layout": layout},
                           timeout=PROBE_TIMEOUT_S * 6)
        wait = POLL_S[0]
        try:
            while job["status"] in ("queued", "running", "cancelling"):
                time.sleep(wait)
                wait = min(POLL_S[1], wait * 1.5)
                job = self.request("GET", f"/v1/jobs/{job['id']}", timeout=PROBE_TIMEOUT_S)
                if progress is not None:
                    progress(job["progress"]["done"], job["progress"]["total"])
        except KeyboardInterrupt:
            try:
                self.request("POST", f"/v1/jobs/{job['id']}/cancel", timeout=PROBE_TIMEOUT_S)
            finally:
                raise KeyboardInterrupt from None
        if job["status"] != "done" or not isinstance(job.get("result"), dict):
            raise GrmError(f"{self.name}: ingest of {name} {job['status']}: {job.get('error') or 'no result'}")
        return job["result"]


def _message(e: urllib.error.HTTPError) -> str:
    try:
        return str(json.loads(e.read())["error"]["message"])
    except (ValueError, KeyError, TypeError, OSError):
        return f"HTTP {e.code}"


def _endpoint(root: Path | str) -> dict | None:
    """The store's endpoint file (None if none, or one not to trust: a warning says so)."""
    if isinstance(root, str):  # a redis:// store has no folder to share
        return None
    try:
        return endpoint.read(root)
    except endpoint.Unsafe as e:
        say(f"grm: warning: ignoring {e}", file=sys.stderr)
        return None


def find(args: argparse.Namespace, settings: dict[str, tuple[str, object]]) -> Server | None:
    """The running server to send this command to, or None (see the module docstring).
    `settings`: RuntimeConfig field -> (its flag, the value this command asks for)."""
    from grm.runtime.admin import check_tenant

    root = store_root(args)
    info = _endpoint(root)
    if info is None:
        return None
    tenant = check_tenant(args.tenant)
    if not endpoint.pid_alive(info["pid"]):
        endpoint.remove_if_same(endpoint.path_for(root), info["token"])
        return None
    if info.get("loading"):
        info = _loaded(root, Server(info, tenant, None))
        if info is None:
            return None
    server = Server(info, tenant, None)
    ready = server.ready()
    if ready is None:  # nothing listens there (stale: removed), or another server does (left alone)
        if not _listening_elsewhere(server):
            endpoint.remove_if_same(endpoint.path_for(root), info["token"])
        return None
    if not ready:
        raise GrmError(f"{server.name} is not ready (shutting down, or still starting); retry in a moment")
    check(server, args, settings)
    server._credential = endpoint.credential(info["token"], master_key(args) if info.get("sealed") else None)
    return server


def served_or_local(args: argparse.Namespace, settings: dict[str, tuple[str, object]],
                    open_local: Callable[[], Any]) -> "Server | Any":
    """The running server to send this command to (`find`), else what `open_local()` opens (a
    Runtime). A `grm serve` that took the store after the first look (it publishes its file once its
    port listens, while this command was importing) is found again, not reported as a lock."""
    server = find(args, settings)
    if server is not None:
        return server
    try:
        return open_local()
    except StoreLocked:
        server = find(args, settings)
        if server is None:
            raise
        return server


def _loaded(root: Path, loading: Server, wait_s: float = LOAD_WAIT_S) -> dict | None:
    """The endpoint file once the server that published it as loading has its model loaded; None
    when that server is gone (its file removed, its pid dead or nothing listening: then the
    command runs here). Says once that it waits; GrmError after `wait_s`."""
    if not _listening_elsewhere(loading):
        endpoint.remove_if_same(endpoint.path_for(root), loading.info["token"])
        return None
    say(f"grm: waiting for {loading.name} to load its model (Ctrl-C stops waiting)", file=sys.stderr)
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        time.sleep(POLL_S[1])
        info = _endpoint(root)
        if info is None or not endpoint.pid_alive(info["pid"]):
            return None
        if not info.get("loading"):
            return info
    raise GrmError(f"{loading.name} is still loading its model after {wait_s:.0f} s; retry when it says ready")


def _listening_elsewhere(server: Server) -> bool:
    """Whether something answers at the file's address at all (then the file is not ours to remove)."""
    try:
        urllib.request.urlopen(server.url + "/healthz", timeout=PROBE_TIMEOUT_S).close()
    except urllib.error.HTTPError:
        return True
    except (urllib.error.URLError, OSError):
        return False
    return True


def check(server: Server, args: argparse.Namespace, settings: dict[str, tuple[str, object]]) -> None:
    """UserInputError (one line naming the server) for a flag it cannot honour."""
    info = server.info

    def refuse(flag: str, value: object, has: object) -> UserInputError:
        runs, instead = ((f"runs without {flag}", f"drop {flag}") if has is None
                         else (f"runs with {flag} {has}", f"give {flag} {has}"))
        return UserInputError(f"{server.name} {runs}; it cannot honour {flag} {value}. Stop it to run this with "
                              f"{flag} {value} here, or {instead} to send it there")

    if args.model is None:
        if not info.get("default_model"):
            raise UserInputError(f"{server.name} serves {info.get('model_name')}, not the default model; give "
                                 f"--model {info.get('model')} to send it there, or stop it")
    else:
        wanted = args.model
        if Path(wanted).expanduser().exists():
            wanted = str(Path(wanted).expanduser().resolve())
        if wanted not in (info.get("model"), info.get("model_name")):
            raise refuse("--model", args.model, info.get("model"))
    if args.dtype != "auto" and args.dtype != info.get("dtype"):
        raise refuse("--dtype", args.dtype, info.get("dtype"))
    device = {"cuda": "cuda:0"}.get(args.device, args.device)
    if device != "auto" and device != info.get("device"):
        raise refuse("--device", args.device, info.get("device"))
    has = info.get("settings") or {}
    if args.system is not None and args.system != has.get("system", "memory"):
        raise refuse("--system", args.system, has.get("system"))
    if args.compress and not has.get("compress"):
        raise UserInputError(f"{server.name} writes payloads uncompressed; it cannot honour --compress. Stop it to "
                             "run this with --compress")
    if args.durability != "normal" and args.durability != has.get("durability"):
        raise refuse("--durability", args.durability, has.get("durability"))
    for name, (flag, value) in settings.items():
        if value is not None and has.get(name) != value:
            raise refuse(flag, value, has.get(name))
    key = master_key(args)
    if info.get("sealed") and key is None:
        raise UserInputError(f"{server.name} holds an encrypted store: give its master key (--key-file or "
                             "GRM_MASTER_KEY) to send this there")
    if not info.get("sealed") and key is not None:
        raise UserInputError(f"{server.name} holds a store that is not encrypted; drop --key-file/GRM_MASTER_KEY")


def locked(root: Path | str, pid: str) -> StoreLocked:
    """The store's lock error, naming the `grm serve` that holds it when its endpoint file says so."""
    info = _endpoint(root)
    if info is not None and str(info["pid"]) == pid:
        serving = "loading its model" if info.get("loading") else f"serving {info.get('model_name')}"
        return StoreLocked(f"store {root} is in use by grm serve (pid {pid}) at {endpoint.address(info)}, {serving}: "
                           "`grm ask` and `grm ingest` go through it; other commands need it stopped", str(root), pid)
    return StoreLocked(f"store {root} is in use by another process (pid {pid}); if it is `grm serve`, `grm ask` and "
                       "`grm ingest` go through it once it is ready", str(root), pid)
