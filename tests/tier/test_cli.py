"""`grm tier`, `--store-budget` on ingest, and the tiers in `grm stats` (tiny-random-llama)."""

from __future__ import annotations

import contextlib
import io
import json
import shutil
from pathlib import Path

import pytest

from grm.cli import main
from tests.cli.conftest import TINY, one_error_line
from tests.conftest import lorem


@pytest.fixture(scope="module")
def ingested(tmp_path_factory) -> Path:
    """A store with the document ingested by `grm ingest` (in-process), once per module."""
    import torch

    work = tmp_path_factory.mktemp("filled")
    doc = work / "doc.txt"
    doc.write_text(lorem(6) + "\nThe vault code is 4512.\n", encoding="utf-8")
    store = work / "store"
    threads, out = torch.get_num_threads(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            code = main(["ingest", str(doc), "--store", str(store), "--model", TINY, "--section-tokens", "48",
                         "--block-tokens", "48", "--json"])
    finally:
        torch.set_num_threads(threads)
    got = json.loads(out.getvalue())
    assert code == 0 and got["bytes_per_token"] > 0 and "tiering" not in got
    return store


@pytest.fixture()
def filled(ingested, tmp_path) -> Path:
    """This test's own copy of the ingested store (the tests tier it, ingest into it, chat on it)."""
    shutil.copytree(ingested, tmp_path / "store")
    return tmp_path / "store"


def test_dry_run_lists_moves_with_reasons_and_apply_makes_them(filled, grm, grm_json) -> None:
    code, st = grm_json("stats", "--store", filled)
    full = st["tiers"]["footprint_bytes"]
    assert st["tiers"]["tiers"]["exact"]["spans"] > 0 and st["tiers"]["budget"] is None
    budget = str(full // 2)
    code, dry = grm_json("tier", "--store", filled, "--model", TINY, "--store-budget", budget, "--dry-run")
    assert code == 0 and dry["dry_run"] and dry["moves"] and all(m["why"] for m in dry["moves"])
    code, again = grm_json("stats", "--store", filled)
    assert again["tiers"]["footprint_bytes"] == full and again["tiers"]["budget"] is None  # nothing changed
    code, out, err = grm("tier", "--store", filled, "--model", TINY, "--store-budget", budget, "--apply")
    assert code == 0 and "under_budget: True" in out and "drop " in out  # too little text for codebooks: dropped
    code, st = grm_json("stats", "--store", filled)
    assert st["tiers"]["footprint_bytes"] <= full // 2 and st["tiers"]["budget"] == full // 2
    assert st["tiers"]["tiers"]["text"]["spans"] > 0
    doc = next(iter(st["tiers"]["documents"].values()))
    assert doc["text"] > 0
    code, out, err = grm("stats", "--store", filled)
    assert "footprint" in out and "text" in out and "budget" in out


def test_a_remembered_budget_keeps_later_ingests_under_it(filled, tmp_path, grm_json) -> None:
    code, st = grm_json("stats", "--store", filled)
    budget = st["tiers"]["footprint_bytes"]
    more = tmp_path / "more.txt"
    more.write_text(lorem(6, seed=3), encoding="utf-8")
    code, out = grm_json("ingest", more, "--store", filled, "--model", TINY, "--section-tokens", 48,
                         "--block-tokens", 48, "--store-budget", str(budget))
    assert code == 0 and out["tiering"]["after_bytes"] <= budget
    again = tmp_path / "again.txt"
    again.write_text(lorem(6, seed=4), encoding="utf-8")
    code, out = grm_json("ingest", again, "--store", filled, "--model", TINY, "--section-tokens", 48,
                         "--block-tokens", 48)  # no flag: the stored budget holds
    assert code == 0 and out["tiering"]["after_bytes"] <= budget


@pytest.mark.parametrize("size,says", [("lots", "not a size"), ("-1GB", "not a size"), ("0", "at least 1 byte"),
                                       ("12 parsecs", "not a size")])
def test_a_bad_budget_is_refused_before_anything_runs(tmp_path, grm, size: str, says: str) -> None:
    code, out, err = grm("ingest", tmp_path / "none.txt", "--store", tmp_path / "s", f"--store-budget={size}")
    assert code == 2 and says in err and "Traceback" not in err
    assert not (tmp_path / "s").exists()


def test_tier_without_any_budget_says_how_to_give_one(filled, grm) -> None:
    code, out, err = grm("tier", "--store", filled, "--model", TINY)
    assert code == 2 and "--store-budget" in one_error_line(err)


def test_chat_keeps_the_store_under_its_budget_between_turns(filled, tmp_path, grm, grm_json) -> None:
    code, st = grm_json("stats", "--store", filled)
    budget = st["tiers"]["footprint_bytes"] // 2
    script = tmp_path / "turns.txt"
    script.write_text("The vault code is 4512, remember it.\nWhat is the vault code?\n", encoding="utf-8")
    code, out, err = grm("chat", "--store", filled, "--model", TINY, "--script", script, "--max-new-tokens", 2,
                         "--store-budget", budget)
    assert code == 0 and "[tiering:" in err
    code, st = grm_json("stats", "--store", filled)
    assert st["tiers"]["budget"] == budget and st["tiers"]["footprint_bytes"] <= budget
