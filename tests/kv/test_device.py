"""The device plane: DeviceCache, mounts, pinned host plane, 16-bit payloads.

On CPU (always run):
1. A DeviceCache is a plain DynamicCache: prefill through it is bit-identical, and `mount` of
   host K/V makes views (no copy, nothing pinned, nothing moved). Its layers grow in place
   (ArenaLayer): token-by-token decoding stays bit-identical to a DynamicCache's while the layer's
   buffer is reallocated a few times, not once per token; mounted K/V are never written; a crop
   then a read overwrites the dropped seats. A mount lent the load's buffer (`full`) reads the
   next tokens into its room in place, bit-identical, without touching the prefix's seats; one
   whose K/V is not the start of `full` copies as before.
2. Payloads round-trip F32, BF16 and F16 bit for bit, name their dtype, and refuse others.
3. The residency counts where each get was served from: device plane, host plane, store.
Marked `gpu` (skipped without CUDA, run on one when available):
4. A mount from pinned host memory copies layer by layer on a side stream; the forward that
   waits per layer gives logits bit-identical to the same K/V already on the device.
5. Warm (stored K/V mounted) vs cold two-stage logits on the GPU in fp32 and bf16; re-seat parity.
6. The residency pins its host plane and pages in asynchronously.
7. A store load lands on the device, exactly the stored bytes; the host tier holds pinned K/V.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from transformers import DynamicCache

from grm.grafts import PagingConfig, Residency
from grm.kv import KV, cache_from_kv, crop, kv_from_cache, new_cache
from grm.kv.device import DeviceCache, host_empty, mount, pinned
from grm.kv.forward import prefill

CUDA = torch.cuda.is_available()
needs_cuda = pytest.mark.skipif(not CUDA, reason="no CUDA device on this machine")
IDS = list(range(40, 120))


def _kv(layers: int = 2, tokens: int = 5, dtype: torch.dtype = torch.float32, seed: int = 0) -> KV:
    g = torch.Generator().manual_seed(seed)
    shape = (layers, 2, tokens, 16)
    return KV(torch.randn(shape, generator=g).to(dtype), torch.randn(shape, generator=g).to(dtype))


def test_device_cache_is_bit_identical_to_a_dynamic_cache_on_cpu(tiny_models):
    model = tiny_models["llama"].model
    plain, ours = DynamicCache(), new_cache()
    assert isinstance(ours, DeviceCache)
    a = prefill(model, plain, IDS, 0)
    b = prefill(model, ours, IDS, 0)
    assert torch.equal(a, b)
    stored = kv_from_cache(ours, 0, 60)
    warm = cache_from_kv(stored)
    assert torch.equal(prefill(model, warm, IDS[60:], 60), b)
    assert warm.moved_bytes == 0 and not warm._pending


def _read_30(model) -> tuple[DynamicCache, KV]:
    """IDS[:30] read into a plain DynamicCache, and the same read's K/V as stored (host copies)."""
    plain, ours = DynamicCache(), new_cache()
    prefill(model, plain, IDS[:30], 0)
    prefill(model, ours, IDS[:30], 0)
    return plain, kv_from_cache(ours)


def test_arena_layers_grow_in_place_bit_identical_and_never_write_mounted_kv(tiny_models):
    model = tiny_models["llama"].model
    plain, stored = _read_30(model)
    before = KV(stored.keys.clone(), stored.values.clone())
    warm = cache_from_kv(stored)  # views of `stored`
    buffers = set()
    for i, tok in enumerate(IDS[30:], start=30):  # token by token, as generation reads
        a = prefill(model, plain, [tok], i)
        b = prefill(model, warm, [tok], i)
        assert torch.equal(a, b)
        buffers.add(warm.layers[0]._buf[0].data_ptr())
    assert 1 <= len(buffers) <= 2  # 50 tokens fit the room one buffer keeps: no copy per token
    assert torch.equal(stored.keys, before.keys) and torch.equal(stored.values, before.values)
    # a crop, then other tokens at the dropped seats: as if read there first
    crop(warm, 40)
    crop(plain, 40)
    assert torch.equal(prefill(model, warm, IDS[:5], 40), prefill(model, plain, IDS[:5], 40))
    assert torch.equal(kv_from_cache(warm).keys, kv_from_cache(plain).keys)


