"""Byte-flip sweeps and the I/O-error loop (tests/sim/flips.py): every damaged byte ends as an
exact prefix, a typed CorruptionError, a catalog rebuild or a payload miss; every failed I/O
call leaves a store that reopens with the acknowledged state and verified payloads."""

from __future__ import annotations

import logging

import pytest

from grm.store.envelope import Codec
from tests.sim import flips


@pytest.fixture(autouse=True)
def _quiet():
    logging.disable(logging.WARNING)
    yield
    logging.disable(logging.NOTSET)


@pytest.mark.parametrize("kw", [{}, {"master_key": bytes(range(32)), "compress": True}],
                         ids=["plain", "encrypted"])
def test_every_flipped_byte_of_log_and_checkpoint_is_a_prefix_or_corruption_error(kw: dict) -> None:
    """1. every byte of every log segment and checkpoint, and sampled payload bytes, flipped;
    2. each open ends in a committed state or CorruptionError; 3. payloads exact or a miss."""
    rep = flips.flip_sweep(**kw)
    assert rep.violations == []
    assert rep.flips > 900 and rep.corruption > 0 and rep.prefix > 0 and rep.misses > 0
    assert rep.flips == rep.prefix + rep.corruption


def test_flip_sweep_catches_a_store_that_skips_the_digest_check(monkeypatch) -> None:
    monkeypatch.setattr(Codec, "decode_payload", lambda self, t, k, key, n, size, blob: blob)
    rep = flips.flip_sweep(payload_samples=4)
    assert any("wrong payload bytes" in v for v in rep.violations)


def test_flipped_catalog_bytes_end_in_rebuild_and_search_serves_only_true_rows() -> None:
    rep = flips.catalog_sweep(samples=60)
    assert rep.violations == []
    assert rep.flips >= 60 and rep.rebuilds > 0


@pytest.mark.parametrize("mode", ["normal", "async", "strict"])
def test_failing_the_nth_io_call_never_corrupts_the_store(mode: str) -> None:
    """n = 1, 2, ... until the workload runs clean: ENOSPC on writes (half written), EIO on
    fsync, rename, directory sync, remove, truncate, mkdir."""
    rep = flips.io_error_loop(mode)
    assert rep.violations == []
    assert rep.flips > 50 and rep.corruption == 0
