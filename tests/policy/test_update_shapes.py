"""Plain-words updates of many shapes (session 7: grm/policy/updates.py, rules.py rule 7, the
subject match), model-free. Every sentence here was written for these tests.

Expectations:
1. Each update shape reads as one claim, its `replaces` the old value as said ("" unnamed):
   someone acting on a subject ("Facilities renamed the guest network to Nimbus"), a bare
   subject ("Choir practice moved to Tuesdays"), "it's B" after a clause naming the subject,
   "we switched Xs, we use B", a departure naming the old value for an I/we claim ("Dr. Moreau
   closed the clinic"), a change taking effect "from next week", "gave me a different X: B".
2. Ordinary sentences with change words and no value-like claim are not updates.
3. An update whose subject is a shorter name of one stored subject ("choir practice" for "my
   choir practice") supersedes it and takes its subject and statement; two candidates: review.
4. An I/we update naming only the values supersedes the one fact holding the old value, of any
   subject; never a fact of a subject the update named differently; two holders: review.
5. First statements in new shapes are facts an update can supersede: "the X starts at 9",
   "our group meets on Thursday", "the X is behind the door", "the hotel is the Marlowe".
"""

from __future__ import annotations

import pytest

from grm.policy import parse_statement
from grm.policy.fact import stems


def one(text):
    (p,) = parse_statement(text)
    return p.subject, p.predicate, p.value, p.replaces


@pytest.mark.parametrize("text, want", [
    ("Choir practice moved to Tuesdays starting next month.", ("Choir practice", "is", "Tuesdays", "")),
    ("My dental plan was switched to Delta by my employer.", ("My dental plan", "is", "Delta", "")),
    ("The landlord reset the alarm code to 9911.", ("the alarm code", "is", "9911", "")),
    ("Facilities renamed the guest network to Nimbus.", ("the guest network", "is", "Nimbus", "")),
    ("HR reissued my badge number as 77120.", ("my badge number", "is", "77120", "")),
    ("We switched the support inbox over to #help-desk.", ("the support inbox", "is", "#help-desk", "")),
    ("I moved the passports from the desk drawer to the safe.", ("the passports", "is", "the safe", "the desk drawer")),
    ("The clinic gave me a different room number: 14B.", ("my room number", "is", "14B", "")),
    ("Swapped the door code this morning, it's 7781 now.", ("the door code", "is", "7781", "")),
    ("Mr. Diaz retired; my tutor these days is Ms. Kaur.", ("my tutor", "is", "Ms. Kaur", "")),
    ("We see Dr. Patel for the dog now; Dr. Moreau closed the clinic.", ("we", "see", "Dr. Patel", "Dr. Moreau")),
    ("I don't use Dropbox anymore, we use Box now.", ("we", "use", "Box", "Dropbox")),
    ("Pilates is on Mondays now instead of Thursdays.", ("Pilates", "is", "Mondays", "Thursdays")),
    ("We switched pharmacies, we use Rite Aid now.", ("our pharmacy", "is", "Rite Aid", "")),
    ("From next week, the standup starts at 9:15.", ("the standup", "is", "9:15", "")),
    ("My son's bus is late, it now arrives at 8:40.", ("My son's bus", "is", "8:40", "")),
    ("Ana left, so Bea coaches us now.", ("we", "coaches us", "Bea", "Ana")),
    ("I quit Planet Fit and joined Crunch.", ("I", "joined", "Crunch", "Planet Fit")),
    ("They reset the boiler code, 4410 won't work now; use 9203.", ("the boiler code", "is", "9203", "")),
    ("Quick update: the shed code is 2207.", ("the shed code", "is", "2207", "")),
    ("New guest wifi password: Lantern5.", ("the guest wifi password", "is", "Lantern5", "")),
    ("My parrot is now called Kiwi.", ("My parrot", "is", "Kiwi", "")),
    ("The retro will be in room 12 from now on.", ("The retro", "is", "room 12", "")),
    ("The copier isn't on floor 2 anymore, it's on floor 6.", ("The copier", "is", "floor 6", "floor 2")),
    ("My parking permit was reissued as P-5521.", ("My parking permit", "is", "P-5521", "")),
    ("My work extension changed. The new one is 4471.", ("My work extension", "is", "4471", "")),  # two sentences
    ("I reset the shed code. It's 9012 now.", ("the shed code", "is", "9012", "")),
    ("I put the spare charger in my backpack now.", ("the spare charger", "is", "in my backpack", "")),
    ("We moved the bikes to the garden shed.", ("the bikes", "is", "in the garden shed", "")),
    ("I traded the Corolla for a Model 3.", ("I", "have", "a Model 3", "Corolla")),
    ("My son has a new coach, Ms. Tran.", ("My son's coach", "is", "Ms. Tran", "")),
    ("We switched pediatricians to Dr. Osei.", ("our pediatrician", "is", "Dr. Osei", "")),
    ("IT swapped my work laptop for a MacBook.", ("my work laptop", "is", "a MacBook", "")),
    ("We've been going to Zazie for brunch instead of Tartine.", ("we", "go to", "Zazie", "Tartine")),
    ("The vet visit was rescheduled for May 11.", ("The vet visit", "is", "May 11", "")),
    ("The parking garage closes at midnight now.", ("The parking garage", "is", "midnight", "")),
    ("Turns out the picnic's on Sunday, not Saturday.", ("the picnic", "is", "Sunday", "Saturday")),
    ("Correction: my seat is 14C, not 12A.", ("my seat", "is", "14C", "12A")),
    ("New locker combo: 2219 (was 8871).", ("the locker combo", "is", "2219", "8871")),
    ("Dr. Amari replaced Dr. Kole as my allergist.", ("my allergist", "is", "Dr. Amari", "Dr. Kole")),
    ("Ines took over as the choir director.", ("the choir director", "is", "Ines", "")),
    ("The shed code used to be 3141 but now it's 2718.", ("The shed code", "is", "2718", "3141")),
    ("The gala is happening on May 9 instead.", ("The gala", "is", "May 9", "")),
    ("Going forward my editor is Helix.", ("my editor", "is", "Helix", "")),
    ("I drive a Rivian now.", ("I", "drive", "a Rivian", "")),
    ("Router password got changed to Kestrel5.", ("Router password", "is", "Kestrel5", "")),
    ("Farah moved to another team, so Gil mentors me now.", ("I", "mentors me", "Gil", "Farah")),
    ("We use Becker for plumbing now since Halvorsen retired.", ("we", "use", "Becker", "Halvorsen")),
])
def test_update_shapes_read_as_one_claim(text, want):
    assert one(text) == want


