"""The command executor: forget with confirmation, correct, pin, mark, show, why, cull,
durability; and that every destructive command with an empty (or no) match changes nothing."""

from __future__ import annotations

import pytest

from grm.policy import CommandResult, parse
from tests.policy.conftest import snapshot


@pytest.fixture
def filled(mem):
    mem.handle("remember permanently: my locker code is 1234", evidence_id="t1", now=1.0)
    mem.handle("remember permanently: my gym code is 777", evidence_id="t2", now=2.0)
    mem.handle("remember permanently: my street is Großstraße 5", evidence_id="t3", now=3.0)
    return mem


def run(mem, line, eid="tx", now=10.0) -> CommandResult:
    res = mem.handle(line, evidence_id=eid, now=now)
    assert res is not None, line
    return res


@pytest.mark.parametrize("line", [
    "forget:", "forget:  ", 'forget: ""', "forget: !!!", "forget: nothing like this", "forget: code 9999",
    "correct memory: nothing here => 1", "correct memory: => 1", "correct memory: !!! => 1",
    "pin: nothing here", "unpin: ...", "mark immutable: zzz", "mark mutable:",
    "confirm forget c-000000000000", "approve review r-000000000000", "reject review r-nope",
    "edit review r-nope: my code is 1", "set durability: fast", "cull graft g-1 into sections",
    "remember permanently:", "remember this for the project: my x is 1",
])
def test_destructive_commands_with_empty_or_no_match_change_nothing(filled, line):
    before = snapshot(filled.store)
    res = run(filled, line)
    assert not res.changed and not res.ok
    assert "\n" not in res.text or res.malformed is False
    assert snapshot(filled.store) == before


def test_malformed_answer_is_one_line_usage(filled):
    res = run(filled, "correct memory: no arrow")
    assert res.malformed and "\n" not in res.text and "usage: correct memory:" in res.text


def test_forget_one_match_tombstones_with_lineage(filled):
    res = run(filled, "forget: LOCKER code")
    assert res.ok and res.changed and len(res.facts) == 1
    fid = res.facts[0]
    assert filled.fact(fid).state == "superseded"
    edge = filled.ledger.edge(fid)
    assert edge["reason"] == "forgotten" and filled.ledger.tombstone(edge["tombstone"])["facts"] == [fid]
    assert "locker" not in run(filled, "show memory").text


def test_forget_uses_unicode_case_folding(filled):
    res = run(filled, "forget: GROSSSTRASSE")
    assert res.changed and "Großstraße" in res.text


def test_forget_many_asks_for_confirmation_then_forgets_exactly_those(filled):
    before = snapshot(filled.store)
    res = run(filled, "forget: code", now=10.0)
    assert res.ok and not res.changed and res.token and len(res.facts) == 2
    assert f"confirm forget {res.token}" in res.text
    assert [r for r in snapshot(filled.store) if r not in before and r[1] != "forget_confirm"] == []
    assert parse(f"confirm forget {res.token}") is not None
    done = run(filled, f"confirm forget {res.token}", now=20.0)
    assert done.changed and set(done.facts) == set(res.facts)
    assert {f.subject for f in filled.facts(30.0)} == {"my street"}
    again = run(filled, f"confirm forget {res.token}", now=21.0)
    assert not again.changed and not again.ok


def test_forget_confirmation_expires_and_checks_memory_unchanged(make_mem):
    mem = make_mem(confirm_ttl_s=60.0)
    mem.handle("remember permanently: my locker code is 1234", evidence_id="t1", now=1.0)
    mem.handle("remember permanently: my gym code is 777", evidence_id="t2", now=2.0)
    token = run(mem, "forget: code", now=10.0).token
    late = run(mem, f"confirm forget {token}", now=71.0)
    assert not late.changed and "expired" in late.text
    token = run(mem, "forget: code", now=100.0).token
    run(mem, "correct memory: gym code => 778", now=101.0)
    stale = run(mem, f"confirm forget {token}", now=102.0)
    assert not stale.changed and "changed" in stale.text
    assert len(mem.facts(103.0)) == 2


def test_forget_by_id_picks_one_of_many(filled):
    fid = run(filled, "forget: code").facts[0]
    res = run(filled, f"forget: {fid}")
    assert res.changed and res.facts == (fid,)


def test_forget_drops_pending_reviews_of_forgotten_facts(filled):
    rid = filled.observe("my locker code is 9", evidence_id="t9", now=5.0)[0].review
    run(filled, "forget: locker")
    assert filled.reviews.pending() == [] and filled.reviews.get(rid).status == "rejected"


def test_correct_many_matches_asks_to_choose(filled):
    before = snapshot(filled.store)
    res = run(filled, "correct memory: code => 1")
    assert not res.ok and not res.changed and len(res.facts) == 2
    assert snapshot(filled.store) == before
    res = run(filled, f"correct memory: {res.facts[0]} => 42")
    assert res.changed


def test_correct_with_a_whole_statement(filled):
    res = run(filled, "correct memory: gym code => my gym code is 778")
    assert res.changed and {f.value for f in filled.facts(20.0)} >= {"778"}
    assert run(filled, "correct memory: gym code => 778").changed is False  # already says so


def test_correct_a_note_and_a_multi_valued_claim(mem):
    run(mem, "remember: buy milk on fridays")
    run(mem, "remember: I like tea")
    assert run(mem, "correct memory: milk => buy oat milk on mondays").changed
    assert run(mem, "correct memory: tea => coffee").changed
    assert {f.statement for f in mem.facts(20.0)} == {"buy oat milk on mondays", "I like coffee"}


def test_correct_value_holding_arrow(filled):
    res = run(filled, "correct memory: street => the Pfeil => Weg 1")
    assert res.changed
    (street,) = [f for f in filled.facts(20.0) if f.subject == "my street"]
    assert street.value == "the Pfeil => Weg 1"


