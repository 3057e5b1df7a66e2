"""Stale values (grm/policy/stale.py): after a correction, a turn holding the old value of the
claim (and none of the live ones) is stale; the update turn holding both is not; a value a live
fact holds again is not stale; multi-valued claims never are."""

from __future__ import annotations

from grm.policy.stale import stale_text, stale_values


def test_a_turn_holding_the_corrected_value_is_stale(mem):
    mem.observe("My locker code is 1234.", evidence_id="s#1", now=1.0)
    assert mem.handle("correct memory: locker code 1234 => 5678", evidence_id="s#3", now=2.0).changed
    stale = stale_values(mem.ledger.nodes(), mem.facts(3.0), 3.0)
    assert [(s.value, s.live) for s in stale] == [("1234", ("5678",))]
    assert stale_text("User: What is my locker code?\nAssistant: Your locker code is 1234.", stale)
    assert not stale_text("User: What is my locker code?\nAssistant: It is 5678.", stale)
    assert not stale_text("User: My locker code changed from 1234 to 5678.", stale)  # the update itself
    assert not stale_text("User: The bus 1234 was late.", stale)  # another subject
    assert not stale_text("User: my locker code is 12345", stale)  # not the value, a longer number


def test_a_value_held_again_and_multi_valued_claims_are_not_stale(mem):
    mem.observe("My dog is Rex.", evidence_id="s#1", now=1.0)
    mem.handle("correct memory: my dog => my dog is Max", evidence_id="s#2", now=2.0)
    mem.handle("correct memory: my dog => my dog is Rex", evidence_id="s#3", now=3.0)
    mem.observe("I like tea", evidence_id="s#4", now=4.0)
    mem.handle("forget: tea", evidence_id="s#5", now=5.0)
    stale = stale_values(mem.ledger.nodes(), mem.facts(6.0), 6.0)
    assert [s.value for s in stale] == ["max"]


def test_an_expired_fact_s_value_is_stale_and_reading_it_does_not_fail(mem):
    """An active fact past its expiry is no longer live: its value is stale (the dict of live
    values once shadowed `now`, and comparing the expiry with it raised TypeError)."""
    mem.configure(session="s", extracted_lifetime="volatile")
    mem.observe("My locker code is 1234.", evidence_id="s#1", now=1.0)
    [fact] = mem.facts(2.0)
    assert fact.expires_at is not None
    later = fact.expires_at + 1.0
    stale = stale_values(mem.ledger.nodes(), mem.facts(later), later)
    assert [(s.value, s.live) for s in stale] == [("1234", ())]
