"""User bytes that look like a backend's own markers stay user bytes (issue 31, hole 2).

Every backend (local, Redis plain and encrypted) is fed keys, parents, texts, meta and payloads
built from its own markers - Redis's old LSN slot `"@LSN@"`, JSON punctuation, the field
separator, the local log, checkpoint and payload magics, the damaged-row prefix, FTS5 syntax -
and must:
1. read every field back byte for byte, with an integer LSN that grows with each commit;
2. keep doing so after close and reopen;
3. answer a text search for the marker without an error.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grm.store.kinds import BLOCK, DOCUMENT
from grm.store.opener import open_backend

KEY = bytes(range(32))
MARKERS = ["@LSN@", '"@LSN@"', '{"lsn":', '"lsn": 1,', "}", "{", '"', "\\", "\0", ":", "*", "lsn",
           "GRMLOG\0\0", "GRMCKPT\0", "GRMCKEND", "GRMPAY1\0", "GRM-STORE", ".tmp.", "sealed:",
           "NEAR(", " OR ", " AND ", " NOT ", "^", "\u2028", "\U0001f600"]
marked = st.lists(st.one_of(st.sampled_from(MARKERS), st.text(max_size=6)), min_size=1, max_size=5).map("".join)
_n = itertools.count()


def _open(kind: str, tmp_path: Path, request) -> tuple:
    if kind == "local":
        root = tmp_path / "store"
        return lambda: open_backend(root)
    url = request.getfixturevalue("redis_url")
    location = f"{url.rsplit('/', 1)[0]}/markers{next(_n)}"
    key = KEY if kind == "redis-encrypted" else None
    return lambda: open_backend(location, master_key=key)


@pytest.mark.parametrize("kind", ["local", "redis", "redis-encrypted"])
def test_the_lsn_slot_as_user_text_is_kept(kind, tmp_path, request) -> None:
    """The reproduction: `remember permanently: @LSN@` used to read back as the row's LSN."""
    opener = _open(kind, tmp_path, request)
    with opener() as store:
        store.put("t", DOCUMENT, "@LSN@", payload=b"@LSN@", text="@LSN@", meta={"name": "@LSN@", "@LSN@": ["@LSN@"]},
                  parent="@LSN@")
        rec = store.get("t", DOCUMENT, "@LSN@")
        assert (rec.key, rec.text, rec.parent) == ("@LSN@", "@LSN@", "@LSN@")
        assert rec.meta == {"name": "@LSN@", "@LSN@": ["@LSN@"]}
        assert isinstance(rec.lsn, int) and rec.lsn > 0 and store.read_payload(rec) == b"@LSN@"


@pytest.mark.parametrize("kind", ["local", "redis", "redis-encrypted"])
def test_marker_like_user_bytes_round_trip(kind, tmp_path, request) -> None:
    opener = _open(kind, tmp_path, request)
    store = opener()
    written: dict[str, tuple] = {}

    @settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(key=marked, text=marked, meta_key=marked, meta_value=marked,
           parent=st.one_of(st.none(), marked.map("p".__add__)))
    def put_and_read(key, text, meta_key, meta_value, parent) -> None:
        key = f"{len(written)}:{key}"  # a fresh row per example (rows of earlier examples stay)
        last = store.last_lsn
        store.put("t", BLOCK, key, meta={meta_key: meta_value, "v": [meta_value]}, payload=text.encode(),
                  parent=parent, text=text)
        rec = store.get("t", BLOCK, key)
        assert rec is not None and (rec.key, rec.text, rec.parent) == (key, text, parent)
        assert rec.meta == {meta_key: meta_value, "v": [meta_value]}
        assert isinstance(rec.lsn, int) and rec.lsn > last
        assert store.read_payload(rec) == text.encode()
        store.search_text("t", text, BLOCK)
        written[key] = (text, parent, rec.meta)

    try:
        put_and_read()
    finally:
        store.close()
    with opener() as again:
        got = {r.key: (r.text, r.parent, r.meta) for r in again.records("t", BLOCK)}
        assert got == written
        assert all(again.read_payload(r) == r.text.encode() for r in again.records("t", BLOCK))
