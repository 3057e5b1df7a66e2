"""The Redis backend when its server dies (issue 14, bug 10), against a private redis-server on
a loopback port that the test kills and restarts.

1. A killed server: reads and writes raise StoreError with one clear line naming the server,
   never a raw redis.ConnectionError; close() still works.
2. Idempotent reads are retried with a short bounded backoff: a server restarted within that
   window answers the read.
"""

from __future__ import annotations

import shutil
import threading
import time
from pathlib import Path

import pytest

from grm.errors import StoreError
from grm.store.redis_backend import RedisConfig, RedisStore
from tests.conftest import free_port, start_redis

redis = pytest.importorskip("redis", reason="the redis package is not installed (pip install redis==8.1.0)")
if shutil.which("redis-server") is None:
    pytest.skip("redis-server is not installed (apt-get install redis-server)", allow_module_level=True)


@pytest.fixture
def server(tmp_path: Path):
    port = free_port()
    state = {"port": port, "proc": start_redis(port, tmp_path)}
    yield state
    state["proc"].kill()
    state["proc"].wait(10)


def _kill(server: dict) -> None:
    server["proc"].kill()
    server["proc"].wait(10)


def test_killed_server_is_a_store_error_not_a_connection_error(server: dict) -> None:
    s = RedisStore.open(RedisConfig(f"redis://127.0.0.1:{server['port']}/0", lease_ms=600))
    rec = s.put("alice", "block", "k", payload=b"bytes", text="hello")
    _kill(server)
    for call in (lambda: s.get("alice", "block", "k"), lambda: s.read_payload(rec),
                 lambda: list(s.records("alice")), lambda: s.put("alice", "block", "k2"),
                 lambda: s.search_text("alice", "hello"), s.stats):
        with pytest.raises(StoreError, match=f"Redis at redis://127.0.0.1:{server['port']}") as info:
            call()
        assert not isinstance(info.value, redis.RedisError) and "\n" not in str(info.value)
    s.close()


def test_an_idempotent_read_survives_a_quick_restart(server: dict, tmp_path: Path) -> None:
    s = RedisStore.open(RedisConfig(f"redis://127.0.0.1:{server['port']}/0", lease_ms=600))
    s.put("alice", "block", "k", text="hello")
    _kill(server)

    def restart() -> None:
        time.sleep(0.15)
        server["proc"] = start_redis(server["port"], tmp_path)

    t = threading.Thread(target=restart)
    t.start()
    try:
        assert s.get("alice", "block", "k") is None  # the fresh server is empty: a miss, not an error
    finally:
        t.join()
    s.close()
    with RedisStore.open(RedisConfig(f"redis://127.0.0.1:{server['port']}/0", lease_ms=600)) as again:
        again.put("alice", "block", "k", text="again")  # a new writer takes the (new) lease
        assert again.get("alice", "block", "k").text == "again"