def test_a_mount_lent_the_loads_buffer_grows_into_its_room(tiny_models):
    model = tiny_models["llama"].model
    plain, stored = _read_30(model)
    layers, heads, _t, dim = stored.keys.shape
    full = KV(torch.full((layers, heads, 45, dim), 7.0), torch.full((layers, heads, 45, dim), 7.0))
    full.keys[:, :, :30].copy_(stored.keys)
    full.values[:, :, :30].copy_(stored.values)
    kv = full.slice(0, 30)  # what a placement's `result` is: the first seats of `full`
    warm = cache_from_kv(kv, full)
    a = prefill(model, plain, IDS[30:40], 30)
    b = prefill(model, warm, IDS[30:40], 30)
    assert torch.equal(a, b)
    for i, layer in enumerate(warm.layers):  # read in place: no buffer of its own
        assert layer.keys.data_ptr() == full.keys[i].data_ptr() and layer._buf[0].data_ptr() == full.keys[i].data_ptr()
    assert torch.equal(full.keys[:, :, :30], stored.keys) and torch.equal(full.values[:, :, :30], stored.values)
    assert torch.equal(full.keys[:, :, 30:40], kv_from_cache(plain, 30).keys)
    assert bool((full.keys[:, :, 40:] == 7).all())
    for i, tok in enumerate(IDS[40:60], start=40):  # past the room: a buffer of its own, the same bits
        assert torch.equal(prefill(model, plain, [tok], i), prefill(model, warm, [tok], i))
    assert warm.layers[0]._buf[0].data_ptr() != full.keys[0].data_ptr()
    assert torch.equal(full.keys[:, :, 40:45], kv_from_cache(plain, 40, 45).keys)  # the room's last seats
    other = cache_from_kv(KV(stored.keys.clone(), stored.values.clone()), full)  # not `full`'s start: not lent
    prefill(model, other, IDS[30:32], 30)
    assert other.layers[0].keys.data_ptr() != full.keys[0].data_ptr()


class Recorder:
    """A copier to the meta device that logs what the cache asks of it, in order."""

    def __init__(self) -> None:
        self.log: list[tuple[str, int]] = []

    def start(self, keys, values, device):
        layer = int(keys.shape[-1]) - 16  # each test layer has its own head_dim: 16 + layer
        self.log.append(("start", layer))
        return keys.to(device), values.to(device), layer

    def wait(self, handle, device):
        self.log.append(("wait", handle))


def _layered_cache(layers: int, copier) -> DeviceCache:
    cache = DeviceCache(lookahead=2, copier=copier)
    for i in range(layers):  # host K/V, as cache_from_kv leaves it: [1, heads, 3 tokens, 16 + i]
        cache.update(torch.zeros(1, 2, 3, 16 + i), torch.zeros(1, 2, 3, 16 + i), i)
    return cache


def test_lazy_moves_start_ahead_and_wait_just_before_each_layer():
    """The model writing layer i on the device starts layers i..i+2 (each once, in order) and
    waits for layer i only, right before layer i's concatenation."""
    rec = Recorder()
    cache = _layered_cache(5, rec)
    for i in range(5):
        k = torch.zeros(1, 2, 1, 16 + i, device="meta")
        keys, _ = cache.update(k, k, i)
        assert keys.device.type == "meta" and keys.shape[2] == 4
        assert rec.log[-1] == ("wait", i)
    starts = [layer for op, layer in rec.log if op == "start"]
    assert starts == [0, 1, 2, 3, 4]
    assert rec.log[:4] == [("start", 0), ("start", 1), ("start", 2), ("wait", 0)]
    assert cache.moved_bytes == sum(2 * 2 * 3 * (16 + i) * 4 for i in range(5))


def test_mount_starts_every_layer_and_sync_waits_for_all():
    rec = Recorder()
    kv = KV(torch.zeros(3, 2, 4, 16), torch.zeros(3, 2, 4, 16))
    cache = mount(kv, "meta", copier=rec)
    assert rec.log == [("start", 0), ("start", 0), ("start", 0)]  # same head_dim: handle says 0
    assert all(layer.keys.device.type == "meta" for layer in cache.layers)
    cache.sync()
    assert [op for op, _ in rec.log].count("wait") == 3 and not cache._pending
    host = torch.zeros(1, 2, 1, 16)  # host K/V spliced after the mount goes to the layer's device
    keys, _ = cache.update(host, host, 0)
    assert keys.device.type == "meta" and keys.shape[2] == 5


