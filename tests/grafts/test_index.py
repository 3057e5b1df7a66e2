"""The dense-key index (grm/route/index.py) that graft routing and section selection query.

Expectations:
1. Its scores are the pass-over-every-row scores (grm.route.dense.score on each stored key),
   multi-key nodes included; routing through it ranks as that pass did.
2. It follows the store: a graft harvested, retired or deleted after the first query is seen by
   the next one; writes are read incrementally (`ChangeFeed.rows_since`), deletes through the
   store's keys (`ChangeFeed.keys`); a backend without a change feed re-reads the listing
   whenever its LSN moves.
3. Its word counts are the abstain floor's document frequencies over the routable grafts.
4. `rows_since` on the local store (catalog-backed and resident) returns exactly the rows written
   after an LSN, state changes included, and the count a delete lowers; `keys` every key.
5. A query routed twice (over grafts and sections, or sent again) is read through the model once
   (`QueryKeys`), with the key a fresh read gives; the cache holds its last `size` queries.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from grm.grafts.floor import DocumentFrequencies, declarative, terms
from grm.route.dense import decode_key, encode_key, query_key, score
from grm.route.index import DenseIndex, candidates
from grm.store import Record
from grm.store.backend import ChangeFeed
from grm.store.kinds import GRAFT
from tests.grafts.test_grafts import TEXTS, harvest
from tests.store.helpers import memory_store, open_store

LONG = " ".join(f"Line {i} of the long log says the pump in hall {i} was checked." for i in range(20))


def _query(rt, text: str) -> torch.Tensor:
    ex = rt.exact
    return query_key(rt.lm.model, ex.sinks(), rt.lm.tokenizer.encode(text), ex.dialect, rt.grafts.config.channels.dense)


def test_index_scores_are_the_full_pass_scores(make_runtime):
    rt = make_runtime()
    grafts = [harvest(rt, t) for t in [*TEXTS, LONG]]
    assert decode_key(grafts[-1].record.meta["dense"], _query(rt, "x")).dim() == 4  # a multi-key node
    for question in ("How many apple trees does Velmora's orchard have?", "pump in hall 7", "zzzz"):
        q = _query(rt, question)
        scores = rt.grafts.index().dense(q)
        assert len(scores) == len(grafts)
        for g in grafts:
            want = score(q, decode_key(g.record.meta["dense"], q))
            assert scores.get(g.id) == pytest.approx(want, abs=1e-5)
        full = sorted(grafts, key=lambda g: -score(q, decode_key(g.record.meta["dense"], q)))
        assert scores.top(2) == [g.id for g in full[:2]]
        lo, hi = scores.bounds()
        assert lo == pytest.approx(min(scores.get(g.id) for g in grafts)) and hi == pytest.approx(
            max(scores.get(g.id) for g in grafts))
    routed = rt.grafts.route("How many apple trees does Velmora's orchard have, 7781?")
    assert routed[0].graft.id == grafts[1].id
    assert routed[0].dense == pytest.approx(score(q := _query(rt, "How many apple trees does Velmora's orchard have, 7781?"),
                                                  decode_key(grafts[1].record.meta["dense"], q)), abs=1e-5)


def test_index_follows_harvest_retire_and_delete(make_runtime):
    rt = make_runtime()
    first = harvest(rt, TEXTS[0])
    assert [r.graft.id for r in rt.grafts.route("Who keeps the blue ledger of Quintar?")] == [first.id]
    index = rt.grafts.index()
    assert index.full_reads == 1
    new = harvest(rt, TEXTS[1])
    assert rt.grafts.route("Velmora orchard 7781")[0].graft.id == new.id  # seen without a re-read
    rt.grafts.retire([new.id], into="digest-1")
    assert new.id not in [r.graft.id for r in rt.grafts.route("Velmora orchard 7781", channel="dense")]
    assert [g.id for g in rt.grafts.grafts()] == [first.id]
    assert index.full_reads == 1
    rt.store.delete(rt.grafts.tenant, GRAFT, first.id)  # shows only in the count: the keys say which
    assert rt.grafts.route("Who keeps the blue ledger of Quintar?") == []
    assert rt.grafts.grafts() == [] and len(index) == 0 and index.frequencies()[0] == 0
    third = harvest(rt, TEXTS[2])
    assert [g.id for g in rt.grafts.grafts()] == [third.id]
    assert index.full_reads == 1


def test_index_word_counts_are_the_floor_frequencies(make_runtime):
    rt = make_runtime()
    grafts = [harvest(rt, t) for t in TEXTS]
    rt.grafts.retire([grafts[0].id], into="digest-1")
    n, df = rt.grafts.index().frequencies()
    want = DocumentFrequencies(g.text for g in grafts[1:])
    assert n == want.n == 2
    assert {t: c for t, c in df.items() if c} == want.df


def _row(key: str, lsn: int, keys: np.ndarray, state: str = "active") -> Record:
    return Record("t", GRAFT, key, None, {"dense": encode_key(torch.from_numpy(keys))}, None, 0, key, state, lsn)


class ListingOnly:
    """A backend with no change feed: `last_lsn` and `records` only."""

    def __init__(self) -> None:
        self.rows: dict[str, Record] = {}
        self.last_lsn = 0

    def put(self, rec: Record) -> None:
        self.rows[rec.key] = rec
        self.last_lsn = rec.lsn

    def records(self, tenant=None, kind=None):
        return iter(list(self.rows.values()))


def test_backend_without_change_feed_is_reread_when_its_lsn_moves():
    store = ListingOnly()
    assert not isinstance(store, ChangeFeed)
    rng = np.random.default_rng(0)
    unit = lambda n: (lambda a: a / np.linalg.norm(a, axis=-1, keepdims=True))(rng.standard_normal((n, 2, 4)))  # noqa: E731
    a, b = unit(1), unit(3)  # b: a node of three keys
    store.put(_row("a", 1, a.astype(np.float32)))
    index = DenseIndex(store, "t", GRAFT, 8, lambda r: r.state == "active", lambda text: terms(declarative(text)))
    q = torch.from_numpy(a[0].astype(np.float32))
    assert index.dense(q).get("a") == pytest.approx(1.0, abs=1e-3)
    index.dense(q)
    assert index.full_reads == 1  # LSN unchanged: nothing read
    store.put(_row("b", 2, b.astype(np.float32)))
    scores = index.dense(q)
    assert index.full_reads == 2
    want = max(float((q.numpy() * k).sum(-1).mean()) for k in b)
    assert scores.get("b") == pytest.approx(want, abs=1e-3) and scores.top(1) == ["a"]
    store.put(_row("a", 3, a.astype(np.float32), state="superseded"))
    assert index.dense(q).get("a") is None and index.keys() == ["b"]
    assert candidates(index.dense(q), {}, store.rows.get, 5) == {"b": (store.rows["b"], pytest.approx(want, abs=1e-3))}


@pytest.mark.parametrize("where", ["catalog", "resident"])
def test_rows_since_returns_what_was_written_after(where, tmp_path):
    s = open_store(tmp_path / "s") if where == "catalog" else memory_store()[0]
    try:
        assert isinstance(s, ChangeFeed)
        s.put("t", GRAFT, "a", text="one")
        s.put("t", GRAFT, "b", text="two")
        s.put("u", GRAFT, "c", text="other tenant")
        mark = s.last_lsn
        assert s.rows_since("t", GRAFT, mark) == ([], 2)
        s.put("t", GRAFT, "d", text="four")
        s.set_state("t", GRAFT, "a", "superseded")
        rows, n = s.rows_since("t", GRAFT, mark)
        assert [(r.key, r.state) for r in rows] == [("d", "active"), ("a", "superseded")] and n == 3
        s.delete("t", GRAFT, "b")
        assert [r.key for r in s.rows_since("t", GRAFT, mark)[0]] == ["d", "a"]
        assert s.rows_since("t", GRAFT, mark)[1] == 2
        assert s.keys("t", GRAFT) == {"a", "d"} and s.keys("t", "nothing") == set()
    finally:
        s.close()


def test_section_word_counts_are_the_floor_frequencies_over_the_sections(make_runtime, tmp_path):
    from grm.store.kinds import BLOCK
    from tests.conftest import lorem

    doc = tmp_path / "doc.txt"
    doc.write_text(lorem(8, 5) + "\n\nThe vault code of Quintar is 7781.\n")
    rt = make_runtime(section_tokens=64)
    rt.ingest([doc], layout="sections", progress=False)
    ex = rt.exact
    want = DocumentFrequencies(r.text or "" for r in ex.store.children(ex.tenant, BLOCK, ex.sink_fp))
    n, df = rt.sections.index().frequencies()
    assert n == want.n > 1 and {t: c for t, c in df.items() if c} == want.df


def test_a_query_routed_twice_is_read_once(make_runtime):
    from grm.route.dense import QueryKeys

    rt = make_runtime()
    for t in TEXTS:
        harvest(rt, t)
    question = "Where is the pump checked?"
    rt.grafts.similarity(question)  # the first routing reads the query
    before = rt.reads.snapshot()
    again = rt.grafts.similarity(question)
    assert rt.reads.snapshot() == before  # the second reads nothing
    assert torch.equal(rt.exact.query_keys.get(rt.lm.model, rt.exact.sinks(), rt.lm.tokenizer.encode(question),
                                               rt.exact.dialect, rt.grafts.config.channels.dense), _query(rt, question))
    assert again is not None
    keys = QueryKeys(size=2)
    ex, dense = rt.exact, rt.grafts.config.channels.dense
    for text in ("one", "two", "three"):
        keys.get(rt.lm.model, ex.sinks(), rt.lm.tokenizer.encode(text), ex.dialect, dense)
    before = rt.reads.snapshot()
    keys.get(rt.lm.model, ex.sinks(), rt.lm.tokenizer.encode("three"), ex.dialect, dense)
    assert rt.reads.snapshot() == before
    keys.get(rt.lm.model, ex.sinks(), rt.lm.tokenizer.encode("one"), ex.dialect, dense)  # fell out: read again
    assert rt.reads.snapshot()[1] == before[1] + 1
