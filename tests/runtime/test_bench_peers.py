"""bench/peers.py (`grm bench peers`): its own parts on small inputs, and the whole run (`--quick`)
where the llama.cpp venv is built (`make peers-venv`; `make test` never builds it), on SmolLM2:
the harness is the same on every GGUF model, and on Qwen the quick run alone took 272 s of the
suite (46 s on SmolLM2)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import time
from types import SimpleNamespace

import pytest

from tests.conftest import ROOT


def load_peers():
    spec = importlib.util.spec_from_file_location("bench_peers", ROOT / "bench" / "peers.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class Words:
    """A tokenizer stand-in: one token per whitespace-separated word."""

    def encode(self, text):
        return text.split()

    def decode(self, ids):
        return " ".join(ids)


def test_documents_follow_one_another_and_end_at_a_sentence(monkeypatch):
    peers = load_peers()
    arts = [f"Article {i} says a thing. It says more here." for i in range(40)]
    monkeypatch.setattr(peers, "news_corpus", lambda: arts)
    docs = peers.build_docs(Words(), [20, 30])
    assert [d.endswith(".\n") for d in docs] == [True, True]
    assert all(len(d.split()) <= t for d, t in zip(docs, [20, 30]))
    assert docs[0].startswith("Article 0 ") and not docs[1].startswith("Article 0 ")  # no shared first block
    with pytest.raises(SystemExit, match="too few tokens"):
        peers.build_docs(Words(), [10_000])


def test_stages_sum_each_wrapped_call_and_start_over_when_taken():
    peers = load_peers()

    class Thing:
        def slow(self, s):
            time.sleep(s)
            return s

        @staticmethod
        def pure(x):
            return x + 1

    stages = peers.Stages()
    stages.wrap(Thing, "slow", "slow")
    stages.wrap(Thing, "pure", "pure", static=True)
    t = Thing()
    assert t.slow(0.02) == 0.02 and t.slow(0.01) == 0.01 and Thing.pure(1) == 2 and t.pure(2) == 3
    took = stages.take()
    assert 0.03 <= took["slow"] < 0.5 and took["pure"] < 0.01
    assert stages.take() == {}


def test_a_missing_llama_venv_names_the_build():
    peers = load_peers()
    with pytest.raises(SystemExit, match="make peers-venv"):
        peers.check_peers(ROOT / "no-such-venv" / "bin" / "python")


def test_the_store_size_counts_every_file(tmp_path):
    peers = load_peers()
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "b" / "x").write_bytes(b"12345")
    (tmp_path / "y").write_bytes(b"123")
    assert peers.store_bytes(tmp_path) == 8 and peers.store_bytes(tmp_path / "missing") == 0


@pytest.mark.slow
@pytest.mark.model
def test_quick_run_reads_the_same_tokens_on_every_side():
    """1. Every side restores the same prefix (GRM's sinks and document) and reads the same question.
    2. GRM's warm ask serves the whole prefix from memory. 3. Every figure is a measured time."""
    if not (ROOT / ".peers-venv" / "bin" / "python").exists():
        pytest.skip("the llama.cpp venv is not built (make peers-venv)")
    peers = load_peers()
    args = SimpleNamespace(model="smollm2-135m", threads=2, quick=True, dtype="auto")
    assert peers.main(args) == 0
    out = json.loads((ROOT / "bench" / "results" / "peers-quick.json").read_text())
    for r in out["rows"]:
        assert r["grm_warm_tokens_from_memory"] == r["restored_tokens"] > r["doc_tokens"] > 0
        assert r["question_tokens"] > 5 and r["llama_first_piece"] == r["llama_warm_first_piece"]
        for key in ("llama_cold_ttft_s", "llama_warm_ttft_s", "grm_cold_ttft_s", "grm_warm_ttft_s",
                    "grm_resident_ttft_s", "floor_ttft_s"):
            assert 0 < r[key] < 600, key
        assert r["llama_state_bytes"] > r["restored_tokens"] * 1000 and r["grm_store_grew_bytes"] > 0


def test_grm_bench_lists_peers():
    r = subprocess.run([sys.executable, "-m", "grm", "bench", "--help"], cwd=ROOT, capture_output=True, text=True)
    assert "peers" in r.stdout
