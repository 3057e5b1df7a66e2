"""Ranked lexical search on the Redis backend (grm/store/redis_search.py) ranks as the local
store's FTS5 BM25 does: same rows, same queries -> same order and the same scores."""

from __future__ import annotations

import json
import random
import uuid

import pytest

from grm.store import Store, StoreConfig
from grm.store.opener import open_backend

pytest.importorskip("redis", reason="the redis package is not installed (pip install redis==8.1.0)")

WORDS = ("harbor seal boat winter river orchard apple robot wheel sensor light team morning water "
         "temperature village market frost meeting member record north south locker code").split()


def test_redis_ranks_as_fts5_bm25(redis_url, tmp_path):
    rng = random.Random(5)
    rows = [(f"r{i:03d}", " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 20)))) for i in range(120)]
    local = Store.open(StoreConfig(root=tmp_path / "s"))
    shared = open_backend(redis_url.rsplit("/", 1)[0] + f"/s{uuid.uuid4().hex[:8]}")
    try:
        for store in (local, shared):
            with store.transaction() as txn:
                for key, text in rows:
                    txn.put("t", "graft", key, text=text)
        for q in ("locker code", "harbor winter seal", "Frost, frost and MARKET", "north", "nothing here"):
            want = local.search_text("t", q, kind="graft", limit=10)
            got = shared.search_text("t", q, kind="graft", limit=10)
            assert [r.key for r, _ in got] == [r.key for r, _ in want], q
            assert [round(s, 6) for _, s in got] == [round(s, 6) for _, s in want], q
        assert shared.search_text("other", "locker") == []  # tenants never meet
        shared.set_state("t", "graft", rows[0][0], "superseded")
        assert rows[0][0] not in [r.key for r, _ in shared.search_text("t", rows[0][1], limit=200)]
    finally:
        local.close()
        shared.close()



def test_stats_name_the_location_without_credentials(redis_url):
    host = redis_url.split("://", 1)[1].rsplit("/", 1)[0]
    with open_backend(f"redis://default:hunter2@{host}/creds") as s:  # the default user takes any password
        st = s.stats()
    assert "hunter2" not in json.dumps(st) and st["root"] == f"redis://{host}/creds"
    assert st["encrypted"] is False and "Redis server" in st["durability"]
