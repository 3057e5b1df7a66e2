"""Plain-words updates (grm/policy/updates.py) and the conflict rule that applies them (rule 7 in
grm/policy/rules.py), model-free.

Expectations:
1. Update sentences read as one claim whose `replaces` names the old value ("" when unnamed);
   questions, negations without a new value and ordinary statements are not updates.
2. An update of a fact memory holds supersedes it with lineage (reason "updated"); the fact read
   back is the new value, and the old node's edge points at the new one.
3. A subject worded differently still finds the one fact holding the old value.
4. Ambiguous updates go to the review buffer and change no fact: the named old value is not what
   memory holds, an immutable fact, an unnamed update of a fact it does not outrank.
5. An update of nothing memory holds is a new fact.
6. Phrasings no fixed pattern reads but a change cue marks ("Kim left, so my manager is Ravi
   now", "..., not A", a passive "was reset to B", "I got a new X: B") read clause by clause; a
   cued clause whose value is no name or code ("my brother was sent to camp") is not an update.
7. The fact's statement is the claim in canonical form ("My bank is Ally"), without "now" or the
   old value: what the fact's graft reads alone.
"""

from __future__ import annotations

import pytest

from grm.policy import parse_statement
from grm.policy.updates import parse_update, restate


def one(text):
    (p,) = parse_statement(text)
    return p.subject, p.predicate, p.value, p.replaces


@pytest.mark.parametrize("text, want", [
    ("the launch slipped from May to June", ("the launch", "is", "June", "May")),
    ("I switched my bank from Chase to Ally.", ("my bank", "is", "Ally", "Chase")),
    ("the wifi password is different now: hunter3", ("the wifi password", "is", "hunter3", "")),
    ("we no longer meet in room 4, it's room 9", ("we", "meet in", "room 9", "room 4")),
    ("My locker code is now 2718.", ("My locker code", "is", "2718", "")),
    ("The new team lead is Bruno.", ("The team lead", "is", "Bruno", "")),
    ("I changed my email to ann@x.org", ("my email", "is", "ann@x.org", "")),
    ("The gate code is no longer 5521, it's 8830.", ("The gate code", "is", "8830", "5521")),
    ("I moved to Lisbon", ("I", "live in", "Lisbon", "")),
])
def test_update_sentences_read_as_one_claim_replacing_the_old_value(text, want):
    assert one(text) == want


@pytest.mark.parametrize("text", [
    "did the launch slip from May to June?", "my bank is Chase", "the launch is not June", "hello there",
    "my code is no longer 5",
])
def test_non_updates_are_not_updates(text):
    assert parse_update(text) is None or parse_update(text).replaces is None
    assert all(p.replaces is None for p in parse_statement(text))


# written for the session-6 generic readers (not the bench's TUNE/HELD-OUT/FRESH sentences)
@pytest.mark.parametrize("text, want", [
    ("The meeting was rescheduled to Thursday.", ("The meeting", "is", "Thursday", "")),
    ("Our rent went up to 1450.", ("Our rent", "is", "1450", "")),
    ("The recital has been moved from June 3 to June 10.", ("The recital", "is", "June 10", "June 3")),
    ("My email is ann@y.org these days, not ann@x.org.", ("My email", "is", "ann@y.org", "ann@x.org")),
    ("Kim left, so my manager is Ravi now.", ("my manager", "is", "Ravi", "")),
    ("I got a new phone number: 555-0100.", ("my phone number", "is", "555-0100", "")),
    ("We have a new landlord, Mr. Osei.", ("our landlord", "is", "Mr. Osei", "")),
    ("The router password is not admin any more, it's Tulip44.", ("The router password", "is", "Tulip44", "admin")),
    ("My car is a Honda now after the crash.", ("My car", "is", "a Honda", "")),
    ("I cancelled Netflix and my streaming service is Hulu now.", ("my streaming service", "is", "Hulu", "")),
    ("The dentist appointment got pushed back to 3 pm.", ("The dentist appointment", "is", "3 pm", "")),
    ("I replaced my mechanic: my new mechanic is Yusuf.", ("my mechanic", "is", "Yusuf", "")),
])
def test_cued_phrasings_read_as_updates(text, want):
    assert one(text) == want


@pytest.mark.parametrize("text", [
    "My brother was sent to camp.", "The new team is nice.", "Now my dog is sleeping.", "The kids went to the park.",
    "I left early today.", "My new job is great and I love it.", "Is the meeting now on Friday?",
])
def test_cued_sentences_without_a_value_like_claim_are_not_updates(text):
    assert all(p.replaces is None for p in parse_statement(text))