def test_mount_on_cpu_makes_views_and_pins_nothing():
    kv = _kv()
    cache = mount(kv, "cpu")
    assert cache.layers[1].keys.data_ptr() == kv.keys[1].data_ptr()
    assert cache.get_seq_length() == 5 and cache.moved_bytes == 0
    if not CUDA:
        assert pinned(kv) is kv  # nothing to pin without CUDA


def test_host_buffers_are_plain_for_a_cpu_model():
    buf = host_empty((2, 3), torch.bfloat16, "cpu")
    assert buf.shape == (2, 3) and buf.dtype == torch.bfloat16 and not buf.is_pinned()
    if CUDA:
        assert host_empty((2, 3), torch.float32, "cuda").is_pinned()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_payloads_round_trip_each_dtype_bit_for_bit(dtype):
    kv = _kv(dtype=dtype, seed=3)
    data = kv.to_bytes({"identity": "x"})
    back, meta = KV.from_bytes(data)
    assert back.keys.dtype == dtype and meta["identity"] == "x"
    assert torch.equal(back.keys, kv.keys) and torch.equal(back.values, kv.values)
    name = {torch.float32: b'"F32"', torch.bfloat16: b'"BF16"', torch.float16: b'"F16"'}[dtype]
    assert name in data[:400]


def test_payloads_refuse_other_dtypes_and_mixed_ones():
    with pytest.raises(ValueError, match="payloads are F32/BF16/F16"):
        _kv(dtype=torch.float64).to_bytes({})
    mixed = KV(_kv().keys, _kv().values.to(torch.bfloat16))
    with pytest.raises(ValueError, match="payloads are"):
        mixed.to_bytes({})
    data = bytearray(_kv().to_bytes({}))
    at = bytes(data).index(b'"F32"')
    data[at:at + 5] = b'"I32"'
    with pytest.raises(ValueError, match="dtype"):
        KV.from_bytes(bytes(data))


def _residency(device_budget: int, host_budget: int, device: str = "cpu") -> tuple[Residency, dict]:
    payloads = {f"g{i}": _kv(seed=i) for i in range(3)}
    reads: dict = {"n": 0}

    def load(gid: str) -> KV | None:
        reads["n"] += 1
        return payloads.get(gid)

    return Residency(PagingConfig(device_budget=device_budget, host_budget=host_budget), load, device=device), reads


def test_residency_counts_each_plane():
    one = _kv().nbytes
    planes, reads = _residency(device_budget=one, host_budget=10 * one)
    assert planes.get("g0") is not None and planes.get("g1") is not None  # two store reads
    planes.end_turn()  # g0 paged out of the device plane, kept in the host plane
    planes.get("g1")  # device hit
    planes.get("g0")  # host hit
    assert planes.get("missing") is None
    c = planes.counters
    assert (c["store_reads"], c["host_hits"], c["device_hits"], c["misses"]) == (2, 1, 1, 1)
    assert c["host_page_ins"] == c["store_reads"] and reads["n"] == 3
    assert c["store_bytes_in"] == 2 * one and c["host_bytes_in"] == one
    tight, reads = _residency(device_budget=0, host_budget=0)
    tight.get("g0")
    tight.end_turn()
    tight.get("g1")
    tight.end_turn()
    tight.get("g0")  # dropped from the host plane (over budget): read from the store again
    assert tight.counters["store_reads"] == 3 and tight.counters["host_hits"] == 0


# ----- on a GPU -------------------------------------------------------------------------------
@pytest.mark.gpu
@needs_cuda
def test_pinned_layerwise_mount_is_bit_identical_on_gpu(tmp_path):
    from grm.models import load_model

    lm = load_model("tiny-random-llama", tmp_path, device="cuda", dtype="float32")
    dev = lm.model.device
    cache = new_cache()
    prefill(lm.model, cache, IDS[:60], 0)
    stored = kv_from_cache(cache)
    host = pinned(KV(stored.keys.cpu(), stored.values.cpu()))
    assert host.keys.is_pinned() and host.values.is_pinned()
    assert stored.keys.device.type == "cpu"  # K/V GRM keeps lives on the host
    ref = prefill(lm.model, cache_from_kv(KV(stored.keys.to(dev), stored.values.to(dev))), IDS[60:], 60)
    mounted = mount(host, dev)
    assert mounted.moved_bytes == host.nbytes and len(mounted._pending) == stored.keys.shape[0]
    assert mounted.layers[0].keys.device == dev
    got = prefill(lm.model, mounted, IDS[60:], 60)
    assert torch.equal(got, ref) and not mounted._pending
    lazy = cache_from_kv(KV(stored.keys.cpu(), stored.values.cpu()))  # pageable host K/V, moved on demand
    assert torch.equal(prefill(lm.model, lazy, IDS[60:], 60), ref) and lazy.moved_bytes == host.nbytes


