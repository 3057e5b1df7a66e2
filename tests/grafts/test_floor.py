"""The abstention floor (grm/grafts/floor.py), model-free.

Expectations:
1. Support is the IDF-weighted share of the question's content words the routed text holds:
   1.0 when it holds them all, 0.0 when none, a word every text holds weighing less than a rare one.
2. The question of a chat turn's user line is not evidence; a document's questions are.
3. A question abstains when nothing was routed, or support is under the floor and none of its
   names/numbers was found; an identifier found keeps it.
4. Only questions about the user's own memory are candidates in chat.
"""

from __future__ import annotations

import pytest

from grm.grafts.floor import DocumentFrequencies, asks_memory, declarative, ground, support, topic_terms

STORE = ["User: My locker code is 4721.\nAssistant: Noted.\n\n", "User: My cat is Pepper.\nAssistant: Nice.\n\n",
         "User: The garage code is 8305.\nAssistant: Ok.\n\n", "User: What is my sister's name?\nAssistant: Anna.\n\n"]
FREQ = DocumentFrequencies(STORE)


def test_support_is_the_weighted_share_of_the_question_held():
    assert support("What is my locker code?", [STORE[0]], FREQ)[0] == pytest.approx(1.0)
    assert support("What is my shoe size?", [STORE[0]], FREQ)[0] == 0.0
    locker, missing = support("What is the locker number?", [STORE[0]], FREQ)
    assert 0 < locker < 1 and missing == ("number",)
    # "code" is in two of four texts, "garage" in one: the garage text covers more of the question
    garage = support("What is the garage code?", [STORE[2]], FREQ)[0]
    only_code = support("What is the garage code?", [STORE[0]], FREQ)[0]
    assert garage == pytest.approx(1.0) and only_code < 0.5


def test_a_turns_question_is_not_evidence_but_a_documents_is():
    assert "sister" not in declarative(STORE[3]) and "Anna" in declarative(STORE[3])
    assert support("What is my sister's name?", [STORE[3]], FREQ)[0] < 0.5
    faq = "What is the refund window? Thirty days."
    assert declarative(faq) == faq


def test_grounding_abstains_below_the_floor_unless_an_identifier_is_found():
    assert ground("What is my locker code?", [], FREQ, 0.5).abstain  # nothing routed
    assert not ground("What is my locker code?", [STORE[0]], FREQ, 0.5).abstain
    g = ground("What is my shoe size?", [STORE[0]], FREQ, 0.5)
    assert g.abstain and g.to_json()["missing"] == ["shoe", "size"]
    held = ground("Who owns the code 4721 again?", [STORE[0]], FREQ, 0.99)
    assert not held.abstain and held.identifiers == ("4721",)
    assert not ground("What is my shoe size?", [STORE[0]], FREQ, 0.0).abstain  # floor 0: never on routed text


@pytest.mark.parametrize("text, want", [
    ("What is my locker code?", True), ("Where do we meet on Tuesdays?", True), ("who is our plumber", True),
    ("How do I keep houseplants alive?", False), ("Who was Napoleon?", False), ("My code is 5.", False),
    ("Good morning! How are you today?", False),
])
def test_only_questions_about_the_users_memory_are_candidates(text, want):
    assert asks_memory(text) is want


def test_a_turn_that_only_asked_is_not_evidence_and_answer_kinds_do_not_count():
    from grm.grafts.floor import only_asks

    assert only_asks("User: What is my locker code?\nAssistant: It is 4721.\n\n")
    assert not only_asks("User: My locker code is 4721. Can you keep it?\nAssistant: Sure.\n\n")
    assert not only_asks("What is the refund window? Thirty days.")  # a document, not a turn
    freq = DocumentFrequencies(["User: My dog is Max.\nAssistant: Nice.\n\n", "User: My cat is Tom.\n\n"])
    assert support("What is my dog's name?", ["User: My dog is Max.\n\n"], freq)[0] == pytest.approx(1.0)


def test_a_kind_of_value_is_found_by_a_value_of_that_kind_and_contractions_ask_nothing():
    """"What day ...?" is held by a text saying a weekday, "what time" by a clock time; "What's"
    and "Who's" are question words, never missing content."""
    freq = DocumentFrequencies(["User: I like tea.", "User: My dog is Rex.", "User: The bins go out on Friday."] * 3)
    held = ["User: Our veg box comes on Sunday."]
    assert support("What day does our veg box arrive?", held, freq)[1] == ("arrive",)
    assert "time" in support("What time does our veg box come?", held, freq)[1]
    assert "day" not in support("What day is it held?", ["The fair is on 3 May."], freq)[1]
    assert support("What's our veg box?", held, freq) == (1.0, ())
    assert support("Who's my dentist?", ["My dentist is Dr. Vale."], freq) == (1.0, ())
    assert "month" in support("What month is the fair?", ["We may go to the fair."], freq)[1]


@pytest.mark.parametrize("question, topic", [
    ("When does my mother-in-law arrive?", {"mother-in-law"}),
    ("Which city does my brother live in?", {"city", "brother"}),
    ("What school does my daughter attend?", {"school", "daughter"}),
    ("Where did I park my scooter?", {"scooter"}),  # no noun phrase after "did": the scooter stays
])
def test_the_verb_after_do_and_its_noun_phrase_is_how_it_is_asked(question, topic):
    """The verb ending a do-question is not what the question is about: missing, it costs a
    quarter of a noun ("arrive" vs "visiting on the 12th")."""
    assert topic_terms(question) == topic
    said = ["User: My mother-in-law is visiting on the 12th of October.\n"]
    if "mother" in question:
        assert support(question, said, DocumentFrequencies(said + STORE))[0] > 0.6  # 0.36 were "arrive" a noun


def test_a_word_said_in_another_inflection_is_held():
    said = ["User: My brother moved to San Luis Obispo.\n", "User: I take Allegra for my allergies.\n"]
    freq = DocumentFrequencies(said + STORE)
    assert support("Where did my brother move to?", said[:1], freq) == (1.0, ())
    assert support("Where does my brother currently live?", said[:1], freq)[1] == ("live",)  # "currently" asks nothing
    assert support("Which pharmacy fills my allergy medication?", said[1:], freq)[1] == ("fill", "medication", "pharmacy")
