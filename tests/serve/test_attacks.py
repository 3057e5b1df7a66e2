"""One tenant cannot hurt another (issue 31): the server holes an adversarial review found, each
tried as the attacker would.

1. `set durability:` from an API tenant (a chat line, or /v1/memories messages) never reaches the
   shared store: the chat answers the refusal, the REST call is 403, the mode stays the operator's.
3. An error a client reads names no store location, path or password (local and Redis stores);
   log lines mask URL passwords, tracebacks included.
4. Deeply nested JSON and lone surrogates in chat, memory and document bodies: 400, OpenAI shape.
5. A write to a Redis tenant another process holds the lease on: 503 + Retry-After, not a 500.
"""

from __future__ import annotations

import io
import logging
import os
import shutil
from pathlib import Path

import httpx2 as httpx
import pytest

from grm.errors import RedactingFilter, StoreError
from tests.conftest import free_port, start_redis
from tests.serve.conftest import MODEL


def call(srv, method, path, tenant="alice", **kw):
    return httpx.request(method, srv.url + path, headers=srv.headers(tenant), timeout=60, **kw)


def chat(srv, text, tenant="alice", max_tokens=2, **kw):
    return call(srv, "POST", "/v1/chat/completions", tenant,
                json={"model": MODEL, "messages": [{"role": "user", "content": text}], "max_tokens": max_tokens}, **kw)


def test_a_tenant_cannot_change_the_stores_durability(server):
    store = server.engine.rt.store
    before = store.durability
    for mode in ("volatile", "strict"):
        r = chat(server, f"set durability: {mode}", "bob")
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["grm"]["command"]["results"][0]["ok"] is False
        assert "operator setting" in body["choices"][0]["message"]["content"]
        assert store.durability == before
    r = call(server, "POST", "/v1/memories", "bob",
             json={"messages": [{"role": "user", "content": "hello\nset durability volatile"}]})
    assert r.status_code == 403 and r.json()["error"]["code"] == "operator_setting"
    assert store.durability == before


PASSWORD = "S3cretPW"


@pytest.fixture(scope="module")
def redis_with_password(tmp_path_factory):
    pytest.importorskip("redis", reason="the redis package is not installed (pip install redis==8.1.0)")
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed (apt-get install redis-server)")
    port = free_port()
    proc = start_redis(port, tmp_path_factory.mktemp("redis-pw"), password=PASSWORD)
    yield f"redis://:{PASSWORD}@127.0.0.1:{port}/pw"
    proc.terminate()
    proc.wait(10)


def _background(tmp_path: Path, store: str | Path):
    from grm.runtime.config import RuntimeConfig
    from grm.serve.auth import add_key
    from grm.serve.config import ServeConfig
    from grm.serve.server import Background

    keys = {t: add_key(tmp_path / "keys.txt", t) for t in ("carol",)}
    cache = Path(os.environ.get("GRM_CACHE", Path.home() / ".cache" / "grm"))
    rc = RuntimeConfig.from_options(store=store, cache_dir=cache, model=MODEL, threads=2)
    return Background(rc, ServeConfig(port=0, keys=tmp_path / "keys.txt")), keys


@pytest.mark.parametrize("where", ["local", "redis"])
def test_errors_to_clients_name_no_store_path_or_password(where, tmp_path, request, caplog):
    """3. A question over an empty memory used to answer "the store at redis://:PW@HOST/NS holds no
    documents ..." (or the server's folder) to the client; the log masks the password too."""
    store = request.getfixturevalue("redis_with_password") if where == "redis" else tmp_path / "srv-store"
    bg, keys = _background(tmp_path, store)
    with bg, caplog.at_level(logging.INFO):
        r = httpx.post(bg.url + "/v1/completions", headers={"Authorization": f"Bearer {keys['carol']}"}, timeout=60,
                       json={"model": MODEL, "prompt": "Where is the key?", "max_tokens": 2, "grm": {"mode": "grafts"}})
        assert r.status_code == 400, r.text
        message = r.json()["error"]["message"]
        assert "holds no documents or memories" in message and "<store>" in message
        for secret in (PASSWORD, "redis://", str(tmp_path), "127.0.0.1"):
            assert secret not in message
        logging.getLogger("grm.serve").error("lost %s", store)  # what a log line naming the store prints
    handler = logging.StreamHandler(io.StringIO())
    handler.addFilter(RedactingFilter())
    for rec in caplog.records:
        handler.handle(rec)
    assert PASSWORD not in handler.stream.getvalue()


