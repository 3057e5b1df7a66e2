"""Residual VQ codebooks: k-means, training, encode/decode, position-free keys, bytes, the store."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from grm.archive.codebook_store import (
    KIND, TENANT, archive_stats, codebook_key, codebook_versions, load_codebooks, save_codebooks,
)
from grm.archive.harvest import harvest, position_free, rotate_per_token
from grm.archive.kmeans import KMeansConfig, kmeans
from grm.archive.quantizer import KVQuantizer
from grm.archive.rvq import RVQCodebooks, RVQConfig, RVQQuantizer, train_rvq
from grm.kv import KV, kv_from_cache, new_cache
from grm.kv.forward import prefill
from grm.store import Store, StoreConfig

IDENTITY = "ab" * 32


def _clustered(n: int = 4000, dim: int = 16, centre_seed: int = 0, seed: int = 0) -> torch.Tensor:
    """[n, dim] points around 8 well-separated centres (fixed by centre_seed); draws by seed."""
    centres = torch.randn(8, dim, generator=torch.Generator().manual_seed(centre_seed)) * 10
    gen = torch.Generator().manual_seed(1000 + seed)
    pick = torch.randint(8, (n,), generator=gen)
    return centres[pick] + torch.randn(n, dim, generator=gen)


def _kv(layers: int = 2, heads: int = 2, tokens: int = 1200, dim: int = 16, seed: int = 0) -> KV:
    """Synthetic K/V: one cluster layout per (layer, head); `seed` draws fresh points from it."""
    x = torch.stack([torch.stack([_clustered(tokens, dim, 10 * l + h, seed) for h in range(heads)])
                     for l in range(layers)])
    return KV(x, x.flip(-1) * 0.5 + 1.0)


@pytest.fixture(scope="module")
def books() -> RVQCodebooks:
    torch.set_num_threads(2)
    return train_rvq(_kv(), RVQConfig(k=32, key_stages=3, value_stages=2, iters=10, max_train=1000), IDENTITY,
                     {"note": "synthetic"})


def test_kmeans_finds_separated_clusters_and_is_seeded():
    x = _clustered(2000, 8)
    c = kmeans(x, KMeansConfig(k=8, iters=30, seed=1))
    true = torch.randn(8, 8, generator=torch.Generator().manual_seed(0)) * 10  # the centres _clustered drew
    # every true centre has a centroid within 0.3 (noise std 1, ~250 points per cluster)
    assert torch.cdist(true, c).min(dim=1).values.max() < 0.3
    assert torch.equal(c, kmeans(x, KMeansConfig(k=8, iters=30, seed=1)))
    with pytest.raises(ValueError):
        kmeans(x[:5], KMeansConfig(k=8))


def test_every_stage_lowers_the_error_on_held_out_vectors(books):
    held = _kv(seed=99)  # not the training draw
    errors = []
    for stages in (1, 2, 3):
        codes = books.encode(held, key_stages=stages, value_stages=1)
        errors.append(float((books.decode(codes).keys - held.keys).pow(2).mean()))
    assert errors[0] < 0.5 * float(held.keys.var())  # stage 1 already captures the clusters
    assert errors[2] < errors[1] < errors[0]


def test_codes_have_the_stream_layout_and_decode_matches_the_quantizer(books):
    kv = _kv(tokens=300, seed=5)
    codes = books.encode(kv)
    assert codes.keys.shape == (2, 2, 3, 300) and codes.values.shape == (2, 2, 2, 300)
    assert codes.keys.dtype == np.uint8 and int(codes.keys.max()) < 32
    assert len(codes.streams()) == 2 * 2 * (3 + 2)
    dec = books.decode(codes)
    q = RVQQuantizer(books, 3, 2)
    for layer in range(2):
        kq, vq = q.roundtrip(layer, kv.keys[layer], kv.values[layer])
        assert torch.equal(kq, dec.keys[layer]) and torch.equal(vq, dec.values[layer])
    # Decoded vectors are sums of stored (float16) centroids: exactly representable, stage by stage.
    first = books.keys[0, 0, 0].float()[torch.from_numpy(codes.keys[0, 0, 0].astype(np.int64))]
    one = books.decode(books.encode(kv, 1, 1)).keys[0, 0]
    assert torch.equal(one, first)


def test_k_above_256_gives_uint16_indices():
    kv = _kv(layers=1, heads=1, tokens=700, dim=8)
    big = train_rvq(kv, RVQConfig(k=512, key_stages=1, value_stages=1, iters=2, max_train=700), IDENTITY)
    codes = big.encode(kv)
    assert codes.keys.dtype == np.uint16 and int(codes.keys.max()) >= 256
    assert big.config.index_bits == 9


def test_training_is_deterministic_and_the_version_binds_content(books):
    cfg = books.config
    again = train_rvq(_kv(), cfg, IDENTITY, {"note": "synthetic"})
    assert again.version == books.version and torch.equal(again.keys, books.keys)
    other_seed = train_rvq(_kv(), dataclasses.replace(cfg, seed=1), IDENTITY)
    assert other_seed.version != books.version
    other_model = RVQCodebooks(books.keys, books.values, cfg, "cd" * 32)
    assert other_model.version != books.version


def test_bytes_round_trip_and_refuse_damage_format_and_identity(books):
    data = books.to_bytes()
    back = RVQCodebooks.from_bytes(data, identity=IDENTITY)
    assert back.version == books.version and torch.equal(back.values, books.values)
    assert back.train == books.train and back.config == books.config
    bad = bytearray(data)
    bad[-5] ^= 0x40  # a bit of the last codebook tensor
    with pytest.raises(ValueError, match="version"):
        RVQCodebooks.from_bytes(bytes(bad))
    with pytest.raises(ValueError, match="identity"):
        RVQCodebooks.from_bytes(data, identity="cd" * 32)
    with pytest.raises(ValueError):
        RVQCodebooks.from_bytes(b"not a codebook file")


def test_int8_codebooks_store_half_the_bytes_and_encode_with_the_stored_numbers(books):
    cfg = dataclasses.replace(books.config, storage_dtype="int8")
    small = train_rvq(_kv(), cfg, IDENTITY)
    assert small.keys.dtype == torch.int8 and small.key_scales.shape == small.keys.shape[:4]
    d = books.keys.shape[-1]
    assert small.nbytes == books.nbytes * (d + 2) // (2 * d)  # int8 rows + one fp16 scale each
    assert small.stage_nbytes() * (cfg.key_stages + cfg.value_stages) == small.nbytes
    # Encoding and decoding use exactly codes * scale, the numbers stored.
    kv = _kv(tokens=200, seed=7)
    codes = small.encode(kv, 1, 1)
    row = small.keys[0, 0, 0].float() * small.key_scales[0, 0, 0].float()[:, None]
    want = row[torch.from_numpy(codes.keys[0, 0, 0].astype(np.int64))]
    assert torch.equal(small.decode(codes).keys[0, 0], want)
    # Int8 rounding costs little next to the quantization itself (held-out draw, every stage).
    held = _kv(seed=99)
    err = lambda b: float((b.decode(b.encode(held)).keys - held.keys).pow(2).mean())  # noqa: E731
    assert err(small) < 1.1 * err(books)
    back = RVQCodebooks.from_bytes(small.to_bytes(), identity=IDENTITY)
    assert back.version == small.version and torch.equal(back.key_scales, small.key_scales)
    assert len(small.to_bytes()) < 0.6 * len(books.to_bytes())
    with pytest.raises(ValueError, match="scales"):
        RVQCodebooks(small.keys, small.values, cfg, IDENTITY)  # int8 rows without their scales


def test_weighted_distortion_trains_and_encodes_for_the_weighted_error():
    kv = _kv(layers=1, heads=1, tokens=1500, dim=8)
    w = torch.tensor([8.0, 8.0, 1.0, 1.0, 1.0, 1.0, 0.1, 0.1]).reshape(1, 1, 8)
    cfg = RVQConfig(k=16, key_stages=1, value_stages=1, iters=15, max_train=1500)
    plain = train_rvq(kv, cfg, IDENTITY)
    weighted = train_rvq(kv, cfg, IDENTITY, key_weights=w)
    assert weighted.version != plain.version and weighted.train["metric"] == "weighted"
    held = _kv(layers=1, heads=1, tokens=1500, dim=8, seed=7)

    def werr(books):
        err = books.decode(books.encode(held)).keys - held.keys
        return float((err * w).pow(2).mean())

    assert werr(weighted) < 0.8 * werr(plain)
    # encoding is the weighted argmin, checked against brute force over the 16 centroids
    x = held.keys[0, 0, :50]
    idx = weighted.encode_side("K", 0, 1, held.keys[0, :, :50])[0, 0]
    c = weighted.books("K", 0, 1)[0, 0]
    brute = ((x[:, None, :] - c[None]) * w[0, 0]).pow(2).sum(-1).argmin(1)
    assert torch.equal(idx, brute)
    back = RVQCodebooks.from_bytes(weighted.to_bytes())
    assert torch.equal(back.key_weights, weighted.key_weights) and back.version == weighted.version


def test_quantizer_allocation_and_bytes(books):
    q = RVQQuantizer(books, 2, 0)
    assert isinstance(q, KVQuantizer) and q.group == 1
    keys, values = _kv(tokens=50).keys[0], _kv(tokens=50).values[0]
    kq, vq = q.roundtrip(0, keys, values)
    assert torch.equal(vq, values) and not torch.equal(kq, keys)  # values left exact
    # 5 bits per index (k=32); an exact side counts fp16
    assert q.archive_bytes_per_token(2, 2, 16) == pytest.approx(2 * 2 * (2 * 5 / 8 + 16 * 2))
    with pytest.raises(ValueError):
        RVQQuantizer(books, 4, 1)  # only 3 key stages were trained
    with pytest.raises(ValueError):
        RVQQuantizer(books, 0, 0)


@pytest.mark.parametrize("bad", [{"k": 1}, {"k": 2000}, {"key_stages": 0, "value_stages": 0},
                                 {"k": 64, "max_train": 10}, {"storage_dtype": "int4"}])
def test_config_validation(bad):
    with pytest.raises(ValueError):
        RVQConfig(**bad)


def test_keys_are_position_free_so_one_codebook_serves_every_seat(tiny_models):
    lm = tiny_models["llama"]
    from grm.dialects import dialect_for

    dialect = dialect_for(lm.model)
    ids = lm.tokenizer.encode("Position-free keys: the same text read at two seats.")
    pf = []
    for start in (0, 137):
        cache = new_cache()
        prefill(lm.model, cache, ids, start)
        pf.append(position_free(kv_from_cache(cache), dialect, torch.arange(start, start + len(ids))))
    assert (pf[0].keys - pf[1].keys).abs().max() < 1e-4
    assert torch.equal(pf[0].values, pf[1].values) or (pf[0].values - pf[1].values).abs().max() < 1e-5
    # ...while the cached (rotated) keys themselves differ between the seats.
    cache = new_cache()
    prefill(lm.model, cache, ids, 137)
    assert (kv_from_cache(cache).keys - rotate_per_token(pf[0].keys, dialect.inv_freq[0], torch.arange(137, 137 + len(ids)))).abs().max() < 1e-4
    assert (kv_from_cache(cache).keys - pf[0].keys).abs().max() > 1e-2
    # harvest() drops the sinks and returns position-free K/V of every window
    got = harvest(lm.model, dialect, [list(lm.tokenizer.sink_ids) + ids] * 2, skip=4, dtype=torch.float32)
    assert got.kv.keys.shape[2] == 2 * len(ids)
    assert got.query_energy.shape == (dialect.n_layers, dialect.kv_heads, dialect.head_dim)
    half = dialect.head_dim // 2  # pair-averaged: rotation-invariant
    assert torch.equal(got.query_energy[..., :half], got.query_energy[..., half:]) and (got.query_energy > 0).all()


def test_store_round_trip_stats_and_fail_closed(tmp_path, books):
    with Store.open(StoreConfig(root=tmp_path / "store", durability="volatile")) as store:
        rec = save_codebooks(store, books)
        assert rec.key == codebook_key(IDENTITY, books.version)
        got = load_codebooks(store, IDENTITY, books.version)
        assert got is not None and got.version == books.version and torch.equal(got.keys, books.keys)
        assert codebook_versions(store, IDENTITY) == [books.version]
        assert load_codebooks(store, "cd" * 32, books.version) is None  # another model: a miss
        assert load_codebooks(store, IDENTITY, "0" * 16) is None
        stats = archive_stats(store)
        assert stats["count"] == 1 and stats["models"] == 1
        row = stats["codebooks"][0]
        assert (row["k"], row["key_stages"], row["value_stages"]) == (32, 3, 2)
        assert row["codebook_bytes"] == books.nbytes and row["payload_bytes"] == len(books.to_bytes())
        # Damage the payload file: the record is then a miss, never served.
        path = store.payload_path(store.get(TENANT, KIND, rec.key))
        data = bytearray(path.read_bytes())
        data[len(data) // 2] ^= 0xFF
        path.write_bytes(bytes(data))
        assert load_codebooks(store, IDENTITY, books.version) is None
