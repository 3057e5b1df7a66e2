"""Grafts on tiny random models: harvest, fail-closed load, re-seat parity, arena, repair, paging,
routing, slicing.

Expectations:
1. A harvested graft loads back bit-identical; a tampered payload, another tenant or another
   model's record is never served (None / unknown id).
2. Re-seat parity: a graft read at seat a and mounted at b != a gives the logits of reading the
   same text after the sinks with positions starting at b (within fp32 rotation noise), and
   mounted at its own seat it is not rotated at all (bit-identical).
3. Repair of every token equals reading the grafts' texts in context, call for call.
4. Paging: nothing over budget stays resident after a turn; page-ins come from the host plane,
   then from the store when the host plane is empty.
5. Routing finds the graft holding the query's identifiers, never a retired one, and never both a
   graft and its own slice; an empty query is a UserInputError.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

from grm.errors import UserInputError
from grm.grafts import Mount, PagingConfig, Residency, build
from grm.grafts.arena import append
from grm.kv import cache_from_kv, kv_from_cache, new_cache, reseat_kv
from grm.kv.forward import prefill

TEXTS = ["The harbor master of Quintar keeps the blue ledger.", "Velmora's orchard has 7781 apple trees.",
         "A winter meeting was held in the north village."]


def read_alone(rt, text: str):
    """(kv, ids, seat): `text` read alone right after the sinks."""
    sinks = rt.exact.sinks()
    ids = rt.lm.tokenizer.encode(text)
    cache = cache_from_kv(sinks)
    prefill(rt.lm.model, cache, ids, sinks.tokens)
    return kv_from_cache(cache, sinks.tokens), ids, sinks.tokens


def harvest(rt, text: str, kind: str = "evidence", salt: str = ""):
    kv, ids, seat = read_alone(rt, text)
    return rt.grafts.harvest(kv, seat, text, ids, kind, salt=salt, standalone=True)


def test_harvest_round_trip_and_fail_closed(make_runtime, tmp_path):
    rt = make_runtime()
    g = harvest(rt, TEXTS[0])
    kv, _, _ = read_alone(rt, TEXTS[0])
    loaded = rt.grafts.load(g.id)
    assert torch.equal(loaded.keys, kv.keys) and torch.equal(loaded.values, kv.values)
    assert g.kind == "evidence" and g.tokens == kv.tokens and g.record.meta["dense"]
    assert harvest(rt, TEXTS[0]).id == g.id  # idempotent
    # flip one byte of the payload file: a miss, not an error
    path = rt.store.payload_path(g.record)
    data = bytearray(path.read_bytes())
    data[-5] ^= 0x40
    path.write_bytes(bytes(data))
    assert rt.grafts.load(g.id) is None
    assert rt.exact.counters["block_misses"] >= 1
    rt.close()
    # another tenant never sees it
    other = make_runtime(tenant="other", store=tmp_path / "store")
    with pytest.raises(UserInputError):
        other.grafts.get(g.id)
    assert other.grafts.load(g.id) is None and other.grafts.route("harbor master Quintar") == []


def test_read_alone_stores_the_span_as_read_after_the_sinks_and_reads_it_once(make_runtime, monkeypatch):
    """GraftMemory.read_alone: the graft holds the K/V of the text read alone after the sinks (the
    same as harvesting that reading), and the same text, kind and salt again is the stored graft,
    not a second forward pass."""
    rt = make_runtime()
    g = rt.grafts.read_alone(TEXTS[0], "fact", salt="fact:1", extra={"fact": "f-1"})
    kv, ids, seat = read_alone(rt, TEXTS[0])
    loaded = rt.grafts.load(g.id)
    assert torch.equal(loaded.keys, kv.keys) and torch.equal(loaded.values, kv.values)
    assert g.kind == "fact" and g.record.meta["seat"] == seat and g.record.meta["ids"] == ids
    assert g.record.meta["fact"] == "f-1"
    assert g.id == rt.grafts.harvest(kv, seat, TEXTS[0], ids, "fact", salt="fact:1").id
    import grm.grafts.memory as memory

    monkeypatch.setattr(memory, "read_after_sinks", lambda *a: pytest.fail("read again"))
    assert rt.grafts.read_alone(TEXTS[0], "fact", salt="fact:1").id == g.id
    assert rt.grafts.read_alone(TEXTS[0], "fact", ids=ids, salt="fact:1").id == g.id


def test_bad_inputs(make_runtime):
    rt = make_runtime()
    harvest(rt, TEXTS[0])
    for q in ("", "   "):
        with pytest.raises(UserInputError):
            rt.grafts.route(q)
    with pytest.raises(UserInputError):
        rt.grafts.get("0" * 32)
    with pytest.raises(UserInputError):
        rt.grafts.slice("nope", [(0, 1)])
    kv, ids, seat = read_alone(rt, TEXTS[1])
    with pytest.raises(UserInputError):
        rt.grafts.harvest(kv, seat, TEXTS[1], ids, "gossip")


@pytest.mark.parametrize("model", ["tiny-random-llama", "tiny-random-gemma3"])
def test_reseat_equals_reading_everything_shifted(make_runtime, model):
    """Re-seating by d is the rotation a forward pass at +d applies: read [sinks | span] with every
    position shifted by d and the span's keys equal the re-seated ones (values do not move)."""
    rt = make_runtime(model=model)
    kv, ids, a = read_alone(rt, TEXTS[1])
    sink_ids = rt.exact.sink_ids
    for d in (1, 37, 500):
        cache = new_cache()
        prefill(rt.lm.model, cache, sink_ids + ids, d)
        ref = kv_from_cache(cache, a, a + len(ids))
        moved = reseat_kv(kv, rt.dialect, d)
        assert ((moved.keys - ref.keys).abs().max() / ref.keys.abs().max()) < 1e-4
        assert (moved.values - ref.values).abs().max() < 1e-4


