"""`grm ingest` says what the store grew by: payload bytes added and bytes per token."""

from __future__ import annotations

import json

from tests.cli.conftest import _restore_torch_threads, grm  # noqa: F401  (`grm` in-process)
from tests.conftest import lorem


def test_ingest_prints_bytes_per_token(tmp_path, grm):
    """Both ingests run in this process (grm.cli.main, as tests/cli does where the process itself
    does not matter)."""
    doc = tmp_path / "doc.txt"
    doc.write_text(lorem(4, seed=2))

    def ingest() -> dict:
        code, out, err = grm("ingest", str(doc), "--store", str(tmp_path / "s"), "--model", "tiny-random-llama",
                             "--json")
        assert code == 0, err[-2000:]
        return json.loads(out)

    first = ingest()
    assert first["stored_bytes"] > first["tokens"] * 100  # K/V: hundreds of bytes per token
    assert first["bytes_per_token"] == round(first["stored_bytes"] / first["tokens"])
    again = ingest()  # nothing new stored
    assert again["stored_bytes"] == 0 and again["bytes_per_token"] == 0