@pytest.mark.gpu
@needs_cuda
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_warm_equals_cold_two_stage_on_gpu(make_runtime, tmp_path, dtype):
    from tests.conftest import lorem

    doc = tmp_path / "doc.txt"
    doc.write_text(lorem(8, seed=5))
    text = doc.read_text()
    store = tmp_path / f"store-{dtype}"
    rt = make_runtime(store=store, device="cuda", dtype=dtype)
    assert rt.lm.model.device.type == "cuda" and rt.lm.identity != make_runtime(
        store=tmp_path / "cpu", device="cpu", dtype=dtype).lm.identity  # the regime is in the identity
    _cache, cold, _, _, _ = rt.exact_context(text + "\nQ?")  # nothing stored yet: the model reads it all
    rt.ingest([doc], progress=False)
    rt.close()
    warm_rt = make_runtime(store=store, device="cuda", dtype=dtype)
    cache, warm, _, from_memory, prefix = warm_rt.exact_context(text + "\nQ?")
    assert prefix.block_tokens > 0 and from_memory > 0
    assert int(warm.argmax()) == int(cold.argmax())
    if dtype == "float32":
        assert (warm - cold).abs().max() < 1e-3
    assert warm_rt.selftest.passed and warm_rt.selftest.excess < (1e-4 if dtype == "float32" else 6e-2)


@pytest.mark.gpu
@needs_cuda
def test_a_store_load_lands_on_the_device_and_the_host_tier_is_pinned(make_runtime, tmp_path):
    """On CUDA the loader reads each block into page-locked memory and copies it into the final
    K/V on the device; what it read is exactly the stored bytes; the host tier keeps pinned K/V
    and a second load from it is bit-identical."""
    from grm.kv import KV
    from tests.conftest import lorem

    doc = tmp_path / "doc.txt"
    doc.write_text(lorem(8, seed=5))
    text = doc.read_text()
    rt = make_runtime(device="cuda", dtype="bfloat16", block_tokens=64, host_budget=1 << 30)
    rt.ingest([doc], layout="chain", progress=False)
    first = rt.exact.load_prefix(text)
    assert first.kv.keys.device.type == "cuda" and rt.exact.counters["scatter_loads"] == len(first.blocks) > 2
    for rec in first.blocks:
        stored, _ = KV.from_bytes(rt.store.read_payload(rec))
        t0 = int(rec.meta["seat"])
        assert torch.equal(first.kv.keys[:, :, t0: t0 + stored.tokens].cpu(), stored.keys)
        assert torch.equal(first.kv.values[:, :, t0: t0 + stored.tokens].cpu(), stored.values)
    second = rt.exact.load_prefix(text)
    assert rt.exact.counters["tier_hits"] == len(first.blocks)
    assert torch.equal(first.kv.keys, second.kv.keys) and torch.equal(first.kv.values, second.kv.values)
    held = [kv for entries in rt.tier._entries.values() for kv in entries.values()]
    assert held and all(kv.keys.is_pinned() and kv.values.is_pinned() for kv in held)


@pytest.mark.gpu
@needs_cuda
def test_residency_pins_the_host_plane_on_gpu():
    one = _kv().nbytes
    planes, _ = _residency(device_budget=0, host_budget=10 * one, device="cuda")
    kv = planes.get("g0")
    assert kv.keys.device.type == "cuda"
    planes.end_turn()
    assert all(h.keys.is_pinned() for h in planes._host.values())
    again = planes.get("g0")
    assert planes.counters["host_hits"] == 1 and torch.equal(again.keys.cpu(), _kv(seed=0).keys)