@pytest.mark.parametrize("text", [
    "Sam is coming now.", "I moved the couch yesterday.", "I don't see the point anymore.",
    "Prices changed a lot this year.", "Everything is fine now.", "The kids are at school now.",
    "My sister left for Rome.", "They gave me a new phone for my birthday, an iPhone.",
    "We switched seats, it was nicer.", "My brother was moved to a new team.",
    "I went to the store. It's closed now.", "It's Tuesday now.", "I arrived at Heathrow now.", "We are at Luigi's now.",
    "We traded stories for an hour.", "I replaced the battery with a new one.", "Gil mentors me now.",
    "We switched seats to the back.", "I swapped my shift for a day off.", "We've been going to the gym a lot.",
    "The weather's been awful, it was raining all week.", "I used to play piano.", "The store's closed now.",
    "It's a nice day - we went to the park.", "Scratch that, I'm tired.",
])
def test_change_words_without_a_value_like_claim_are_not_updates(text):
    assert all(p.replaces is None for p in parse_statement(text))


@pytest.mark.parametrize("text, want", [
    ("The standup starts at 9.", ("The standup", "is", "9", None)),
    ("Our reading group meets on Thursday.", ("Our reading group", "is", "Thursday", None)),
    ("The bike pump is behind the door.", ("The bike pump", "is", "behind the door", None)),
    ("The hotel is the Marlowe.", ("The hotel", "is", "the Marlowe", None)),
    ("The support inbox is #support.", ("The support inbox", "is", "#support", None)),
    ("We get coffee at Blue Bottle.", ("we", "get coffee at", "Blue Bottle", None)),
])
def test_first_statements_in_new_shapes_are_facts(text, want):
    assert one(text) == want


def test_subject_words_fold_plurals_and_drop_function_words():
    assert stems("our family doctor's office") == {"family", "doctor", "office"}
    assert stems("Pharmacies") == stems("my pharmacy") == {"pharmacy"}
    assert stems("the Fridays") == {"friday"} and stems("my class") == {"class"}


