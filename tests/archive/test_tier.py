"""The archive tier on tiny-random-llama: demote stored blocks, mount them back (lossy), fail closed.

Expectations:
1. A demoted block loads back with the block's shape and dtype, close to the exact K/V but not
   equal; its last `recent` tokens (none by default) come back bit-identical.
2. A mount from the archive is flagged lossy and counted as an archive hit, never an exact hit.
3. Mounting at another seat equals re-seating the mount at its own seat (rotary algebra).
4. Damaged or misbound archive records and another model's codebooks are misses (None) or
   refused (UserInputError at demotion), never served.
5. --drop-exact removes the exact row in the same commit; the text and the document stay.
6. Salient tokens kept apart (--keep-salient) come back as their stored rows (float16 rounding,
   or int8 per row) at their seat, re-seated by one rotation elsewhere; every other token is the
   plain archive's reconstruction.
"""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import torch

from grm.archive.archived import ArchivedSpan
from grm.archive.codebook_store import TENANT as SYSTEM, codebook_key, save_codebooks
from grm.archive.rvq import RVQCodes
from grm.archive.salient import salient_mask
from grm.archive.tier import KIND, ArchiveConfig, ArchiveTier, load_archived, tier_stats
from grm.archive.train import TrainConfig, auto_k, train_codebooks
from grm.cli import main
from grm.errors import UserInputError
from grm.kv import KV, reseat_kv
from tests.conftest import lorem

TENANT = "default"
OTHER = "ff" * 32


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    """A tiny-llama runtime with one document ingested as sections and k=32 codebooks stored."""
    from grm.runtime import Runtime

    root = tmp_path_factory.mktemp("tier")
    doc = root / "doc.txt"
    doc.write_text(lorem(7, seed=1))
    rt = Runtime.open(store=root / "store", model="tiny-random-llama", tenant=TENANT, threads=2,
                      section_tokens=128)
    rt.ingest([doc], layout="sections", progress=False)
    books = train_codebooks(rt.lm, rt.dialect, lorem(20, seed=7), TrainConfig(k=32, iters=5))
    save_codebooks(rt.store, books)
    yield rt, books
    rt.close()


def _blocks(rt) -> list:
    return sorted(rt.store.records(TENANT, "block"), key=lambda r: r.lsn)


def _exact(rt, key: str) -> KV:
    return KV.from_bytes(rt.store.read_payload(rt.store.get(TENANT, "block", key)))[0]


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).norm() / b.norm())


def test_demoted_block_loads_back_close_not_equal_with_an_exact_window(env):
    rt, books = env
    tier = ArchiveTier(rt.store, rt.dialect, rt.lm.identity)
    rec = _blocks(rt)[0]
    out = tier.archive(rec, books, ArchiveConfig(recent=32))
    assert not isinstance(out, str), out
    exact = _exact(rt, rec.key)
    mount = tier.load(TENANT, rec.key)
    assert mount is not None and mount.seat == int(rec.meta["seat"])
    assert mount.kv.keys.shape == exact.keys.shape and mount.kv.keys.dtype == exact.keys.dtype
    for got, want in ((mount.kv.keys, exact.keys), (mount.kv.values, exact.values)):
        assert 0.0 < _rel(got[:, :, :-32], want[:, :, :-32]) < 0.5  # close, not equal
        assert torch.equal(got[:, :, -32:], want[:, :, -32:])  # the exact window is exact
    assert mount.exact_tokens == 32 and out.meta["quantized"] == exact.tokens - 32
    # Fewer stages is coarser: the archive really is the codebooks' reconstruction.
    coarse = tier.archive(_blocks(rt)[1], books, ArchiveConfig(key_stages=1, value_stages=1))
    fine = tier.archive(_blocks(rt)[2], books)
    assert fine.meta["tail"] == 0 and fine.meta["quantized"] == fine.meta["tokens"]  # default: no exact tail
    assert not isinstance(coarse, str) and not isinstance(fine, str)
    err = {r.key: _rel(tier.load(TENANT, r.key).kv.values, _exact(rt, r.key).values) for r in (coarse, fine)}
    assert err[coarse.key] > err[fine.key]


