"""The tiering policy on a real runtime (tiny-random-llama): under budget after a run, every span
still servable from its tier, facts never moved, --dry-run writes nothing."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from grm.archive.codebook_store import codebook_versions
from grm.archive.policy import PolicyConfig, TieringPolicy
from grm.store.kinds import ARCHIVE, BLOCK, GRAFT
from grm.store.tiering import TierConfig, inventory
from tests.conftest import lorem

SMALL = PolicyConfig(min_train_tokens=64, train_tokens=4096, max_train=2000)


@pytest.fixture(scope="module")
def ingested(tmp_path_factory) -> Path:
    """One store with a document ingested (both layouts), copied by each test."""
    from grm.runtime import Runtime

    work = tmp_path_factory.mktemp("tier")
    doc = work / "doc.txt"
    doc.write_text(lorem(8) + "\nThe vault code is 4512.\n" + lorem(4, seed=1), encoding="utf-8")
    with Runtime.open(store=work / "store", model="tiny-random-llama", threads=2, device="cpu",
                      section_tokens=48, block_tokens=48) as rt:
        rt.ingest([doc], progress=False)
    return work / "store"


@pytest.fixture()
def rt(make_runtime, ingested, tmp_path):
    shutil.copytree(ingested, tmp_path / "copy")
    return make_runtime(store=tmp_path / "copy", section_tokens=48, block_tokens=48)


def half_the_spans(rt) -> TierConfig:
    """A budget that holds what never moves (documents, facts, codebooks, rows, log) and half the
    spans' bytes: reachable by demoting and dropping, without evicting."""
    inv = inventory(rt.store)
    floor = inv.kept_bytes + inv.log_bytes + inv.row_bytes
    return TierConfig(floor + sum(s.bytes for s in inv.spans) // 2, high_water=1.0, low_water=1.0)


def fact_graft(rt) -> str:
    """A fact graft with its own K/V (the policy plane's kind that never moves)."""
    from grm.kv import cache_from_kv, kv_from_cache
    from grm.kv.forward import prefill

    sinks = rt.exact.sinks()
    ids = rt.lm.tokenizer.encode("The vault code is 4512.")
    cache = cache_from_kv(sinks)
    prefill(rt.lm.model, cache, ids, sinks.tokens)
    g = rt.grafts.harvest(kv_from_cache(cache, sinks.tokens), sinks.tokens, "The vault code is 4512.", ids,
                          kind="fact", standalone=True)
    return g.id


def servable(rt) -> list[str]:
    """Every span served from its tier: exact verifies, archive mounts, text has its ids to re-read."""
    bad = []
    for s in inventory(rt.store).spans:
        rec = rt.store.get(s.tenant, s.kind, s.key)
        if s.tier == "exact" and rt.store.read_payload(rec) is None:
            bad.append(f"{s.key[:8]} exact but its payload does not verify")
        elif s.tier == "archive" and rt.archive.load(s.tenant, s.key) is None:
            bad.append(f"{s.key[:8]} archived but the archive does not mount")
        elif s.tier == "text" and (rec is None or not rec.text or not isinstance(rec.meta.get("ids"), list)):
            bad.append(f"{s.key[:8]} text-only without its text and ids")
    return bad


def test_a_run_brings_the_store_under_budget_and_every_span_stays_servable(rt) -> None:
    fact = fact_graft(rt)
    cfg = half_the_spans(rt)
    policy = TieringPolicy(rt.store, rt.lm, rt.dialect, cfg, SMALL, archive=rt.archive)
    rep = policy.run()
    after = inventory(rt.store)
    assert rep.after == after.footprint <= cfg.budget
    assert rep.trained is not None and codebook_versions(rt.store, rt.lm.identity) == [rep.trained]
    tiers = after.by_tier()
    assert tiers["archive"]["spans"] > 0 and tiers["exact"]["spans"] > 0
    assert servable(rt) == []
    f = rt.store.get("default", GRAFT, fact)
    assert f.payload is not None and "tier" not in f.meta  # facts never move
    assert rep.gc_freed > 0  # the exact payload files went, after a checkpoint
    ans = rt.ask("What is the vault code?", max_new_tokens=4)  # the default path still answers
    assert ans.mode == "exact-section"


def test_a_tighter_budget_evicts_archived_spans_to_text_and_they_are_re_read(rt) -> None:
    fact = fact_graft(rt)
    TieringPolicy(rt.store, rt.lm, rt.dialect, half_the_spans(rt), SMALL, archive=rt.archive).run()
    inv = inventory(rt.store)
    tight = inv.kept_bytes + inv.log_bytes + inv.row_bytes + 2000
    rep = TieringPolicy(rt.store, rt.lm, rt.dialect, TierConfig(tight, low_water=0.9), SMALL,
                        archive=rt.archive).run()
    assert rep.to_json()["evict"] > 0
    after = inventory(rt.store)
    assert after.by_tier()["text"]["spans"] > 0
    assert servable(rt) == []
    assert rt.store.get("default", GRAFT, fact).payload is not None
    text = next(s for s in after.spans if s.tier == "text" and s.kind == BLOCK)
    assert rt.store.get("default", ARCHIVE, text.key) is None
    g = next(g for g in rt.grafts.grafts("document") if g.block == text.key)
    assert rt.grafts.load(g.id) is None  # no K/V left: the arena re-reads its text
    ans = rt.ask("What is the vault code?", mode="grafts", max_new_tokens=4)
    assert ans.mode == "grafts"


def test_dry_run_says_what_would_move_and_why_and_writes_nothing(rt) -> None:
    lsn = rt.store.last_lsn
    rows = sorted((r.kind, r.key, r.payload) for r in rt.store.records())
    rep = TieringPolicy(rt.store, rt.lm, rt.dialect, half_the_spans(rt), SMALL,
                        archive=rt.archive).run(dry_run=True)
    assert rep.moves and all(m["why"] for m in rep.moves)
    assert {m["action"] for m in rep.moves} >= {"demote"}
    assert "codebooks would be trained first" in rep.note
    assert rt.store.last_lsn == lsn and sorted((r.kind, r.key, r.payload) for r in rt.store.records()) == rows


def test_without_enough_text_for_codebooks_cold_spans_go_to_text(rt) -> None:
    cfg = half_the_spans(rt)
    big = PolicyConfig(min_train_tokens=10**6, train_tokens=10**6)
    rep = TieringPolicy(rt.store, rt.lm, rt.dialect, cfg, big, archive=rt.archive).run()
    assert rep.trained is None and rep.to_json()["demote"] == 0 and rep.to_json()["drop"] > 0
    assert any("tokens of stored text" in m["why"] for m in rep.moves)
    assert rep.after <= cfg.budget and servable(rt) == []


def test_no_budget_means_no_moves(rt) -> None:
    rep = TieringPolicy(rt.store, rt.lm, rt.dialect, None, SMALL, archive=rt.archive).run()
    assert rep.moves == [] and "no store budget" in rep.note


def test_the_default_ask_mounts_an_archived_section_lossy_and_counts_its_use(rt) -> None:
    TieringPolicy(rt.store, rt.lm, rt.dialect, half_the_spans(rt), SMALL, archive=rt.archive,
                  uses=rt.uses).run()
    archived = [s.key for s in inventory(rt.store).spans if s.tier == "archive" and s.kind == BLOCK]
    assert archived
    sinks = rt.exact.sinks().tokens
    for key in archived:  # a question in an archived section's own words selects it
        words = rt.store.get("default", BLOCK, key).text.split()
        ans = rt.ask(" ".join(words[len(words) // 2:][:10]) + "?", max_new_tokens=2)
        if ans.mounted and ans.mounted[0]["id"] == key:
            break
    else:
        pytest.fail("no archived section was selected by its own words")
    assert ans.mode == "exact-section" and ans.lossy and ans.tokens_from_memory > sinks
    assert rt.uses.pending() >= 1  # the mount was counted for the next run's heat
    assert rt.exact.stats()["tiered_reads"] >= 1  # its exact row was skipped quietly, not a miss