def test_a_shorter_subject_supersedes_the_one_fact_it_names_and_takes_its_words(mem):
    (made,) = mem.observe("My choir practice is on Wednesday.", evidence_id="s#1", now=1.0)
    (o,) = mem.observe("Choir practice moved to Tuesdays starting next month.", evidence_id="s#2", now=2.0)
    assert o.action == "superseded" and o.superseded == (made.fact,)
    (live,) = mem.facts(3.0)
    assert (live.subject, live.value, live.statement) == ("My choir practice", "Tuesdays", "My choir practice is on Tuesdays")
    assert mem.ledger.edge(made.fact)["reason"] == "updated"
    (o,) = mem.observe("Choir practice moved to Mondays.", evidence_id="s#3", now=4.0)  # the lineage goes on
    assert o.action == "superseded" and [f.value for f in mem.facts(5.0)] == ["Mondays"]


def test_a_shorter_subject_naming_two_facts_is_held_for_review(mem):
    mem.observe("My yoga class is on Monday.", evidence_id="s#1", now=1.0)
    mem.observe("My yoga retreat is on Friday.", evidence_id="s#2", now=1.5)
    (o,) = mem.observe("Yoga moved to Thursday.", evidence_id="s#3", now=2.0)
    assert o.action == "review"
    assert sorted(f.value for f in mem.facts(3.0)) == ["on Friday", "on Monday"]


def test_a_review_the_kind_of_value_settles_is_read_and_kept(mem):
    """The rules cannot tell which yoga fact "Yoga moved to Thursday" changes; only one of them
    holds a day, so the aligned reader supersedes it. The review item stays for the user."""
    mem.observe("My yoga class is on Monday.", evidence_id="s#1", now=1.0)
    mem.observe("My yoga teacher is Ines.", evidence_id="s#2", now=1.5)
    held, read = mem.observe("Yoga moved to Thursday.", evidence_id="s#3", now=2.0)
    assert held.action == "review" and read.action == "superseded"
    assert sorted(f.value for f in mem.facts(3.0)) == ["Ines", "on Thursday"]
    assert len(mem.reviews.pending()) == 1


def test_an_update_naming_only_values_supersedes_the_fact_holding_the_old_one(mem):
    (made,) = mem.observe("My vet is Dr. Moreau.", evidence_id="s#1", now=1.0)
    mem.observe("My dentist is Dr. Lutz.", evidence_id="s#2", now=1.5)
    (o,) = mem.observe("We see Dr. Patel for the dog now; Dr. Moreau closed the clinic.", evidence_id="s#3", now=2.0)
    assert o.action == "superseded" and o.superseded == (made.fact,)
    live = {f.subject: f for f in mem.facts(3.0)}
    assert live["My vet"].value == "Dr. Patel" and live["My vet"].statement == "My vet is Dr. Patel"
    assert live["My dentist"].value == "Dr. Lutz"


def test_an_update_naming_only_values_held_by_two_facts_is_held_for_review(mem):
    mem.observe("My vet is Dr. Moreau.", evidence_id="s#1", now=1.0)
    mem.observe("My neighbour is Dr. Moreau.", evidence_id="s#2", now=1.5)
    (o,) = mem.observe("I don't see Dr. Moreau anymore, I see Dr. Patel now.", evidence_id="s#3", now=2.0)
    assert o.action == "review"
    assert [f.value for f in mem.facts(3.0)] == ["Dr. Moreau", "Dr. Moreau"]


def test_an_update_never_overwrites_a_differently_named_subject_holding_the_old_value(mem):
    mem.observe("My credit card is Chase.", evidence_id="s#1", now=1.0)
    (o,) = mem.observe("I switched my bank from Chase to Ally.", evidence_id="s#2", now=2.0)
    assert o.action == "created"
    assert sorted((f.subject, f.value) for f in mem.facts(3.0)) == [("My credit card", "Chase"), ("my bank", "Ally")]


