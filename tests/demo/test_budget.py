"""The demo's budget for cold reads (grm/demo/run.py): a larger document whose cold read, projected
from the last one's rate, would pass `--cold-budget` is left out; the first is always read."""

from __future__ import annotations

import pytest

from grm.cli import build_parser
from grm.demo.run import COLD_BUDGET_S, PROJECTION, projected_s, within_budget


def test_the_first_document_is_always_read_and_a_larger_one_only_within_the_budget():
    assert within_budget(0.0, 6000, None, 1.0)  # no rate yet
    rate = 40.0  # tokens per second, measured on the first document
    assert projected_s(2000, rate) == pytest.approx(2000 / 40 * PROJECTION)
    assert within_budget(15.0, 2000, rate, COLD_BUDGET_S)  # 15 s + 62.5 s
    assert not within_budget(80.0, 6000, rate, COLD_BUDGET_S)  # 80 s + 187.5 s
    assert within_budget(80.0, 6000, rate, 0)  # --cold-budget 0: every document


def test_the_budget_flag():
    assert build_parser().parse_args(["demo"]).cold_budget == COLD_BUDGET_S
    assert build_parser().parse_args(["demo", "--cold-budget", "0"]).cold_budget == 0
    for bad in ("-1", "x", "inf"):
        with pytest.raises(SystemExit):
            build_parser().parse_args(["demo", "--cold-budget", bad])
