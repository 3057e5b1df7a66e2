"""bench/scale.py measures what it says on a small store (the full run is `grm bench scale`)."""

from __future__ import annotations

import importlib.util

from tests.conftest import ROOT


def test_one_size_reports_every_figure(tmp_path):
    spec = importlib.util.spec_from_file_location("bench_scale", ROOT / "bench" / "scale.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    r = mod.one(500, tmp_path / "store")
    assert r["records"] == 500 and r["write_rows_per_s"] > 0
    for key in ("open_no_ckpt_s", "open_as_left_s", "open_ckpt_s", "checkpoint_s", "catalog_rebuild_s", "fsck_s",
                "route_p50_ms", "route_p99_ms"):
        assert 0 < r[key] < 60, key
    assert r["route_p50_ms"] <= r["route_p99_ms"] and r["route_hit_rate"] > 0.5
    assert r["disk_bytes"] > 500 * 256 / 10 and r["rss_mb"] > 10
    assert mod._verdicts([{**r, "records": 100_000, "route_p99_ms": 25.0}]) == [
        "- 100,000 records: route_p99_ms = 25.00 (target < 20): NOT met"]