def test_correct_to_a_value_already_held_elsewhere_merges(filled):
    run(filled, "remember: my old code is 5")
    res = run(filled, "correct memory: locker code => my old code is 5")
    assert res.changed
    assert [f.subject for f in filled.facts(20.0)].count("my old code") == 1
    assert not any(f.subject == "my locker code" for f in filled.facts(20.0))


def test_pin_and_unpin_write_new_nodes(filled):
    res = run(filled, "pin: locker")
    assert res.changed and [f.id for f in filled.pinned(20.0)] == list(res.facts)
    assert filled.fact(res.superseded[0]).state == "superseded"
    assert not run(filled, "pin: locker").changed
    assert run(filled, "unpin: locker").changed and filled.pinned(20.0) == []
    (f,) = [f for f in filled.facts(20.0) if f.subject == "my locker code"]
    assert [n.reason for n in filled.ledger.lineage(f.id)][-2:] == ["pinned", "unpinned"]


def test_immutable_facts_refuse_correction_and_send_contradictions_to_review(filled):
    assert run(filled, "mark immutable: locker").changed
    before = snapshot(filled.store)
    res = run(filled, "correct memory: locker => 1")
    assert not res.changed and "mark mutable" in res.text and snapshot(filled.store) == before
    out = filled.handle("remember permanently: my locker code is 1", evidence_id="t5", now=11.0)
    assert out.review is not None
    out = filled.propose(filled.statement_proposals("my locker code is 2", "system-asserted")[0],
                         evidence_id="sys", now=12.0, via="test")
    assert out.action == "review"
    approve = run(filled, f"approve review {out.review}", now=13.0)
    assert not approve.changed and "stays pending" in approve.text
    assert run(filled, "mark mutable: locker").changed
    assert run(filled, "correct memory: locker => 1").changed


def test_show_and_why(filled):
    res = run(filled, "show memory about: locker")
    assert len(res.facts) == 1 and "1234" in res.text and not res.changed
    assert len(run(filled, "show memory").facts) == 3
    assert run(filled, "show memory about: something else entirely").facts == ()
    why = run(filled, "why do you remember: locker code")
    assert "t1" in why.text and "remember permanently" in why.text
    run(filled, "forget: locker", eid="t-forget", now=50.0)
    gone = run(filled, "why do you remember: locker code")
    assert not gone.ok and "forgotten" in gone.text and "t-forget" in gone.text
    assert not run(filled, "why do you remember: zebra").ok


def test_cull_graft_calls_the_runtime_callback(make_mem):
    calls = []
    mem = make_mem(culler=lambda gid: calls.append(gid) or f"culled {gid} into 3 sections")
    res = run(mem, "cull graft g-7 into sections")
    assert calls == ["g-7"] and res.ok and res.changed and "3 sections" in res.text
    res = run(make_mem(), "cull graft g-7 into sections")
    assert not res.ok and "not available" in res.text


def test_set_durability_switches_the_store(mem):
    res = run(mem, "set durability: full")
    assert res.changed and mem.store.durability == "full"
    assert not run(mem, "set durability full").changed


def test_remember_a_note_and_several_claims(mem):
    res = run(mem, "remember permanently: buy milk on fridays")
    assert res.changed and mem.facts(20.0)[0].predicate == "note"
    res = run(mem, "remember: my cat is Tom and my dog is Rex")
    assert len(res.facts) == 2
    again = run(mem, "remember permanently: buy milk on fridays", eid="ty")
    assert again.changed and mem.fact(again.facts[0]).count == 2  # reinforced by new evidence
    assert not run(mem, "remember permanently: buy milk on fridays", eid="ty").changed  # same evidence


def test_ten_kilobyte_lines_change_nothing(filled):
    before = snapshot(filled.store)
    for line in ("remember permanently: " + "x" * 10_000, "forget: " + "y " * 5_000,
                 "correct memory: " + "a" * 10_000 + " => b"):
        res = run(filled, line)
        assert res.malformed and not res.changed
    assert filled.handle("z" * 10_000, evidence_id="t", now=1.0) is None
    assert filled.observe("my " + "q" * 10_000 + " is 5", evidence_id="t", now=1.0) == []
    assert snapshot(filled.store) == before


def test_set_durability_on_a_store_without_the_ability_is_refused_not_a_crash(redis_url):
    """A Redis store's durability is the server's: the command says so (ok=False) and changes nothing."""
    from grm.policy import PolicyMemory
    from grm.store import RedisConfig, RedisStore

    with RedisStore.open(RedisConfig(redis_url, namespace="policy-durability")) as store:
        res = run(PolicyMemory(store), "set durability: full")
        assert not res.ok and not res.changed and "server" in res.text


def test_set_durability_is_refused_where_store_settings_are_the_operators(mem):
    """A memory of the server's (store_settings=False) answers the refusal; the store keeps its mode."""
    mem.configure(store_settings=False)
    before = mem.store.durability
    res = run(mem, "set durability: volatile")
    assert not res.ok and not res.changed and "operator setting" in res.text
    assert mem.store.durability == before


def test_a_correction_about_another_subject_is_refused(mem):
    """Issue 31: `correct` replaced "My favourite editor is Vim" with "My cat is called Tofu"."""
    fid = run(mem, "remember: My favourite editor is Vim").facts[0]
    before = snapshot(mem.store)
    res = run(mem, f"correct memory: {fid} => My cat is called Tofu")
    assert not res.ok and not res.changed and "is about" in res.text and "remember:" in res.text
    assert snapshot(mem.store) == before and mem.fact(fid).state == "active"
    assert run(mem, f"correct memory: {fid} => my favourite editors are Emacs and Vim").changed  # same subject