def test_archived_mount_is_reported_lossy_never_an_exact_hit(env):
    rt, books = env
    rec = _blocks(rt)[0]
    ArchiveTier(rt.store, rt.dialect, rt.lm.identity).archive(rec, books)
    tier = ArchiveTier(rt.store, rt.dialect, rt.lm.identity)
    before = dict(rt.exact.counters)
    mount = tier.load(TENANT, rec.key)
    assert mount.lossy is True
    assert tier.counters["archive_hits"] == 1 and tier.counters["archive_misses"] == 0
    assert rt.exact.counters == before  # no exact hit was counted
    one_shot = load_archived(rt.store, TENANT, rec.key, rt.dialect, rt.lm.identity)
    assert one_shot.lossy and torch.equal(one_shot.kv.keys, mount.kv.keys)


def test_mounting_at_another_seat_equals_reseating_the_mount(env):
    rt, books = env
    tier = ArchiveTier(rt.store, rt.dialect, rt.lm.identity)
    rec = _blocks(rt)[0]
    tier.archive(rec, books, ArchiveConfig(recent=32))
    home = tier.load(TENANT, rec.key)
    moved = tier.load(TENANT, rec.key, at_seat=home.seat + 300)
    assert moved.seat == home.seat + 300
    want = reseat_kv(home.kv, rt.dialect, 300)
    torch.testing.assert_close(moved.kv.keys, want.keys, rtol=0, atol=1e-5)
    assert torch.equal(moved.kv.values, home.kv.values)
    assert torch.equal(moved.kv.keys[:, :, -32:], want.keys[:, :, -32:])  # the tail: one rotation by the delta


