"""Where loaded K/V lands (grm/kv/place.py).

Expectations:
1. `HostBuffers` hands a buffer out again only when no tensor views it any more, and only for a
   request it fits without wasting more than half of it.
2. A `HostPlacement`'s reserved buffers are exactly the block's bytes in payload file order
   (keys' (layer, head) runs, then values'): bytes written there in that order are the block's K/V
   at its seats, in fp32 and in bf16, with or without room after the prefix, and nothing outside
   the block's seats is touched (the room neither).
3. `put` places K/V verified elsewhere; `keep` returns a copy that does not share the placement's
   memory (what the host tier may hold after the load's buffer is reused).
4. A new host buffer carries no huge-page advice (numpy advises it for large arrays, and a fault
   on advised memory may stall on compaction: kv/place.py `fresh`); checked in /proc/self/smaps.
5. On CUDA (marked gpu) a `DevicePlacement` gives the same K/V as the host one, on the device.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from grm.kv import KV
from grm.kv.place import DevicePlacement, HostBuffers, HostPlacement, fresh


def test_a_host_buffer_is_reused_only_when_nothing_views_it():
    pool = HostBuffers()
    first = pool.take(1 << 20)
    view = first[10:20]
    del first
    second = pool.take(1 << 20)  # `view` still holds the first buffer's memory
    assert second.data_ptr() != view.data_ptr() - 10 and pool.reuses == 0
    ptr = second.data_ptr()
    del second
    third = pool.take(1 << 20)
    assert third.data_ptr() == ptr and pool.reuses == 1
    del third
    small = pool.take(1 << 10)  # a free 1 MiB buffer is more than twice this: a new one
    assert pool.reuses == 1 and small.numel() == 1 << 10


def _payload_order(kv: KV) -> bytes:
    """A block's tensor bytes as a payload file holds them: keys then values, C order."""
    return b"".join(t.contiguous().view(torch.uint8).numpy().tobytes() for t in (kv.keys, kv.values))


@pytest.mark.parametrize("room", [0, 9])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_reserved_buffers_take_a_block_at_its_seats(dtype, room):
    shape = (3, 2, 40, 8)  # [layers, kv_heads, tokens, head_dim]
    place = HostPlacement(shape, dtype, HostBuffers(), room)
    assert place.full.tokens == 40 + room
    place.full.keys.fill_(7)
    place.full.values.fill_(7)
    block = KV(torch.randn(3, 2, 15, 8).to(dtype), torch.randn(3, 2, 15, 8).to(dtype))
    reserved = place.reserve(10, 25)
    data = memoryview(_payload_order(block))
    assert sum(b.nbytes for b in reserved.buffers) == data.nbytes
    at = 0
    for buf in reserved.buffers:  # what a scatter read does
        buf[:] = data[at: at + buf.nbytes]
        at += buf.nbytes
    place.commit(10, 25, reserved.kv)
    out = place.result(40)
    assert torch.equal(out.keys[:, :, 10:25], block.keys) and torch.equal(out.values[:, :, 10:25], block.values)
    assert torch.equal(reserved.kv.keys, block.keys)
    full = place.full
    untouched = torch.cat([full.keys[:, :, :10], full.keys[:, :, 25:], full.values[:, :, :10],
                           full.values[:, :, 25:]], 2)
    assert bool((untouched == 7).all())


def test_put_places_and_keep_does_not_share_memory():
    place = HostPlacement((2, 1, 6, 4), torch.float32, HostBuffers())
    block = KV(torch.randn(2, 1, 3, 4), torch.randn(2, 1, 3, 4))
    place.put(3, 6, block)
    kept = place.keep(place.full.slice(3, 6))
    place.full.keys.zero_()
    assert torch.equal(kept.keys, block.keys) and torch.equal(place.result(6).values[:, :, 3:], block.values)


def _vm_flags(address: int) -> list[str]:
    """The kernel's VmFlags of the mapping that holds `address` in this process."""
    inside = False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        head = line.split()[0] if line.split() else ""
        if "-" in head and all(c in "0123456789abcdef-" for c in head):
            lo, hi = (int(x, 16) for x in head.split("-"))
            inside = lo <= address < hi
        elif inside and line.startswith("VmFlags:"):
            return line.split()[1:]
    raise AssertionError(f"no mapping holds {address:#x}")


@pytest.mark.skipif(not Path("/proc/self/smaps").exists(), reason="no /proc/self/smaps (not Linux)")
def test_new_host_buffers_carry_no_huge_page_advice():
    size, middle = 64 << 20, 16 << 20  # numpy advises the 2 MB-aligned part of a large array
    ours = fresh(size)
    assert "hg" not in _vm_flags(ours.ctypes.data + middle)
    taken = HostBuffers().take(size)
    assert "hg" not in _vm_flags(taken.data_ptr() + middle)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device on this machine")
def test_device_placement_matches_the_host_one():
    shape, dtype = (4, 2, 96, 16), torch.bfloat16
    host, dev = HostPlacement(shape, dtype, HostBuffers(), 5), DevicePlacement(shape, dtype, torch.device("cuda"), 5)
    sinks = KV(torch.randn(4, 2, 4, 16).to(dtype), torch.randn(4, 2, 4, 16).to(dtype))
    for place in (host, dev):
        place.put(0, 4, sinks)
    for t0, t1 in ((4, 50), (50, 96)):
        block = KV(torch.randn(4, 2, t1 - t0, 16).to(dtype), torch.randn(4, 2, t1 - t0, 16).to(dtype))
        data = memoryview(_payload_order(block))
        for place in (host, dev):
            reserved, at = place.reserve(t0, t1), 0
            for buf in reserved.buffers:
                buf[:] = data[at: at + buf.nbytes]
                at += buf.nbytes
            place.commit(t0, t1, reserved.kv)
    a, b = host.result(96), dev.result(96)
    assert b.keys.device.type == "cuda"
    assert torch.equal(a.keys, b.keys.cpu()) and torch.equal(a.values, b.values.cpu())