@pytest.mark.parametrize("text, statement", [
    ("I switched my bank from Chase to Ally.", "My bank is Ally"),
    ("we no longer meet in room 4, it's room 9", "We meet in room 9"),
    ("Kim left, so my manager is Ravi now.", "My manager is Ravi"),
])
def test_an_update_states_its_claim_canonically(text, statement):
    (p,) = parse_statement(text)
    assert p.statement == statement


def test_an_update_reads_as_the_fact_it_changes_did(mem):
    mem.observe("The recital is on June 3.", evidence_id="s#1", now=1.0)
    (o,) = mem.observe("The recital has been moved from June 3 to June 10.", evidence_id="s#2", now=2.0)
    assert o.action == "superseded"
    assert [f.statement for f in mem.facts(3.0)] == ["The recital is on June 10"]


def test_restate_keeps_the_canonical_claim_when_the_old_statement_is_unclear():
    (p,) = parse_statement("I switched my bank from Chase to Ally.")
    assert restate(p, "My bank is Chase", "Chase").statement == "My bank is Ally"
    assert restate(p, "Chase is my bank, Chase", "Chase").statement == "My bank is Ally"  # twice: unclear
    assert restate(p, "My bank is a big one", "Chase").statement == "My bank is Ally"  # not held


def test_a_cued_update_supersedes_the_fact_it_changes(mem):
    (made,) = mem.observe("My accountant is Hollis.", evidence_id="s#1", now=1.0)
    (o,) = mem.observe("Hollis moved away, so my accountant is Marguerite now.", evidence_id="s#2", now=2.0)
    assert o.action == "superseded" and o.superseded == (made.fact,)
    assert [f.value for f in mem.facts(3.0)] == ["Marguerite"]
    (o,) = mem.observe("My accountant is Pham these days, not Hollis.", evidence_id="s#3", now=3.0)
    assert o.action == "review"  # names an old value memory no longer holds


def test_an_update_supersedes_the_fact_it_names_with_lineage(mem):
    (made,) = mem.observe("My bank is Chase.", evidence_id="s#1", now=1.0)
    (o,) = mem.observe("I switched my bank from Chase to Ally.", evidence_id="s#2", now=2.0)
    assert o.action == "superseded" and o.superseded == (made.fact,) and "updated" in o.detail
    (live,) = mem.facts(3.0)
    assert live.value == "Ally" and live.supersedes == (made.fact,)
    edge = mem.ledger.edge(made.fact)
    assert edge["successor"] == live.id and edge["reason"] == "updated"


def test_a_subject_worded_differently_finds_the_fact_holding_the_old_value(mem):
    mem.observe("The launch is in May.", evidence_id="s#1", now=1.0)
    (o,) = mem.observe("The launch date slipped from May to June.", evidence_id="s#2", now=2.0)
    assert o.action == "superseded"
    assert [f.value for f in mem.facts(3.0)] == ["June"]


@pytest.mark.parametrize("first, update", [
    ("My bank is Chase.", "I switched my bank from Citi to Ally."),  # not what memory holds
    ("The launch is in May.", "The launch date moved from July to August."),  # worded differently, other value
])
def test_an_update_naming_another_old_value_is_held_for_review(mem, first, update):
    (made,) = mem.observe(first, evidence_id="s#1", now=1.0)
    (o,) = mem.observe(update, evidence_id="s#2", now=2.0)
    assert o.action == "review" and o.review
    assert [f.id for f in mem.facts(3.0)] == [made.fact]
    assert mem.reviews.get(o.review).conflicts == made.fact


def test_an_update_of_an_immutable_fact_is_held_for_review(mem):
    mem.handle("remember permanently: my bank is Chase", evidence_id="c#1", now=1.0)
    assert mem.handle("mark immutable: my bank", evidence_id="c#2", now=1.5).changed
    (o,) = mem.observe("I switched my bank from Chase to Ally.", evidence_id="s#2", now=2.0)
    assert o.action == "review" and [f.value for f in mem.facts(3.0)] == ["Chase"]


def test_an_unnamed_update_does_not_overrule_what_the_user_asserted(mem):
    mem.handle("remember permanently: the wifi password is Swordfish", evidence_id="c#1", now=1.0)
    (o,) = mem.observe("The wifi password is different now: hunter3", evidence_id="s#2", now=2.0)
    assert o.action == "review" and [f.value for f in mem.facts(3.0)] == ["Swordfish"]
    (o,) = mem.observe("The wifi password changed from Swordfish to hunter3.", evidence_id="s#3", now=3.0)
    assert o.action == "superseded" and [f.value for f in mem.facts(4.0)] == ["hunter3"]


def test_an_update_of_nothing_held_is_a_new_fact(mem):
    (o,) = mem.observe("we no longer meet in room 4, it's room 9", evidence_id="s#1", now=1.0)
    assert o.action == "created" and [f.value for f in mem.facts(2.0)] == ["room 9"]