def test_tampered_archive_record_is_a_miss(env):
    rt, books = env
    tier = ArchiveTier(rt.store, rt.dialect, rt.lm.identity)
    rec = _blocks(rt)[3]
    arc = tier.archive(rec, books)
    path = rt.store.payload_path(arc)
    good = path.read_bytes()
    bad = bytearray(good)
    bad[len(bad) // 2] ^= 0x40
    try:
        path.write_bytes(bytes(bad))
        assert tier.load(TENANT, rec.key) is None
        assert tier.counters["archive_misses"] == 1 and tier.counters["archive_hits"] == 0
    finally:
        path.write_bytes(good)
    assert tier.load(TENANT, rec.key) is not None
    # Intact bytes bound to another key (the digest passes, the binding does not): a miss.
    other = _blocks(rt)[4]
    rt.store.put(TENANT, KIND, other.key, meta=arc.meta, payload=good, parent=other.parent, text=other.text)
    assert tier.load(TENANT, other.key) is None
    rt.store.delete(TENANT, KIND, other.key)


def test_damaged_stream_bytes_do_not_parse():
    codes = RVQCodes(np.arange(24, dtype=np.uint8).reshape(1, 2, 2, 6) % 8,
                     np.arange(12, dtype=np.uint8).reshape(1, 2, 1, 6) % 8, 8)
    meta = {"identity": "a", "tenant": "t", "key": "k", "parent": "p", "seat": 4, "tokens": 8, "tail": 2,
            "quantized": 6, "codebook": "v", "k": 8, "key_stages": 2, "value_stages": 1, "source": "s"}
    span = ArchivedSpan(codes, torch.zeros(1, 2, 2, 4), torch.ones(1, 2, 2, 4), meta)
    for codec in ("chaos", "bitpack"):
        data = span.to_bytes(codec)
        back = ArchivedSpan.from_bytes(data)
        assert np.array_equal(back.codes.keys, codes.keys) and np.array_equal(back.codes.values, codes.values)
        with pytest.raises(ValueError):
            ArchivedSpan.from_bytes(data[:-3])
        stream_at = data.rindex(b"GRM")  # the last stream container: break its payload CRC
        bad = bytearray(data)
        bad[stream_at + 25] ^= 0x01
        with pytest.raises(ValueError):
            ArchivedSpan.from_bytes(bytes(bad))


def test_another_models_codebooks_are_refused(env):
    rt, books = env
    other = dataclasses.replace(books, identity=OTHER)
    tier = ArchiveTier(rt.store, rt.dialect, rt.lm.identity)
    rec = _blocks(rt)[5]
    with pytest.raises(UserInputError, match="another model"):
        tier.archive(rec, other)
    with pytest.raises(UserInputError, match="another model"):
        tier.demote(TENANT, other)
    assert rt.store.get(TENANT, KIND, rec.key) is None  # nothing was written
    # Another model's codebook bytes filed under this model's key are not loaded...
    rt.store.put(SYSTEM, "codebook", codebook_key(rt.lm.identity, other.version), payload=other.to_bytes(),
                 parent=rt.lm.identity)
    assert tier.codebooks(other.version) is None
    rt.store.delete(SYSTEM, "codebook", codebook_key(rt.lm.identity, other.version))
    # ...and this model's archive is never served to a tier of another identity.
    tier.archive(rec, books)
    assert ArchiveTier(rt.store, rt.dialect, OTHER).load(TENANT, rec.key) is None
    assert tier.load(TENANT, rec.key) is not None


def test_drop_exact_removes_the_block_row_and_keeps_text_and_document(env):
    rt, books = env
    tier = ArchiveTier(rt.store, rt.dialect, rt.lm.identity)
    rec = _blocks(rt)[-1]
    exact = _exact(rt, rec.key)
    report = tier.demote(TENANT, books, keys=[rec.key], config=ArchiveConfig(recent=32, drop_exact=True))
    assert report.demoted == [rec.key] and report.dropped_exact == 1
    assert rt.store.get(TENANT, "block", rec.key) is None
    arc = rt.store.get(TENANT, KIND, rec.key)
    assert arc.text == rec.text and arc.parent == rec.parent and arc.meta["doc"] == rec.meta["doc"]
    docs = list(rt.store.records(TENANT, "document"))
    assert len(docs) == 1 and rec.text.encode() in rt.store.read_payload(docs[0])
    mount = tier.load(TENANT, rec.key)
    assert mount is not None and mount.lossy and torch.equal(mount.kv.values[:, :, -32:], exact.values[:, :, -32:])


def test_demote_policy_keys_and_skips(env):
    rt, books = env
    tier = ArchiveTier(rt.store, rt.dialect, rt.lm.identity)
    with pytest.raises(UserInputError, match="empty match"):
        tier.demote(TENANT, books, keys=[])
    with pytest.raises(UserInputError, match="no stored"):
        tier.demote(TENANT, books, keys=["0" * 64])
    with pytest.raises(UserInputError, match="cannot demote"):
        tier.demote(TENANT, books, kinds=("document",))
    rec = _blocks(rt)[6]
    assert tier.demote(TENANT, books, keys=[rec.key]).demoted == [rec.key]
    again = tier.demote(TENANT, books, keys=[rec.key])
    assert again.demoted == [] and "already archived" in again.skipped[rec.key]
    # Without a salient rule its context and storage mean nothing: still the same archive.
    same = tier.demote(TENANT, books, keys=[rec.key], config=ArchiveConfig(salient_context=9, salient_storage="float16"))
    assert same.demoted == [] and "already archived" in same.skipped[rec.key]
    tokens = int(rec.meta["tokens"])
    short = tier.demote(TENANT, books, keys=[_blocks(rt)[7].key], config=ArchiveConfig(recent=tokens + 1000))
    assert short.demoted == [] and "exact window" in next(iter(short.skipped.values()))
    blocks = _blocks(rt)
    calls = []
    report = tier.demote(TENANT, books, keep_newest=2, progress=lambda done, total: calls.append((done, total)))
    assert calls == [(i + 1, len(blocks) - 2) for i in range(len(blocks) - 2)]
    archived = {r.key for r in rt.store.records(TENANT, KIND)}
    for r in blocks[:-2]:  # archived now or before, or too short to archive anything
        assert r.key in archived or "exact window" in report.skipped[r.key]
    assert not any(r.key in archived for r in blocks[-2:]) and report.demoted


def test_stats_count_tokens_bytes_and_codebooks(env):
    rt, books = env
    ArchiveTier(rt.store, rt.dialect, rt.lm.identity).demote(TENANT, books, keys=[_blocks(rt)[0].key])
    st = tier_stats(rt.store, TENANT)
    recs = [r for r in rt.store.records(TENANT, KIND)]
    assert st["records"] == len(recs) >= 1
    assert st["tokens"] == sum(r.meta["tokens"] for r in recs) == st["quantized_tokens"] + st["exact_tokens"]
    assert st["payload_bytes"] == sum(r.payload_size for r in recs)
    book_rec = rt.store.get(SYSTEM, "codebook", codebook_key(rt.lm.identity, books.version))
    assert st["codebooks_used"] == [{"identity": rt.lm.identity, "version": books.version,
                                     "bytes": book_rec.payload_size}]
    assert st["archive_only_ratio"] > st["payload_ratio"] > st["all_in_ratio"] > 1.0
    assert tier_stats(rt.store, "nobody")["records"] == 0


def test_auto_k_is_small_for_short_text():
    assert auto_k(100) == 4 and auto_k(5000) == 256 and auto_k(1) == 2 and auto_k(2000) == 64


def test_cli_archive_train_demote_stats(tmp_path, capsys):
    store = tmp_path / "store"
    doc = tmp_path / "doc.txt"
    doc.write_text(lorem(6, seed=3))
    common = ["--store", str(store), "--model", "tiny-random-llama", "--threads", "2", "--json"]

    assert main(["archive", "stats", *common]) == 2  # no store yet: reading commands never create one
    assert "no GRM store" in capsys.readouterr().err
    assert main(["ingest", str(doc), "--layout", "sections", *common]) == 0
    capsys.readouterr()
    assert main(["archive", "demote", "--all", *common]) == 2
    assert "run `grm archive train`" in capsys.readouterr().err
    assert main(["archive", "train", *common, "--k", "16", "--iters", "3"]) == 0
    trained = json.loads(capsys.readouterr().out)
    assert trained["k"] == 16 and trained["train_tokens"] > 0 and trained["storage"] == "int8"
    assert main(["archive", "demote", "beef", *common]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no stored block 'beef'" in err
    assert main(["archive", "demote", *common]) == 2
    capsys.readouterr()
    assert main(["archive", "demote", "--kind", "graft", "--all", *common]) == 0
    grafts = json.loads(capsys.readouterr().out)  # document grafts share their block's payload: skipped
    assert grafts["demoted"] == 0 and grafts["skipped"] >= 1
    assert all("demote the block" in why for why in grafts["skipped_keys"].values())
    assert main(["archive", "demote", "--all", *common]) == 0
    demoted = json.loads(capsys.readouterr().out)
    assert demoted["demoted"] >= 1 and demoted["codebook"] == trained["version"]
    assert main(["archive", "stats", *common]) == 0
    st = json.loads(capsys.readouterr().out)
    assert st["records"] == demoted["demoted"] and st["tokens"] == demoted["tokens"]
    assert [c["version"] for c in st["codebooks_used"]] == [trained["version"]]
    assert [c["storage"] for c in st["codebooks_stored"]] == ["int8"]
    assert st["all_in_ratio"] > 1.0 and st["pinned_tokens"] == 0
    with pytest.raises(SystemExit):
        main(["archive", "demote", "--all", "--keep-salient", "everything", *common])
    assert "invalid choice" in capsys.readouterr().err
    assert main(["archive", "demote", "--all", "--keep-salient", "names", *common]) == 0
    pinned = json.loads(capsys.readouterr().out)
    assert pinned["demoted"] == demoted["demoted"]  # another rule: archived again
    assert main(["archive", "stats", *common]) == 0
    st2 = json.loads(capsys.readouterr().out)
    assert 0 < st2["pinned_tokens"] < st2["tokens"] and st2["payload_ratio"] < st["payload_ratio"]


def test_a_mount_is_exactly_what_the_benchmarked_quantizer_reconstructs(env):
    """The tier and bench/archive.py's quantizer compute the same function: position-free keys
    (rotated back by their seats), RVQ round trip, rotated forward again; values round-tripped."""
    from grm.archive.harvest import position_free, rotate_per_token
    from grm.archive.rvq import RVQQuantizer

    rt, books = env
    tier = ArchiveTier(rt.store, rt.dialect, rt.lm.identity)
    rec = _blocks(rt)[3]
    tier.archive(rec, books, ArchiveConfig(recent=0))
    mount = tier.load(TENANT, rec.key)
    exact = _exact(rt, rec.key)
    seat = int(rec.meta["seat"])
    seats = torch.arange(seat, seat + exact.tokens)
    free = position_free(exact, rt.dialect, seats)
    q = RVQQuantizer(books, books.config.key_stages, books.config.value_stages)
    for layer in range(exact.keys.shape[0]):
        k, v = q.roundtrip(layer, free.keys[layer].float(), free.values[layer].float())
        k = rotate_per_token(k, rt.dialect.inv_freq[layer], seats).to(exact.keys.dtype)
        torch.testing.assert_close(mount.kv.keys[layer], k, rtol=0, atol=1e-5)
        torch.testing.assert_close(mount.kv.values[layer], v.to(exact.values.dtype), rtol=0, atol=1e-6)


def test_salient_rules_pick_numbers_and_capitalized_words():
    pieces = ["The", " code", " is", " 94", "88", ".", " Anna", "belle", " said", " \"", "Oslo", "-", "bound"]
    assert salient_mask(pieces, "none") == [False] * len(pieces)
    assert [p for p, k in zip(pieces, salient_mask(pieces, "digits")) if k] == [" 94", "88"]
    assert [p for p, k in zip(pieces, salient_mask(pieces, "names")) if k] == [
        "The", " 94", "88", " Anna", "belle", "Oslo"]  # a word ends at punctuation: "-bound" is another
    with pytest.raises(ValueError, match="unknown keep-salient rule"):
        salient_mask(pieces, "all")
    with pytest.raises(UserInputError, match="keep-salient"):
        ArchiveConfig(keep_salient="all")
    # With context N the N tokens either side of each salient one are kept too, within the span.
    near = salient_mask(pieces, "digits", context=2)
    assert [i for i, k in enumerate(near) if k] == [1, 2, 3, 4, 5, 6]
    assert salient_mask(pieces, "digits", context=100) == [True] * len(pieces)
    assert salient_mask(pieces, "none", context=3) == [False] * len(pieces)
    with pytest.raises(UserInputError, match="context"):
        ArchiveConfig(keep_salient="digits", salient_context=-1)


def test_salient_tokens_come_back_from_their_rows_and_the_rest_is_the_plain_archive(env):
    rt, books = env
    tier = rt.archive  # the runtime's tier knows the tokenizer
    rec = _blocks(rt)[0]
    exact = _exact(rt, rec.key)
    ids = json.loads(KV.from_bytes(rt.store.read_payload(rec))[1]["ids"])
    pieces = [rt.lm.tokenizer.decode([t]) for t in ids]
    want = [i for i, keep in enumerate(salient_mask(pieces, "names")) if keep]
    assert 0 < len(want) < len(ids)  # sentence starts are capitalized; lorem has no digits

    tier.archive(rec, books)  # (or "already archived" by an earlier test)
    plain = rt.store.get(TENANT, KIND, rec.key)
    home_plain = tier.load(TENANT, rec.key)
    pinned = tier.archive(rec, books, ArchiveConfig(keep_salient="names", salient_context=0, salient_storage="float16"))
    assert not isinstance(pinned, str) and pinned.meta["pinned"] == len(want) and pinned.meta["keep_salient"] == "names"
    layers, heads, _, dim = exact.keys.shape
    assert pinned.meta["pinned_bytes"] == len(want) * (8 + 2 * layers * heads * dim * 2)  # positions + fp16 K/V
    assert pinned.payload_size > plain.payload_size
    home = tier.load(TENANT, rec.key)
    assert home.lossy and home.pinned_tokens == len(want)
    rest = [i for i in range(len(ids)) if i not in set(want)]
    for got, base, ref in ((home.kv.keys, home_plain.kv.keys, exact.keys),
                           (home.kv.values, home_plain.kv.values, exact.values)):
        assert torch.equal(got[:, :, want], ref[:, :, want].half().to(ref.dtype))  # kept: float16-rounded
        assert torch.equal(got[:, :, rest], base[:, :, rest])  # the others: the plain archive's
        assert not torch.equal(got[:, :, rest], ref[:, :, rest])
    moved = tier.load(TENANT, rec.key, at_seat=home.seat + 300)
    rounded = KV(exact.keys[:, :, want].half().float(), exact.values[:, :, want].half().float())
    again = reseat_kv(rounded, rt.dialect, 300)
    assert torch.equal(moved.kv.keys[:, :, want], again.keys)  # one rotation by the delta, like the tail
    assert torch.equal(moved.kv.values[:, :, want], rounded.values)
    # int8 rows (the default): half the row bytes, within half a step of the exact values.
    small = tier.archive(rec, books, ArchiveConfig(keep_salient="names", salient_context=0))
    assert small.meta["salient_storage"] == "int8" and small.meta["pinned"] == len(want)
    assert small.meta["pinned_bytes"] == len(want) * (8 + 2 * layers * heads * (dim + 2))  # int8 + fp16 scale
    got = tier.load(TENANT, rec.key).kv
    for side, ref in ((got.keys, exact.keys), (got.values, exact.values)):
        step = ref[:, :, want].abs().amax(-1, keepdim=True) / 127
        assert bool(((side[:, :, want] - ref[:, :, want]).abs() <= 0.51 * step + 1e-3 * step).all())
        assert torch.equal(side[:, :, rest], (home_plain.kv.keys if side is got.keys else home_plain.kv.values)[:, :, rest])
    st = tier_stats(rt.store, TENANT)
    assert st["pinned_tokens"] >= len(want) and st["pinned_bytes"] >= small.meta["pinned_bytes"]

    # A rule that finds nothing writes the plain format; a tier without a tokenizer cannot pin.
    none_found = tier.archive(rec, books, ArchiveConfig(keep_salient="digits"))
    assert none_found.meta["pinned"] == 0 and none_found.payload_size == plain.payload_size
    with pytest.raises(UserInputError, match="tokenizer"):
        ArchiveTier(rt.store, rt.dialect, rt.lm.identity).archive(rec, books, ArchiveConfig(keep_salient="names"))
    tier.archive(rec, books)  # leave the block archived plain for the other tests


def test_pinned_tokens_round_trip_and_bad_positions_do_not_parse():
    codes = RVQCodes(np.arange(24, dtype=np.uint8).reshape(1, 2, 2, 6) % 8,
                     np.arange(12, dtype=np.uint8).reshape(1, 2, 1, 6) % 8, 8)
    meta = {"identity": "a", "tenant": "t", "key": "k", "parent": "p", "seat": 4, "tokens": 8, "tail": 2,
            "quantized": 6, "codebook": "v", "k": 8, "key_stages": 2, "value_stages": 1, "source": "s",
            "keep_salient": "digits", "salient_storage": "float32"}
    tail = (torch.zeros(1, 2, 2, 4), torch.ones(1, 2, 2, 4))

    def span(pos: list[int]) -> ArchivedSpan:
        rows = torch.arange(2 * len(pos) * 4, dtype=torch.float32).reshape(1, 2, len(pos), 4)
        return ArchivedSpan(codes, *tail, meta, torch.tensor(pos, dtype=torch.int64), rows, -rows)

    back = ArchivedSpan.from_bytes(span([1, 4]).to_bytes("chaos"))
    assert back.pinned.tolist() == [1, 4] and back.meta["pinned"] == 2 and back.meta["keep_salient"] == "digits"
    assert torch.equal(back.pinned_values, -span([1, 4]).pinned_keys)
    plain = ArchivedSpan.from_bytes(ArchivedSpan(codes, *tail, meta).to_bytes("chaos"))
    assert plain.pinned is None and "pinned" not in plain.meta
    for bad in ([4, 1], [1, 1], [1, 6], [-1, 2]):  # not increasing, or outside the quantized tokens
        with pytest.raises(ValueError, match="pinned positions"):
            ArchivedSpan.from_bytes(span(bad).to_bytes("chaos"))
    # int8 rows travel with their scales, and do not parse without them.
    rows, scales = torch.ones(1, 2, 2, 4, dtype=torch.int8), torch.full((1, 2, 2), 0.5, dtype=torch.float16)
    int8 = ArchivedSpan(codes, *tail, {**meta, "salient_storage": "int8"}, torch.tensor([0, 5]), rows, -rows,
                        scales, scales.clone())
    back = ArchivedSpan.from_bytes(int8.to_bytes("bitpack"))
    keys, values = back.pinned_kv()
    assert torch.equal(keys, torch.full((1, 2, 2, 4), 0.5)) and torch.equal(values, -keys)
    assert back.pinned_bytes == 2 * 8 + 2 * 16 + 2 * 8
    with pytest.raises(ValueError, match="tensors"):
        ArchivedSpan.from_bytes(dataclasses.replace(int8, pinned_key_scales=None, pinned_value_scales=None)
                                .to_bytes("chaos"))


def test_pinned_rows_fall_back_to_float32_when_a_value_would_not_fit():
    from grm.archive.tier import _pinned_rows

    k, v = torch.randn(1, 2, 3, 4), torch.randn(1, 2, 3, 4)
    form, (pk, pv, ks, vs) = _pinned_rows(k, v, "float16")
    assert form == "float16" and pk.dtype == pv.dtype == torch.float16 and ks is None and vs is None
    form, (pk, pv, ks, vs) = _pinned_rows(k, v, "int8")
    assert form == "int8" and pk.dtype == torch.int8 and ks.dtype == torch.float16 and ks.shape == (1, 2, 3)
    k[0, 0, 0, 0] = 1e6  # beyond float16's 65504
    assert _pinned_rows(k, v, "float16")[0] == "float32"
    form, (pk, _, _, _) = _pinned_rows(k * 1e3, v, "int8")  # a scale beyond float16's range
    assert form == "float32" and torch.equal(pk, k * 1e3)
