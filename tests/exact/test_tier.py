"""The resident host tier (grm/exact/tier.py) and the runtime that keeps it.

Expectations:
1. Budget: least recently used first; an entry larger than the budget is not kept; the entry
   just put is not the one evicted; with two tenants the one over its fair share loses first.
2. A runtime with `host_budget` mounts a repeated context from RAM: every block a tier hit, no
   store read (the payload files can be gone), K/V and logits bit-identical to the store load.
3. Invalidation: a deleted block record is never served from the tier (a miss, recomputed); a
   record rewritten with other bytes is not served the old entry.
4. Tenants never meet: one tenant's entries are never another's hits, and each sees only its own
   figures. Encrypted stores and sections (`load_verified`) go through the tier too.
5. Off by default: a runtime without a budget keeps nothing.
"""

from __future__ import annotations

import shutil

import pytest
import torch

from grm.exact.tier import HostTier, TierKey
from grm.kv import KV
from grm.store.kinds import BLOCK
from tests.conftest import lorem

DOC = lorem(10, seed=11)


def _kv(nbytes: int) -> KV:
    n = nbytes // 8  # float32 keys + values
    return KV(torch.zeros(1, 1, n, 1), torch.zeros(1, 1, n, 1))


def _key(tenant: str, i: int) -> TierKey:
    return TierKey(tenant, f"fp{i}", f"p{i}", 100, "parent", i)


def test_least_recently_used_goes_first_and_oversized_is_not_kept():
    tier = HostTier(budget=3000)
    for i in range(3):
        tier.put(_key("a", i), _kv(1000))
    assert tier.get(_key("a", 0)) is not None  # 0 is now the most recent; 1 the least
    tier.put(_key("a", 3), _kv(1000))
    assert tier.get(_key("a", 1)) is None and tier.get(_key("a", 0)) is not None
    tier.put(_key("a", 9), _kv(4000))  # larger than the whole budget
    assert tier.get(_key("a", 9)) is None and tier.nbytes == 3000
    s = tier.stats("a")
    assert (s["evictions"], s["inserts"], s["blocks"], s["bytes"]) == (1, 4, 3, 3000)


def test_the_tenant_over_its_fair_share_loses_first():
    tier = HostTier(budget=4000)
    for i in range(4):
        tier.put(_key("busy", i), _kv(1000))
    tier.put(_key("quiet", 0), _kv(1000))  # over budget: busy holds 4000 of a 2000 share
    assert tier.get(_key("quiet", 0)) is not None and tier.get(_key("busy", 0)) is None
    tier.put(_key("quiet", 1), _kv(1000))
    assert tier.stats("busy")["blocks"] == 2 and tier.stats("quiet")["blocks"] == 2
    tier.put(_key("busy", 7), _kv(1000))  # busy at its share now: its own oldest goes
    assert tier.stats("quiet")["blocks"] == 2 and tier.get(_key("busy", 2)) is None


@pytest.fixture(scope="module")
def golden(tmp_path_factory):
    from grm.runtime import Runtime

    work = tmp_path_factory.mktemp("tier")
    (work / "doc.txt").write_text(DOC)
    with Runtime.open(store=work / "store", model="tiny-random-llama", threads=2, device="cpu",
                      block_tokens=64) as rt:
        rt.ingest([work / "doc.txt"], layout="chain", progress=False)
    return work / "store"


@pytest.fixture()
def tiered(make_runtime, golden, tmp_path):
    shutil.copytree(golden, tmp_path / "store")
    return make_runtime(block_tokens=64, host_budget=64 << 20)


def _payload_files(rt):
    return [rt.store.payload_path(r) for r in rt.store.records(rt.config.tenant, BLOCK)]


def test_a_repeated_context_mounts_from_ram_bit_identical(tiered):
    rt = tiered
    prompt = DOC + "\n\nQuestion: what is first?\nAnswer:"
    _c, store_logits, _s, _m, first = rt.exact_context(prompt)
    assert first.blocks and rt.exact.counters["tier_hits"] == 0
    for path in _payload_files(rt):  # from now on a store read would be a miss
        path.unlink()
    _c, tier_logits, _s, from_memory, again = rt.exact_context(prompt)
    assert rt.exact.counters["tier_hits"] == len(first.blocks) == len(again.blocks)
    assert torch.equal(first.kv.keys, again.kv.keys) and torch.equal(first.kv.values, again.kv.values)
    assert torch.equal(store_logits, tier_logits) and from_memory == first.tokens
    s = rt.stats()["host_tier"]
    assert s["hits"] == len(first.blocks) and s["bytes"] > 0 and s["bytes_served"] == s["bytes"]


