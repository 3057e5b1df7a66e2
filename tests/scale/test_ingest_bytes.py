"""`grm ingest` says what the store grew by on disk: `stored_bytes` and bytes per token."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.conftest import _restore_torch_threads, grm  # noqa: F401  (`grm` in-process)
from tests.conftest import lorem


def folder_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


def test_ingest_reports_the_store_folders_growth(tmp_path, grm):
    """Every ingest runs in this process (grm.cli.main, as tests/cli does where the process itself
    does not matter). The second document's `stored_bytes` is the folder's growth measured from
    outside (payload files as written, log, catalog), not the payloads' logical sizes."""
    store = tmp_path / "s"

    def ingest(doc: Path) -> dict:
        code, out, err = grm("ingest", str(doc), "--store", str(store), "--model", "tiny-random-llama", "--json")
        assert code == 0, err[-2000:]
        return json.loads(out)

    first_doc, second_doc = tmp_path / "a.txt", tmp_path / "b.txt"
    first_doc.write_text(lorem(4, seed=2))
    second_doc.write_text(lorem(5, seed=3))
    first = ingest(first_doc)
    assert first["stored_bytes"] > first["tokens"] * 100  # K/V: hundreds of bytes per token
    assert first["bytes_per_token"] == round(first["stored_bytes"] / first["tokens"])
    before = folder_bytes(store)
    second = ingest(second_doc)
    grown = folder_bytes(store) - before
    payloads = sum(p.stat().st_size for p in (store / "payloads").rglob("*") if p.is_file())
    assert abs(second["stored_bytes"] - grown) <= 0.02 * grown + 8192, (second["stored_bytes"], grown)
    assert second["stored_bytes"] > 0 and payloads < folder_bytes(store)  # more than payloads land
    again = ingest(second_doc)  # nothing new computed: only the document row is written again
    assert again["computed"] == 0 and 0 <= again["stored_bytes"] < 0.05 * second["stored_bytes"]
