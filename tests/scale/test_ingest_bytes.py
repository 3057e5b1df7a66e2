"""`grm ingest` says what the store grew by: payload bytes added and bytes per token."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import ROOT, lorem


def test_ingest_prints_bytes_per_token(tmp_path):
    doc = tmp_path / "doc.txt"
    doc.write_text(lorem(4, seed=2))

    def ingest() -> dict:
        done = subprocess.run([sys.executable, "-m", "grm", "ingest", str(doc), "--store", str(tmp_path / "s"),
                               "--model", "tiny-random-llama", "--json"], cwd=ROOT, capture_output=True,
                              text=True, timeout=240)
        assert done.returncode == 0, done.stderr[-2000:]
        return json.loads(done.stdout)

    first = ingest()
    assert first["stored_bytes"] > first["tokens"] * 100  # K/V: hundreds of bytes per token
    assert first["bytes_per_token"] == round(first["stored_bytes"] / first["tokens"])
    again = ingest()  # nothing new stored
    assert again["stored_bytes"] == 0 and again["bytes_per_token"] == 0
