"""Block splitting: along structure, within budget, byte-exact concatenation."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grm.exact.blocks import split_blocks
from grm.models.tokenizer import ByteTokenizer
from tests.conftest import lorem

TOK = ByteTokenizer()


@pytest.mark.parametrize("budget", [8, 40, 200, 1000])
def test_blocks_concatenate_to_the_document_and_fit_the_budget(budget):
    text = lorem(20, seed=budget)
    blocks = split_blocks(text, TOK, budget)
    assert "".join(b.text for b in blocks) == text
    assert all(len(b.ids) <= budget for b in blocks)
    assert all(list(b.ids) == TOK.encode(b.text) for b in blocks)


def test_cuts_prefer_paragraph_boundaries():
    text = "First paragraph here.\n\nSecond one is here.\n\nThird."
    blocks = split_blocks(text, TOK, 25)
    assert [b.text for b in blocks] == ["First paragraph here.\n\n", "Second one is here.\n\n", "Third."]


def test_a_long_sentence_is_cut_at_word_boundaries():
    text = "alpha beta gamma delta epsilon zeta eta theta"
    blocks = split_blocks(text, TOK, 12)
    assert "".join(b.text for b in blocks) == text
    assert all(b.text.startswith(" ") or i == 0 for i, b in enumerate(blocks))


@settings(max_examples=60, deadline=None)
@given(st.text(min_size=1, max_size=300), st.integers(min_value=8, max_value=64))
def test_any_text_round_trips(text, budget):
    blocks = split_blocks(text, TOK, budget)
    assert "".join(b.text for b in blocks) == text
    # A single character is at most 4 UTF-8 bytes, so every block fits the budget.
    assert all(len(b.ids) <= budget for b in blocks)
