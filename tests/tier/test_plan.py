"""The tiers as rows say them, the footprint, and the moves the planner picks (no model: rows only)."""

from __future__ import annotations

import pytest

from grm.errors import UserInputError
from grm.store import Store, StoreConfig
from grm.store.kinds import ARCHIVE, BLOCK, DOCUMENT, GRAFT, SINKS
from grm.store.tenant import SYSTEM_TENANT
from grm.store.tiering import (TierConfig, UseLog, inventory, load_uses, merged_uses, parse_size, plan,
                               save_budget, stored_budget)


@pytest.mark.parametrize("text,want", [("20GB", 20 << 30), ("500MB", 500 << 20), ("1.5GiB", 3 << 29),
                                       ("64k", 64 << 10), ("1000", 1000), (" 2 g ", 2 << 30), ("7b", 7)])
def test_sizes_parse_in_powers_of_1024(text: str, want: int) -> None:
    assert parse_size(text) == want


@pytest.mark.parametrize("text", ["", "GB", "20 parsecs", "-5MB", "0", "1e9", "20GBB", "0.1b"])
def test_bad_sizes_say_what_a_size_looks_like(text: str) -> None:
    with pytest.raises(UserInputError, match="size|at least 1 byte"):
        parse_size(text)


def test_tier_config_refuses_inverted_water_marks() -> None:
    with pytest.raises(UserInputError):
        TierConfig(1000, high_water=0.5, low_water=0.8)
    with pytest.raises(UserInputError):
        TierConfig(0)


@pytest.fixture()
def store(tmp_path):
    with Store.open(StoreConfig(tmp_path / "s", durability="volatile")) as s:
        yield s


def fill(s) -> None:
    """Sinks, two section blocks (one also archived), a chain block, a text-tier block, a document,
    an evidence graft with its own K/V, a fact graft and a document graft sharing a block."""
    s.put(SYSTEM_TENANT, SINKS, "sink", payload=b"s" * 100)
    s.put("t", BLOCK, "old", parent="sink", text="old text", payload=b"o" * 1000, meta={"doc": "a.txt", "tokens": 10})
    s.put("t", BLOCK, "chain", parent="old", text="chain", payload=b"c" * 800, meta={"doc": "a.txt", "tokens": 8})
    s.put("t", BLOCK, "new", parent="sink", text="new text", payload=b"n" * 1000, meta={"doc": "b.txt", "tokens": 10})
    s.put("t", ARCHIVE, "new", parent="sink", text="new text", payload=b"A" * 90, meta={"doc": "b.txt", "exact_bytes": 1000})
    s.put("t", BLOCK, "gone", parent="sink", text="gone", meta={"doc": "b.txt", "tokens": 4, "tier": "text"})
    s.put("t", DOCUMENT, "a", payload=b"document text")
    s.put("t", GRAFT, "turn", text="my code is 12", payload=b"e" * 500, meta={"kind": "evidence", "session": "s1", "tokens": 5})
    s.put("t", GRAFT, "fact", text="code is 12", payload=b"f" * 300, meta={"kind": "fact", "tokens": 3})
    s.put("t", GRAFT, "docgraft", text="old text", meta={"kind": "document", "block": "old"})


def test_inventory_names_each_span_tier_and_counts_each_payload_once(store) -> None:
    fill(store)
    store.put("t", BLOCK, "twin", parent="sink", text="old text", payload=b"o" * 1000, meta={"doc": "a.txt"})
    inv = inventory(store)
    tiers = {s.key: s.tier for s in inv.spans}
    assert tiers == {"old": "exact", "chain": "exact", "new": "exact", "gone": "text", "turn": "exact", "twin": "exact"}
    by = {s.key: s for s in inv.spans}
    assert by["new"].bytes == 1090 and by["twin"].bytes == 0  # the same bytes as "old": one file
    assert not by["chain"].archivable and by["old"].archivable and by["turn"].archivable
    assert by["turn"].doc == "chat s1"
    assert inv.kept_bytes == 100 + len(b"document text") + 300  # sinks, document, the fact graft
    assert inv.alias[("t", "docgraft")] == "old"
    assert inv.row_bytes > 0
    assert inv.footprint == 1000 + 800 + 1090 + 500 + inv.kept_bytes + inv.log_bytes + inv.row_bytes
    docs = inv.by_doc("t")
    assert docs["b.txt"] == {"exact_bytes": 1000, "archive_bytes": 90, "exact": 1, "archive": 0, "text": 1}


