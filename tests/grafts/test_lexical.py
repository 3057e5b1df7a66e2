"""The lexical routing channel (grm/route/lexical.py), model-free: a memory said in another
inflection of the question's word is found, at less weight than one said in its very words."""

from __future__ import annotations

from pathlib import Path

import pytest

from grm.route.lexical import LexicalConfig, forms, search
from grm.store import MemoryFS, Store, StoreConfig


@pytest.mark.parametrize("word, some", [
    ("allergy", {"allergies"}), ("allergies", {"allergy"}), ("insures", {"insure", "insured", "insuring"}),
    ("lives", {"live", "lived", "living"}), ("parking", {"park", "parked", "parks"}), ("boxes", {"box"}),
    ("studied", {"study", "studies", "studying"}),
])
def test_forms_are_the_other_inflections(word, some):
    assert some <= set(forms(word)) and word not in forms(word)


@pytest.mark.parametrize("word", ["cat", "X4491", "4721", "e-mail"])
def test_short_words_numbers_and_codes_have_no_forms(word):
    assert forms(word) == []


def test_another_form_is_found_and_the_very_words_rank_first():
    st = Store.open(StoreConfig(root=Path("/mem/lex"), fs=MemoryFS()))
    st.put("t", "graft", "a", text="I take Allegra for my allergies.")
    st.put("t", "graft", "b", text="My desk at work is 6F-031.")
    st.put("t", "graft", "c", text="The diet is actually working.")
    cfg = LexicalConfig()
    assert [h.record.key for h in search(st, "t", "What allergy medication am I on?", "graft", cfg)] == ["a"]
    assert [h.record.key for h in search(st, "t", "What's my desk number at work?", "graft", cfg)][0] == "b"
    st.close()


def test_other_forms_are_searched_only_for_a_word_no_candidate_says():
    class Counting:
        def __init__(self, st):
            self.st, self.queries = st, []

        def search_text(self, tenant, query, **kw):
            self.queries.append(query)
            return self.st.search_text(tenant, query, **kw)

    st = Store.open(StoreConfig(root=Path("/mem/lex2"), fs=MemoryFS()))
    st.put("t", "graft", "a", text="My desk at work is 6F-031.")
    counting = Counting(st)
    search(counting, "t", "my desk at work", "graft", LexicalConfig())
    assert counting.queries == ["desk work"]  # both said as asked: one query
    search(counting, "t", "my desks", "graft", LexicalConfig())
    assert counting.queries[1:] == ["desks", "desk desked desking"]
    st.close()
