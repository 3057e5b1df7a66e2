"""`grm bench serve --quick` runs end to end on the tiny model: every request answered, memory
hits on both memory sides, conversations reuse their history, the server exits 0 on SIGTERM."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_bench_serve_quick_runs_and_reports(tmp_path):
    r = subprocess.run([sys.executable, "-m", "grm", "bench", "serve", "--quick", "--threads", "2"], cwd=ROOT,
                       capture_output=True, text=True, timeout=600, env={**os.environ, "TMPDIR": str(tmp_path)})
    assert not list(tmp_path.glob("grm-bench-*")), r.stderr[-2000:]  # its store and keys are removed, not left in /tmp
    out = json.loads((ROOT / "bench" / "results" / "serve-quick.json").read_text())
    sides = {s["side"]: s for s in out["sides"]}
    assert set(sides) == {"off", "ingested", "prompt-only"}, r.stderr
    assert all(s["errors"] == 0 for s in sides.values())
    assert sides["off"]["hit_rate"] == 0
    assert sides["ingested"]["hit_rate"] > 0.95 and sides["prompt-only"]["hit_rate"] > 0.5
    assert out["targets"]["history_reuse_ge_0.95_every_turn"] and out["targets"]["sigterm_exit_0"]
    assert out["targets"]["rss_flat_within_10pct"]