def test_a_log_record_and_its_traceback_mask_url_passwords():
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.addFilter(RedactingFilter())
    logger = logging.getLogger("grm.test-redact")
    logger.addHandler(handler)
    try:
        try:
            raise StoreError(f"cannot reach Redis at redis://:{PASSWORD}@10.0.0.1:6379/0")
        except StoreError:
            logger.exception("open %s failed", f"rediss://user:{PASSWORD}@h:1/x")
    finally:
        logger.removeHandler(handler)
    text = out.getvalue()
    assert PASSWORD not in text and "rediss://user:***@h:1/x" in text and "redis://:***@10.0.0.1" in text


DEEP = b"[" * 100_000
SURROGATE = {"/v1/chat/completions": '{"model": "%s", "messages": [{"role": "user", "content": "hi \\ud800"}]}' % MODEL,
             "/v1/memories": '{"memory": "my code is \\udfff"}',
             "/v1/documents": '{"name": "a", "text": "x \\ud800 y"}'}


@pytest.mark.parametrize("path", sorted(SURROGATE))
def test_deep_nesting_and_lone_surrogates_are_400_in_the_openai_shape(server, path, caplog):
    """4. `[` x 100000 and a lone surrogate were plain-text 500s with a traceback in the log."""
    with caplog.at_level(logging.WARNING):
        for body, code in ((DEEP, "invalid_json"), (b'{"a":' * 100 + b"1" + b"}" * 100, "invalid_json"),
                           (SURROGATE[path].encode(), "invalid_unicode")):
            r = httpx.post(server.url + path, content=body, timeout=60,
                           headers={**server.headers(), "content-type": "application/json"})
            assert r.status_code == 400, (path, r.status_code, r.text[:200])
            err = r.json()["error"]
            assert err["type"] == "invalid_request_error" and err["code"] == code and err["message"]
    assert not [rec for rec in caplog.records if rec.exc_info], "a traceback was logged"


def test_a_second_writer_on_a_leased_redis_tenant_gets_503_and_retry_after(redis_url, tmp_path):
    """Smaller hole: another process holding carol's write lease made her writes 500s carrying the
    raw StoreError; they are 503 + Retry-After (the lease's time left), and her reads still work."""
    from grm.store import RedisConfig, RedisStore

    location = f"{redis_url.rsplit('/', 1)[0]}/leased"
    bg, keys = _background(tmp_path, location)
    other = RedisStore.open(RedisConfig(redis_url, namespace="leased", lease_ms=60_000))
    try:
        other.put("carol", "note", "held", text="the other writer holds carol's lease")
        with bg:
            auth = {"Authorization": f"Bearer {keys['carol']}"}
            r = httpx.post(bg.url + "/v1/memories", headers=auth, json={"memory": "my locker code is 1234"}, timeout=60)
            assert r.status_code == 503, r.text
            assert r.json()["error"]["code"] == "store_busy" and 1 <= int(r.headers["retry-after"]) <= 60
            assert "StoreError" not in r.text and "redis://" not in r.text
            assert httpx.get(bg.url + "/v1/memories", headers=auth, timeout=60).status_code == 200
    finally:
        other.close()


def test_correcting_a_memory_with_another_subject_is_409(server):
    """Memory hygiene: a correction must be about the same subject (grm/policy/commands.py)."""
    r = call(server, "POST", "/v1/memories", "bob", json={"memory": "My favourite editor is Vim"})
    fid = r.json()["results"][0]["id"]
    r = call(server, "POST", f"/v1/memories/{fid}/correct", "bob", json={"memory": "My cat is called Tofu"})
    assert r.status_code == 409 and r.json()["corrected"] is False and "is about" in r.json()["message"]
    assert call(server, "GET", f"/v1/memories/{fid}", "bob").json()["state"] == "active"
    r = call(server, "POST", f"/v1/memories/{fid}/correct", "bob", json={"memory": "Emacs"})
    assert r.status_code == 200 and r.json()["corrected"] is True