def test_nothing_moves_under_the_high_water_mark(store) -> None:
    fill(store)
    inv = inventory(store)
    assert plan(inv, {}, TierConfig(inv.footprint * 2), last_lsn=store.last_lsn, can_archive=None) == []


def test_coldest_first_each_span_one_step_down(store) -> None:
    """1. exact spans move coldest first (oldest write, fewest mounts); 2. a section block or a graft
    is demoted, a chain block dropped; 3. moves stop once the need is covered."""
    fill(store)
    inv = inventory(store)
    budget = TierConfig(inv.footprint - 1500, high_water=1.0, low_water=1.0)
    moves = plan(inv, {}, budget, last_lsn=store.last_lsn, can_archive=None, archive_fraction=0.1)
    assert [(m.action, m.span.key) for m in moves] == [("demote", "old"), ("drop", "chain")]
    assert moves[0].saves == 900 and "writes ago, mounted 0x" in moves[0].why


def test_a_tight_budget_evicts_archived_spans_and_never_archives_what_it_evicts(store) -> None:
    """Below what archiving saves, archived spans are evicted, and a span the same plan would demote
    and then evict is dropped at once; the fact graft is never a candidate."""
    fill(store)
    store.put("t", BLOCK, "arch", parent="sink", text="arch text", meta={"doc": "c.txt", "tokens": 5, "ids": [1],
                                                                          "tier": "archive"})
    store.put("t", ARCHIVE, "arch", parent="sink", text="arch text", payload=b"a" * 120, meta={"doc": "c.txt"})
    inv = inventory(store)
    assert {s.key: s.tier for s in inv.spans}["arch"] == "archive"
    floor = inv.kept_bytes + inv.log_bytes + inv.row_bytes
    moves = plan(inv, {}, TierConfig(floor + 1, high_water=0.99, low_water=0.99), last_lsn=store.last_lsn, can_archive=None,
                 archive_fraction=0.1)
    steps = [(m.action, m.span.key) for m in moves]
    assert ("evict", "arch") in steps
    assert {k for a, k in steps if a == "drop"} == {"old", "chain", "new", "turn"}
    assert not any(a == "demote" for a, _ in steps) and "fact" not in {k for _, k in steps}


def test_without_codebooks_cold_spans_are_dropped_and_say_why(store) -> None:
    fill(store)
    inv = inventory(store)
    moves = plan(inv, {}, TierConfig(inv.kept_bytes + inv.log_bytes + inv.row_bytes + 1), last_lsn=store.last_lsn,
                 can_archive="no codebooks yet")
    assert {m.action for m in moves} <= {"drop", "evict"}
    assert any("no codebooks yet" in m.why for m in moves)


def test_a_mounted_span_is_hotter_than_a_newer_unused_one(store) -> None:
    """Mounts counted by the UseLog (via a document graft that mounts block "old") keep "old" exact
    while a fresher block that nobody mounted moves first."""
    fill(store)
    uses, at = UseLog(), store.last_lsn
    uses.note_answer("t", type("A", (), {"mounted": [{"id": "docgraft"}, {"id": "docgraft"}]})(), at)
    assert uses.pending() == 1 and load_uses(store, "t") == {}  # nothing written on the request path
    assert uses.flush(store) == 1 and uses.pending() == 0
    assert load_uses(store, "t")["docgraft"] == [2, at]
    inv = inventory(store)
    merged = merged_uses(store, inv)
    assert merged[("t", "old")][0] == 2
    budget = inv.footprint - 600  # one exact span's worth
    moves = plan(inv, merged, TierConfig(budget, high_water=0.99, low_water=0.99), last_lsn=store.last_lsn,
                 can_archive=None)
    assert moves and moves[0].span.key != "old"
    assert "old" not in [m.span.key for m in moves]


def test_the_budget_is_remembered_by_the_store(store) -> None:
    assert stored_budget(store) is None
    save_budget(store, 123456)
    lsn = store.last_lsn
    save_budget(store, 123456)  # unchanged: no write
    assert stored_budget(store) == 123456 and store.last_lsn == lsn
