"""`grm ask` (grm/cli/ask.py): a missing or empty store is refused before generating from nothing;
bad --max-new-tokens and --threads are caught; a good ask still answers."""

from __future__ import annotations

import pytest

from tests.cli.conftest import TINY, one_error_line


@pytest.fixture()
def store_with_a(grm, tmp_path):
    """A store where tenant `a` holds one ingested document."""
    doc = tmp_path / "d.txt"
    doc.write_text("The harbor boat is called Marigold.\n\nIt sails on Tuesdays.\n")
    store = tmp_path / "s"
    code, _, err = grm("ingest", doc, "--store", store, "--model", TINY, "--tenant", "a")
    assert code == 0, err
    return store


def test_ask_on_a_missing_store_exits_2_and_creates_nothing(grm, tmp_path):
    for mode in ("auto", "exact", "grafts"):
        code, out, err = grm("ask", "Who sails?", "--store", tmp_path / "nope", "--model", TINY, "--mode", mode)
        assert code == 2 and out == "" and "no GRM store at" in one_error_line(err)
    assert not (tmp_path / "nope").exists()


def test_ask_for_a_tenant_with_nothing_stored_exits_2(grm, store_with_a):
    for mode in ("auto", "exact-section", "grafts", "none", "rag-text"):
        code, out, err = grm("ask", "Who sails?", "--store", store_with_a, "--model", TINY, "--tenant", "b",
                             "--mode", mode)
        line = one_error_line(err)
        assert code == 2 and out == "", (mode, err)
        assert "holds no documents or memories for tenant 'b'" in line and "grm ingest" in line
    code, out, err = grm("ask", "Who sails?", "--store", store_with_a, "--model", TINY, "--tenant", "a",
                         "--max-new-tokens", "2", "--threads", "1")
    assert code == 0 and "tokens from memory" in err, err  # tenant a has its document: it answers


def test_exact_mode_answers_a_whole_prompt_even_for_an_empty_tenant(grm_json, store_with_a):
    code, out = grm_json("ask", "The harbor boat is called", "--store", store_with_a, "--model", TINY,
                         "--tenant", "b", "--mode", "exact", "--max-new-tokens", "2")
    assert code == 0 and out["mode"] == "exact" and out["tokens_from_memory"] < out["prompt_tokens"]


@pytest.mark.parametrize("value", ["0", "-3", "many"])
def test_max_new_tokens_below_one_is_a_usage_error(grm, tmp_path, value):
    for cmd in (["ask", "q"], ["chat"], ["demo"]):
        code, out, err = grm(*cmd, f"--max-new-tokens={value}", "--store", tmp_path / "s")
        assert code == 2 and "argument --max-new-tokens:" in err, (cmd, err)
    assert not (tmp_path / "s").exists()


def test_threads_far_above_the_cores_are_clamped_not_a_crash(grm_json, grm, store_with_a):
    code, out, err = grm("ask", "Who sails?", "--store", store_with_a, "--model", TINY, "--tenant", "a",
                         "--threads", "100000", "--max-new-tokens", "2", "--json")
    assert code == 0, err
    assert "grm: warning: --threads 100000 is more than the" in err


def test_a_prompt_file_that_is_not_utf8_is_one_line(grm, store_with_a, tmp_path):
    bad = tmp_path / "p.txt"
    bad.write_bytes(b"caf\xe9?")
    code, _, err = grm("ask", "--prompt-file", bad, "--store", store_with_a, "--model", TINY, "--tenant", "a")
    assert code == 2 and "is not UTF-8 text" in one_error_line(err)