def test_reseat_parity_against_reading_at_the_new_seats(make_runtime):
    """The issue's parity on the tiny llama: the span mounted at b vs read after the sinks at
    positions b.. (a gap after the sinks, which the mounted graft never saw)."""
    rt = make_runtime()
    sinks = rt.exact.sinks()
    kv, ids, a = read_alone(rt, TEXTS[1])
    probe = rt.lm.tokenizer.encode(" How many trees?")
    for b in (a + 1, a + 37, a + 500):
        cache = cache_from_kv(sinks)
        append(cache, reseat_kv(kv, rt.dialect, b - a))
        mounted = prefill(rt.lm.model, cache, probe, b + len(ids))
        ref_cache = cache_from_kv(sinks)
        prefill(rt.lm.model, ref_cache, ids, b)
        ref = prefill(rt.lm.model, ref_cache, probe, b + len(ids))
        assert (mounted - ref).abs().max() < 1e-3
        assert int(mounted.argmax()) == int(ref.argmax())


def test_mounting_at_the_origin_seat_is_not_rotated(make_runtime):
    rt = make_runtime()
    sinks = rt.exact.sinks()
    kv, ids, a = read_alone(rt, TEXTS[2])
    arena = build(rt.lm.model, rt.dialect, sinks, [Mount("g", ids, a, kv)])
    assert arena.seat == a + len(ids) and arena.from_memory == arena.seat and arena.computed == 0
    assert torch.equal(arena.cache.layers[0].keys[0, :, a:], kv.keys[0])  # bit-identical: no rotation


def test_full_repair_equals_reading_in_context(make_runtime):
    rt = make_runtime()
    sinks = rt.exact.sinks()
    parts = [read_alone(rt, t) for t in TEXTS[:2]]
    mounts = [Mount(str(i), ids, seat, kv) for i, (kv, ids, seat) in enumerate(parts)]
    q = rt.lm.tokenizer.encode(" Question?")
    repaired = build(rt.lm.model, rt.dialect, sinks, mounts, repair=10_000)
    assert repaired.computed == sum(len(ids) for _, ids, _ in parts)
    got = prefill(rt.lm.model, repaired.cache, q, repaired.seat)
    ref_cache, seat = cache_from_kv(sinks), sinks.tokens
    for _, ids, _ in parts:
        prefill(rt.lm.model, ref_cache, ids, seat)
        seat += len(ids)
    ref = prefill(rt.lm.model, ref_cache, q, seat)
    assert torch.equal(got, ref)
    plain = build(rt.lm.model, rt.dialect, sinks, mounts)
    assert plain.computed == 0 and not torch.equal(prefill(rt.lm.model, plain.cache, q, plain.seat), ref)
    some = build(rt.lm.model, rt.dialect, sinks, mounts, repair=3)
    assert some.computed == 6 and some.seat == plain.seat


