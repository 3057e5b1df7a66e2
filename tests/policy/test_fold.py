"""Folding: digests with measured fact coverage, the 0.70 gate and its persisted abort, eras as
index nodes, retired sources, descent."""

from __future__ import annotations

import pytest

from grm.errors import UserInputError
from grm.policy import SourceTurn
from grm.policy.fold import window_hash


def turns(n: int, start: int = 0):
    """Source turns; every third holds a fact."""
    out = []
    for i in range(start, start + n):
        text = f"my item{i} code is {1000 + i}. we talked about the weather" if i % 3 == 0 else f"the weather was fine on day {i}"
        out.append((f"turn-{i}", text, float(i)))
    return out


def test_fold_writes_a_digest_that_keeps_its_facts_and_retires_sources(mem):
    f = mem.folder
    res = f.fold(turns(5), now=100.0)
    assert res.status == "folded" and res.coverage == 1.0 and res.missing == ()
    node = f.node(res.node)
    assert node.type == "digest" and node.sources == tuple(f"turn-{i}" for i in range(5))
    assert "my item0 code is 1000." in node.text and "my item3 code is 1003." in node.text
    assert f.retired() == set(node.sources) and f.folded_into("turn-2") == res.node
    assert f.descend(res.node) == list(node.sources)
    again = f.fold(turns(5), now=101.0)
    assert again.status == "skipped"


def test_fold_below_the_gate_aborts_persists_and_is_not_retried(stores, make_mem):
    mem = make_mem()
    calls = []

    def lossy(sources):
        calls.append(len(sources))
        return "we talked about the weather"

    res = mem.folder.fold(turns(5), now=100.0, digester=lossy)
    assert res.status == "aborted" and res.coverage == 0.0 and len(res.missing) == 2
    assert mem.folder.retired() == set() and mem.folder.nodes() == []
    stores.restart()
    mem = make_mem()
    assert mem.folder.aborts()[0]["id"] == f"w-{window_hash([t[0] for t in turns(5)])}"
    assert mem.folder.fold(turns(5), now=200.0, digester=lossy).status == "skipped"
    assert calls == [5]  # the digester ran once: the abort was not retried
    assert mem.folder.plan(turns(10)) == []  # the aborted window is the only full one: skipped
    assert mem.folder.plan(turns(14)) == [[SourceTurn(*t) for t in turns(14)[5:10]]]


def test_gate_threshold_is_inclusive_at_seventy_percent(make_mem):
    mem = make_mem()
    src = [(f"t{i}", f"my thing{i} is {i}", float(i)) for i in range(10)]
    keep7 = lambda s: "\n".join(f"my thing{i} is {i}." for i in range(7))  # noqa: E731
    keep6 = lambda s: "\n".join(f"my thing{i} is {i}." for i in range(6))  # noqa: E731
    assert mem.folder.fold(src, now=1.0, digester=keep6).status == "aborted"
    other = [(f"u{i}", t, c) for i, (_, t, c) in enumerate(src)]
    res = mem.folder.fold(other, now=2.0, digester=keep7)
    assert res.status == "folded" and res.coverage == 0.7


def test_budget_too_small_for_the_facts_aborts(make_mem):
    mem = make_mem(digest_max_chars=40)
    src = [(f"t{i}", f"my thing{i} is {i}", float(i)) for i in range(5)]
    res = mem.folder.fold(src, now=1.0)
    assert res.status == "aborted" and res.coverage < 0.7


def test_sources_without_facts_have_full_coverage(mem):
    res = mem.folder.fold([("a", "hello there", 1.0), ("b", "nice weather", 2.0)], now=3.0)
    assert res.status == "folded" and res.coverage == 1.0


def test_folding_gate_shape_forty_turns(make_mem):
    """40 turns -> 8 digests -> 2 eras, one fold aborted, the aborted turns stay routable, and
    every source is reachable by descent from the node that retired it."""
    mem = make_mem(fold_window=5, fold_keep_recent=0, era_fanout=4)
    src = turns(40)
    bad_window = [t[0] for t in src[10:15]]
    mem.folder.fold(src[10:15], now=1.0, digester=lambda s: "nothing kept")
    results = mem.folder.fold_pending(src, now=2.0)
    digests, eras = mem.folder.nodes("digest"), mem.folder.nodes("era")
    assert len(digests) == 7 and len(eras) == 1  # the aborted window is not retried
    assert [r.status for r in results].count("folded") == 8
    retired = mem.folder.retired()
    assert not set(bad_window) & retired
    more = turns(5, start=40)
    mem.folder.fold_pending(src + more, now=3.0)
    assert len(mem.folder.nodes("digest")) == 8 and len(mem.folder.nodes("era")) == 2
    for t in src + more:
        if t[0] in bad_window:
            continue
        node = mem.folder.folded_into(t[0])
        top = mem.folder.folded_into(node) or node
        assert t[0] in mem.folder.descend(top)
    era = mem.folder.nodes("era")[0]
    assert era.text == "\n".join(mem.folder.node(c).text for c in era.children)  # an index, no re-summary


def test_plan_leaves_recent_turns_and_skips_aborted_windows(make_mem):
    mem = make_mem(fold_window=5, fold_keep_recent=4)
    src = turns(13)
    assert [[t.id for t in w] for w in mem.folder.plan(src)] == [[f"turn-{i}" for i in range(5)]]
    mem.folder.fold(src[:5], now=1.0, digester=lambda s: "")
    planned = [[t.id for t in w] for w in mem.folder.plan(src + turns(6, 13))]
    assert planned == [[f"turn-{i}" for i in range(5, 10)], [f"turn-{i}" for i in range(10, 15)]]


def test_era_refuses_non_digests_and_refolding(mem):
    a = mem.folder.fold(turns(3), now=1.0).node
    b = mem.folder.fold(turns(3, 3), now=2.0).node
    era = mem.folder.fold_era([a, b], now=3.0)
    assert era.status == "folded" and mem.folder.descend(era.node) == [f"turn-{i}" for i in range(6)]
    assert mem.folder.fold_era([a, b], now=4.0).status == "skipped"
    with pytest.raises(UserInputError):
        mem.folder.fold_era([a], now=5.0)
    with pytest.raises(UserInputError):
        mem.folder.fold_era([a, "turn-1"], now=5.0)
    assert mem.folder.descend("nope") == []
