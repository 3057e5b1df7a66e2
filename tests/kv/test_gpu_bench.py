"""`grm bench gpu --device cpu --quick` runs end to end on a CPU (the GPU gate's CI check).

1. The CLI runs bench/gpu.py: a cold process, then a NEW warm process on the same store.
2. It writes bench/results/gpu-cpu-quick.json with every field the gate reports, and the numbers
   are sane: the document came from memory, warm logits are bit-identical to the cold two-stage
   reading (fp32 on a CPU), re-seat parity within the fp32 tolerance, the host tier and the server
   request served the blocks, and the time split is there. No speed is asserted.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.conftest import ROOT

FIELDS = ("tokens", "doc_tokens", "cold_s", "ingest_s", "warm_store_s", "warm_host_s", "serve_ttft_s", "mount_s",
          "kv_bytes", "mount_bytes_per_s", "raw_bytes_per_s", "tokens_from_memory", "blocks", "logits_bit_identical",
          "logits_max_abs_diff", "top1_agree", "host_equals_store", "peak_device_bytes", "reseat_parity_max_rel_error",
          "reseat_parity_floor", "reseat_parity_excess", "reseat_parity_passed", "speedup_store", "speedup_host",
          "speedup_serve", "mount_share_of_raw", "split", "tier", "serve_cached_tokens")
SPLIT = ("load_s", "fetch_s", "commit_s", "raw_read_s", "raw_sha256_s", "h2d_s", "model_s", "tier_load_s", "tier_model_s")


def _run(device: str, name: str, tmp: Path) -> dict:
    """The run's results; its work folder (under `tmp`, the run's TMPDIR) is gone after it."""
    out = ROOT / "bench" / "results" / f"{name}.json"
    out.unlink(missing_ok=True)
    proc = subprocess.run([sys.executable, "-m", "grm", "bench", "gpu", "--device", device, "--quick", "--threads", "2"],
                          cwd=ROOT, capture_output=True, text=True, timeout=600, env={**os.environ, "TMPDIR": str(tmp)})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert not list(tmp.glob("grm-bench-*"))  # its store and cold logits are removed, not left in /tmp
    return json.loads(out.read_text())


def test_gpu_bench_runs_on_cpu_quick(tmp_path):
    data = _run("cpu", "gpu-cpu-quick", tmp_path)
    assert data["command"].startswith("grm bench gpu --device cpu") and data["model"] == "random:llama-3-8b@small"
    assert data["targets"]["speedup_store_new_process_32k_ge_6"] is None  # GPU targets are not judged on a CPU
    assert data["targets"]["speedup_host_tier_server_32k_ge_30"] is None
    rows = data["rows"]
    assert [r["doc_tokens"] for r in rows] == [512, 2048]
    for r in rows:
        assert set(FIELDS) <= set(r), sorted(set(FIELDS) - set(r))
        assert r["device"] == "cpu" and r["dtype"] == "torch.float32"
        assert r["tokens_from_memory"] >= r["doc_tokens"] and r["blocks"] >= r["doc_tokens"] // 512
        assert r["tokens"] > r["doc_tokens"]
        assert r["logits_bit_identical"] and r["logits_max_abs_diff"] == 0.0 and r["top1_agree"]
        assert r["host_equals_store"]
        assert r["reseat_parity_max_rel_error"] < 1e-4 and r["reseat_parity_passed"]
        assert r["raw_bytes_per_s"] is None and r["mount_share_of_raw"] is None  # no accelerator to copy to
        for key in ("cold_s", "warm_store_s", "warm_host_s", "serve_ttft_s", "mount_s", "speedup_store",
                    "speedup_host", "speedup_serve"):
            assert math.isfinite(r[key]) and r[key] > 0, key
        assert set(SPLIT) <= set(r["split"]) and r["split"]["h2d_s"] is None
        assert r["split"]["raw_read_s"] > 0 and r["split"]["raw_sha256_s"] > 0 and r["split"]["load_s"] > 0
        assert r["tier"]["hits"] >= r["blocks"] and r["tier"]["bytes"] > 0  # the host tier served the asks
        assert r["serve_cached_tokens"] >= r["doc_tokens"]
    assert rows[1]["kv_bytes"] > rows[0]["kv_bytes"]
    text = (ROOT / "bench" / "results" / "gpu-cpu-quick.md").read_text()
    assert "| tokens | cold |" in text and "| tokens | cold: model | store load" in text


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device on this machine")
def test_gpu_bench_quick_on_the_gpu(tmp_path):
    """The same steps on the accelerator (bf16 @small): every plane works there, the host plane
    and the store serve the same logits, and the mount's bandwidth is measured against raw."""
    data = _run("cuda", "gpu-quick", tmp_path)
    for r in data["rows"]:
        assert r["device"].startswith("cuda") and r["dtype"] == "torch.bfloat16"
        assert r["tokens_from_memory"] >= r["doc_tokens"] and r["host_equals_store"] and r["top1_agree"]
        assert r["raw_bytes_per_s"] > 0 and 0 < r["mount_share_of_raw"]
        assert 0 < r["peak_device_bytes"] < r["device_total_bytes"]
        assert r["reseat_parity_passed"] and r["split"]["h2d_s"] > 0 and r["tier"]["hits"] >= r["blocks"]