def test_a_deleted_record_is_never_served_from_the_tier(tiered):
    rt = tiered
    first = rt.exact.load_prefix(DOC)
    victim = first.blocks[2]
    assert rt.store.delete(rt.config.tenant, BLOCK, victim.key)
    hits = rt.exact.counters["tier_hits"]
    again = rt.exact.load_prefix(DOC)
    assert [r.key for r in again.blocks] == [r.key for r in first.blocks[:2]]
    assert rt.exact.counters["tier_hits"] == hits + 2  # the blocks before it, from RAM; nothing after


def test_a_rewritten_record_is_not_served_the_old_entry(tiered):
    rt = tiered
    first = rt.exact.load_prefix(DOC)
    victim = first.blocks[1]
    kv, _ = KV.from_bytes(rt.store.read_payload(victim))
    meta = rt.exact.bind(rt.config.tenant, victim.key, victim.parent, int(victim.meta["seat"]), victim.text,
                         victim.meta["ids"])
    other = KV(kv.keys + 1, kv.values)  # other bytes under the same record (as a re-ingest of damage would)
    rt.store.put(rt.config.tenant, BLOCK, victim.key, parent=victim.parent, text=victim.text,
                 payload=other.to_bytes(meta), meta=victim.meta)
    again = rt.exact.load_prefix(DOC)
    t0 = int(victim.meta["seat"])
    got = again.kv.keys[:, :, t0: t0 + other.tokens]
    assert torch.equal(got, other.keys) and not torch.equal(got, kv.keys)  # the new bytes, read from the store


def test_tenants_never_meet_in_the_tier(make_runtime, tmp_path):
    doc = tmp_path / "doc.txt"
    doc.write_text(DOC)
    rt = make_runtime(block_tokens=64, host_budget=64 << 20)
    other = rt.for_tenant("other")
    assert other.tier is rt.tier  # one budget for the process
    rt.ingest([doc], layout="chain", progress=False)
    other.ingest([doc], layout="chain", progress=False)
    rt.exact.load_prefix(DOC)
    got = other.exact.load_prefix(DOC)
    assert got.blocks and other.exact.counters["tier_hits"] == 0  # its own blocks, read from the store
    assert all(r.tenant == "other" for r in got.blocks)
    a, b = rt.tier.stats("default"), rt.tier.stats("other")
    assert a["hits"] == 0 and b["hits"] == 0 and a["blocks"] == b["blocks"] == len(got.blocks)
    other.exact.load_prefix(DOC)
    assert rt.tier.stats("other")["hits"] == len(got.blocks) and rt.tier.stats("default")["hits"] == 0


def test_encrypted_store_and_sections_go_through_the_tier(make_runtime, tmp_path):
    doc = tmp_path / "doc.txt"
    doc.write_text(DOC)
    rt = make_runtime(block_tokens=64, master_key=b"k" * 32, host_budget=64 << 20)
    rt.ingest([doc], layout="both", progress=False)
    first = rt.exact.load_prefix(DOC)
    second = rt.exact.load_prefix(DOC)
    assert rt.exact.counters["tier_hits"] == len(first.blocks) > 0 and rt.exact.counters["scatter_loads"] == 0
    assert torch.equal(first.kv.keys, second.kv.keys)
    rec = rt.sections.select("station harbor", k=1)[0].record
    hits = rt.exact.counters["tier_hits"]
    a, _ = rt.sections.load(rec)
    b, _ = rt.sections.load(rec)
    assert a is not None and torch.equal(a.keys, b.keys) and rt.exact.counters["tier_hits"] >= hits + 1


def test_no_budget_keeps_nothing(make_runtime, golden, tmp_path):
    shutil.copytree(golden, tmp_path / "store")
    rt = make_runtime(block_tokens=64)
    assert rt.tier is None and rt.stats()["host_tier"] is None
    rt.exact.load_prefix(DOC)
    rt.exact.load_prefix(DOC)
    assert rt.exact.counters["tier_hits"] == 0 and rt.exact.counters["scatter_loads"] > 0