@pytest.mark.parametrize("first, update, statement", [
    ("The standup starts at 9.", "From next week, the standup starts at 9:15.", "The standup starts at 9:15"),
    ("The bike pump is behind the door.", "I moved the bike pump from behind the door to the garage shelf.",
     "The bike pump is the garage shelf"),
    ("Our hotel is the Marlowe.", "We changed hotels: we're staying at the Kestrel now.", "Our hotel is the Kestrel"),
    ("The boiler code is 4410.", "They reset the boiler code, 4410 won't work now; use 9203.", "The boiler code is 9203"),
    ("We get coffee at Blue Bottle.", "We stopped getting coffee at Blue Bottle; we go to Ritual now.",
     "We get coffee at Ritual"),
    ("My car is a Corolla.", "I traded the Corolla for a Model 3.", "My car is a Model 3"),
    ("The spare charger is in the top drawer.", "I put the spare charger in my backpack now.",
     "The spare charger is in my backpack"),
    ("Our dentist is Dr. Lee.", "We see Dr. Moss now that Dr. Lee retired.", "Our dentist is Dr. Moss"),
    ("The wifi is called Orion.", "The wifi is called Vega now.", "The wifi is Vega"),
    ("My pediatrician is Dr. Hale.", "We switched pediatricians to Dr. Osei.", "My pediatrician is Dr. Osei"),
    ("My son's coach is Mr. Briggs.", "My son has a new coach, Ms. Tran.", "My son's coach is Ms. Tran"),
    ("My allergist is Dr. Kole.", "Dr. Amari replaced Dr. Kole as my allergist.", "My allergist is Dr. Amari"),
    ("My manager is Lisa.", "Oh, and Lisa's not my manager anymore — it's Raj.", "My manager is Raj"),
    ("We rehearse in hall 2.", "We used to rehearse in hall 2, now we rehearse in hall 7.", "We rehearse in hall 7"),
    ("The picnic's on Saturday.", "Turns out the picnic's on Sunday, not Saturday.", "The picnic is on Sunday"),
    ("We usually rehearse at the Old Mill.", "We rehearse at Hall Nine now instead of the Old Mill.",
     "We rehearse at Hall Nine"),
    ("The password for the printer is Gull3.", "The printer password changed to Tern8.", "The password for the printer is Tern8"),
    ("I work at Umbrella.", "I work for Vandelay now.", "I work at Vandelay"),
    ("Anna's phone number is 555-0101.", "Anna's new phone number is 555-0188.", "Anna's phone number is 555-0188"),
    ("Dad's cardiologist is Dr. Lee.", "Dad's cardiologist changed to Dr. Wu.", "Dad's cardiologist is Dr. Wu"),
    ("My favorite tea is oolong.", "My favorite tea is green tea now.", "My favorite tea is green tea"),
    ("My pottery class is on Wednesdays.", "Pottery moved from Wednesday to Friday.", "My pottery class is on Friday"),
    ("My vet is Dr. Brandt.", "I switched my vet from Brandt to Dr. Sato.", "My vet is Dr. Sato"),
])
def test_new_shapes_supersede_the_fact_they_change(mem, first, update, statement):
    (made,) = mem.observe(first, evidence_id="s#1", now=1.0)
    (o,) = mem.observe(update, evidence_id="s#2", now=2.0)
    assert o.action == "superseded" and o.superseded == (made.fact,)
    assert [f.statement for f in mem.facts(3.0)] == [statement]


def test_a_later_plain_restatement_of_a_name_or_number_supersedes_with_lineage(mem):
    (made,) = mem.observe("The standup is at 9.", evidence_id="s#1", now=1.0)
    (o,) = mem.observe("The standup is at 10.", evidence_id="s#2", now=2.0)
    assert o.action == "superseded" and o.superseded == (made.fact,)
    assert [f.value for f in mem.facts(3.0)] == ["at 10"] and mem.ledger.edge(made.fact)["reason"] == "updated"


@pytest.mark.parametrize("first, second", [
    ("My dentist is Dr. Cho.", "My dentist is really nice."),  # not a value: an opinion
    ("My dentist is really nice.", "My dentist is Dr. Cho."),  # the old one is no value either
])
def test_a_plain_restatement_that_is_no_value_goes_to_review(mem, first, second):
    (made,) = mem.observe(first, evidence_id="s#1", now=1.0)
    (o,) = mem.observe(second, evidence_id="s#2", now=2.0)
    assert o.action == "review" and [f.id for f in mem.facts(3.0)] == [made.fact]


def test_a_plain_restatement_never_replaces_what_the_user_asserted(mem):
    mem.handle("remember permanently: the standup is at 9", evidence_id="c#1", now=1.0)
    (o,) = mem.observe("The standup is at 10.", evidence_id="s#2", now=2.0)
    assert o.action == "review" and [f.value for f in mem.facts(3.0)] == ["at 9"]