def test_paging_keeps_the_device_plane_under_budget(make_runtime):
    rt = make_runtime()
    grafts = [harvest(rt, t) for t in TEXTS]
    one = rt.grafts.load(grafts[0].id).nbytes
    planes = Residency(PagingConfig(device_budget=one // 2, host_budget=10 * one), rt.grafts.load)
    assert planes.get(grafts[0].id) is not None and planes.get(grafts[1].id) is not None
    report = planes.end_turn()
    two = one + rt.grafts.load(grafts[1].id).nbytes
    assert report["device_bytes"] == 0 and report["page_outs"] == 2 and report["peak_device_bytes"] == two
    assert planes.counters["host_page_ins"] == 2  # both read from the store once
    planes.get(grafts[0].id)
    assert planes.counters["host_page_ins"] == 2 and planes.counters["device_page_ins"] == 3  # from the host plane
    planes.end_turn()
    # an empty host plane sends the next page-in to the store again
    tight = Residency(PagingConfig(device_budget=0, host_budget=0), rt.grafts.load)
    for g in grafts:
        tight.get(g.id)
        tight.end_turn()
    tight.get(grafts[0].id)
    assert tight.counters["host_page_ins"] == 4 and tight.device_bytes == one
    big = Residency(PagingConfig(device_budget=10 * one), rt.grafts.load)
    for g in grafts:
        big.get(g.id)
    assert big.end_turn()["page_outs"] == 0 and len(big.resident()) == 3


def test_routing_explains_and_excludes(make_runtime):
    rt = make_runtime()
    grafts = [harvest(rt, t) for t in TEXTS]
    routed = rt.grafts.route("How many apple trees does Velmora's orchard have, 7781?")
    assert routed[0].graft.id == grafts[1].id
    assert "Velmora's" in routed[0].identifiers or "7781" in routed[0].identifiers
    assert routed[0].why()["bm25"] > 0
    assert rt.grafts.route("zzzz qqqq") == []  # nothing in common: nothing mounted
    rt.grafts.retire([grafts[1].id], into="digest-1")
    assert grafts[1].id not in [r.graft.id for r in rt.grafts.route("Velmora orchard 7781")]
    assert rt.grafts.get(grafts[1].id).retired  # kept, not routed
    dense = rt.grafts.route("Velmora orchard", channel="dense")
    assert dense and all(r.graft.id != grafts[1].id for r in dense)


def test_slicing_makes_children_with_lineage(make_runtime):
    rt = make_runtime()
    g = harvest(rt, TEXTS[1])
    parent_kv = rt.grafts.load(g.id)
    kids = rt.grafts.slice(g.id, [(0, 10), (10, g.tokens)])
    assert [k.span for k in kids] == [(0, 10), (10, g.tokens)]
    assert all(k.parent == g.id and k.sources == (g.id,) for k in kids)
    assert kids[1].seat == g.seat + 10
    kv1 = rt.grafts.load(kids[1].id)
    assert torch.equal(kv1.keys, parent_kv.keys[:, :, 10:]) and torch.equal(kv1.values, parent_kv.values[:, :, 10:])
    with pytest.raises(UserInputError):
        rt.grafts.slice(g.id, [(5, 5)])
    with pytest.raises(UserInputError):
        rt.grafts.slice(g.id, [(0, g.tokens + 1)])
    ids = [r.graft.id for r in rt.grafts.route("Velmora orchard apple trees 7781", k=3)]
    assert not ({g.id} & set(ids) and {k.id for k in kids} & set(ids))  # never a graft and its own slice


def test_sections_ingest_adopts_grafts_sharing_payloads(make_runtime, tmp_path):
    from tests.conftest import lorem

    doc = tmp_path / "doc.txt"
    doc.write_text(lorem(8, 3) + "\n\nThe vault code of Quintar is 7781.\n")
    rt = make_runtime()
    rt.ingest([doc], layout="sections", progress=False)
    grafts = rt.grafts.grafts(kind="document")
    assert grafts and all(g.block and g.record.payload is None for g in grafts)
    before = rt.store.stats()
    rt.ingest([doc], layout="sections", progress=False)
    after = rt.store.stats()
    assert [g.id for g in rt.grafts.grafts(kind="document")] == [g.id for g in grafts]  # idempotent
    assert after["tenants"] == before["tenants"]
    answer = rt.ask("What is the vault code of Quintar?", mode="grafts", max_new_tokens=4)
    assert answer.mode == "grafts" and answer.mounted and answer.tokens_from_memory > 0
    blocks = {g.block: g for g in grafts}
    hit = rt.grafts.get(answer.mounted[0]["id"])
    assert "Quintar" in hit.text and hit.block in blocks
    kv = rt.grafts.load(hit.id)
    sec_kv, _ = rt.sections.load(rt.store.get("default", "block", hit.block))
    assert torch.equal(kv.keys, sec_kv.keys)


def test_nothing_is_served_to_another_model(make_runtime, tmp_path):
    rt = make_runtime()
    g = harvest(rt, TEXTS[0])
    rt.close()
    other = make_runtime(model="tiny-random-gemma3", store=tmp_path / "store")
    assert other.grafts.load(g.id) is None and other.grafts.grafts() == []
    assert other.grafts.route("harbor master Quintar blue ledger") == []


def test_a_demoted_document_graft_mounts_from_the_archive_reported_lossy(make_runtime, tmp_path):
    from grm.archive.codebook_store import save_codebooks
    from grm.archive.tier import ArchiveConfig
    from grm.archive.train import TrainConfig, train_codebooks
    from tests.conftest import lorem

    doc = tmp_path / "doc.txt"
    doc.write_text(lorem(6, 3) + "\n\nThe vault code of Quintar is 7781. " + lorem(2, 4))
    rt = make_runtime(section_tokens=128)
    rt.ingest([doc], layout="sections", progress=False)
    question = "What is the vault code of Quintar?"
    exact = rt.ask(question, mode="grafts", max_new_tokens=3)
    gid = exact.mounted[0]["id"]
    g = rt.grafts.get(gid)
    assert not exact.lossy and len(exact.mounted) == 1 and g.tokens > 32
    exact_kv = rt.grafts.load(gid)
    books = train_codebooks(rt.lm, rt.dialect, lorem(20, seed=7), TrainConfig(k=32, iters=5))
    save_codebooks(rt.store, books)
    rt.archive.demote(rt.config.tenant, books, keys=[g.block], config=ArchiveConfig(recent=32, drop_exact=True))
    rt.residency.drop(gid)
    kv = rt.grafts.load(gid)
    assert kv is not None and gid in rt.grafts.lossy_ids
    assert torch.equal(kv.values[:, :, -32:], exact_kv.values[:, :, -32:])  # the exact window
    assert not torch.equal(kv.values, exact_kv.values)  # the rest was quantized
    lossy = rt.ask(question, mode="grafts", max_new_tokens=3)
    assert lossy.mounted[0]["id"] == gid and lossy.lossy
    assert rt.stats()["archive"]["archive_hits"] >= 1


def test_a_demoted_evidence_graft_keeps_its_row_and_mounts_lossy(make_runtime):
    from grm.archive.codebook_store import save_codebooks
    from grm.archive.tier import ArchiveConfig
    from grm.archive.train import TrainConfig, train_codebooks
    from tests.conftest import lorem

    rt = make_runtime()
    text = "Chat turn: the harbor master of Quintar keeps the blue ledger. " + lorem(1, 5)
    g = harvest(rt, text)
    exact_kv = rt.grafts.load(g.id)
    assert g.tokens > 40 and g.id not in rt.grafts.lossy_ids
    books = train_codebooks(rt.lm, rt.dialect, lorem(20, seed=7), TrainConfig(k=32, iters=5))
    save_codebooks(rt.store, books)
    report = rt.archive.demote(rt.config.tenant, books, keys=[g.id], kinds=("graft",),
                               config=ArchiveConfig(recent=32, drop_exact=True, keep_salient="names",
                                                    salient_context=0, salient_storage="float16"))
    assert report.demoted == [g.id] and report.dropped_exact == 1
    pinned = rt.archive.pinned_positions(list(g.ids)[:-32], "names")  # "Chat", "Quintar" ...
    assert rt.store.get(rt.config.tenant, "archive", g.id).meta["pinned"] == len(pinned) > 0
    rec = rt.store.get(rt.config.tenant, "graft", g.id)
    assert rec.payload is None and rec.meta["archived"] == books.version  # the row stays, its payload goes
    assert rt.grafts.get(g.id).summary()["archived"] == books.version  # `grm grafts show` says so
    kv = rt.grafts.load(g.id)
    assert kv is not None and g.id in rt.grafts.lossy_ids
    assert torch.equal(kv.values[:, :, -32:], exact_kv.values[:, :, -32:])  # the exact window
    assert torch.equal(kv.values[:, :, pinned], exact_kv.values[:, :, pinned].half().float())  # salient: 16-bit
    assert not torch.equal(kv.values, exact_kv.values)
    assert g.id in [r.graft.id for r in rt.grafts.route("Quintar harbor master blue ledger")]
    with pytest.raises(UserInputError, match="archived"):
        rt.grafts.slice(g.id, [(0, 10)])  # a slice would store dequantized K/V as exact
    again = rt.archive.demote(rt.config.tenant, books, keys=[g.id], kinds=("graft",))
    assert again.demoted == [] and g.id in again.skipped
    rt.close()
    plain = make_runtime()  # the same store, no archive tier attached: a miss, never an error
    plain.grafts.archive = None
    assert plain.grafts.load(g.id) is None


def test_sibling_slices_may_mount_together_but_never_with_their_parent(make_runtime):
    rt = make_runtime()
    g = harvest(rt, "Velmora orchard 7781 apple trees. Quintar harbor 7781 blue ledger.")
    kids = rt.grafts.slice(g.id, [(0, 30), (30, g.tokens)])
    ids = [r.graft.id for r in rt.grafts.route("Velmora Quintar 7781", k=3)]
    assert not (g.id in ids and {k.id for k in kids} & set(ids))
    rt.grafts.retire([g.id], into=kids[0].id)  # as `cull graft` does
    ids = [r.graft.id for r in rt.grafts.route("Velmora Quintar 7781", k=3)]
    assert set(ids) == {k.id for k in kids}  # both halves hold an identifier: both mounted


def test_a_routed_turn_brings_the_later_turn_naming_its_rare_words(make_runtime):
    rt = make_runtime(later=1)
    old = harvest(rt, "User: The code for my gym locker is 4817.\n\n", salt="1")
    harvest(rt, "User: The weather was grey all week.\n\n", salt="2")
    new = harvest(rt, "User: not 4817 anymore, changed the combo to 2093\n\n", salt="3")
    asked = harvest(rt, "User: What is the code 4817 for?\n\n", salt="4")  # only asks: never brought
    routed = rt.grafts.route("gym locker code", channel="lexical")
    assert [r.graft.id for r in routed] == [old.id]
    got = rt.grafts.later(routed)
    assert [r.graft.id for r in got] == [new.id, old.id]  # mounted after its source, nearest the question
    assert got[0].identifiers == ("4817",) and got[0].score == routed[0].score
    assert asked.id not in [r.graft.id for r in got]
    assert rt.grafts.later(got[:1]) == got[:1]  # nothing said after the newest turn
    assert rt.grafts.later(routed, exclude=frozenset({new.id})) == routed  # an excluded turn is never brought
    rt.grafts.config = dataclasses.replace(rt.grafts.config, later=0)  # --later 0
    assert rt.grafts.later(routed) == routed


def test_a_rare_word_is_one_few_grafts_hold(make_runtime):
    rt = make_runtime(later=1)
    src = harvest(rt, "User: My sister lives in Tacoma.\n\n", salt="1")
    for i in range(4):  # "sister" in five grafts: no longer rare (RouteConfig.rare 3)
        harvest(rt, f"User: my sister phoned on day {i}\n\n", salt=f"s{i}")
    routed = rt.grafts.route("Tacoma", channel="lexical")
    assert [r.graft.id for r in routed] == [src.id]
    assert rt.grafts.later(routed) == routed
