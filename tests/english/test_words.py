"""The one stop-word list, the closed classes it is built from, and the one plural fold."""

from __future__ import annotations

import pytest

from grm.english.words import BE, DETERMINERS, MODALS, PREPOSITIONS, PRONOUNS, STOP_WORDS, WH, stem


@pytest.mark.parametrize("word,want", [
    ("Codes", "code"), ("sister's", "sister"), ("sister’s", "sister"), ("parents'", "parent"),
    ("berries", "berry"), ("pharmacies", "pharmacy"), ("boxes", "box"), ("classes", "class"),
    ("churches", "church"), ("wishes", "wish"), ("hotels", "hotel"),
    ("glass", "glass"), ("class", "class"), ("bus", "bus"), ("status", "status"), ("tennis", "tennis"),
    ("ties", "tie"), ("gas", "gas"),
])
def test_stem_folds_plurals_and_possessives_and_keeps_words_that_only_end_in_s(word, want):
    assert stem(word) == want


def test_a_plural_and_its_singular_compare_equal():
    for one, many in [("box", "boxes"), ("code", "Codes"), ("city", "cities"), ("class", "classes")]:
        assert stem(one) == stem(many)


def test_stop_words_hold_every_closed_class_and_no_content_word():
    for cls in (WH, BE, DETERMINERS, PRONOUNS, PREPOSITIONS, MODALS):
        assert cls <= STOP_WORDS
    assert {"please", "tell", "not", "have", "them"} <= STOP_WORDS
    assert not {"code", "name", "locker", "box", "time", "day"} & STOP_WORDS
