"""PolicyMemory end to end on a store: extraction through the conflict rules, supersession with
lineage, review, scopes and time, provenance, restarts."""

from __future__ import annotations

import pytest

from grm.errors import UserInputError
from grm.policy import FactProposal
from tests.policy.conftest import snapshot


def live(mem, now=10_000.0):
    return {(f.subject.casefold(), f.value) for f in mem.facts(now)}


def held(mem) -> str:
    """A user fact (t1) and an inferred contradiction of it (t2) held for review: its id."""
    mem.handle("remember permanently: my locker code is 1234", evidence_id="t1", now=1.0)
    return mem.observe("my locker code is 9999", evidence_id="t2", now=2.0)[0].review


def test_supersession_gate_correction_and_provenance(mem):
    """1. an extracted fact, 2. a correction 1234 => 5678, 3. twenty turns later: 5678 is the
    one live fact, 1234 is superseded with a lineage edge, and `why` names both turns and the
    correction command."""
    assert mem.observe("hi! my locker code is 1234.", evidence_id="turn-1", now=100.0)[0].action == "created"
    res = mem.handle("correct memory: locker code 1234 => 5678", evidence_id="turn-2", now=110.0)
    assert res.ok and res.changed and len(res.superseded) == 1
    for i in range(20):
        assert mem.handle(f"small talk {i}", evidence_id=f"turn-{i + 3}", now=120.0 + i) is None
        mem.observe(f"small talk {i}", evidence_id=f"turn-{i + 3}", now=120.0 + i)
    facts = mem.facts(200.0)
    assert [f.value for f in facts] == ["5678"]
    old = mem.fact(res.superseded[0])
    assert old.state == "superseded" and old.value == "1234"
    assert mem.ledger.edge(old.id)["successor"] == facts[0].id
    assert mem.ledger.successor(old.id).id == facts[0].id
    why = mem.handle("why do you remember: locker code", evidence_id="turn-30", now=210.0).text
    assert "turn-1" in why and "turn-2" in why and "correct memory" in why and "1234" in why


def test_duplicates_reinforce_instead_of_forking(mem):
    mem.observe("my dog is Rex", evidence_id="t1", now=1.0)
    first = mem.facts(2.0)[0]
    out = mem.observe("My dog is rex.", evidence_id="t2", now=2.0)
    assert out[0].action == "reinforced" and out[0].fact == first.id
    f = mem.fact(first.id)
    assert f.count == 2 and f.confidence > first.confidence
    assert mem.observe("my dog is Rex", evidence_id="t2", now=3.0)[0].action == "unchanged"  # same evidence
    assert len(mem.facts(4.0)) == 1 and mem.fact(first.id).count == 2


def test_reinforcement_raises_intent_rank(mem):
    mem.observe("my dog is Rex", evidence_id="t1", now=1.0)
    mem.handle("remember permanently: my dog is Rex", evidence_id="t2", now=2.0)
    (f,) = mem.facts(3.0)
    assert f.intent == "user-asserted" and f.count == 2
    out = mem.observe("my dog is Fido", evidence_id="t3", now=4.0)  # inference no longer outranks it
    assert out[0].action == "review"


def test_inferred_contradiction_of_user_fact_is_held_for_review(mem):
    mem.handle("remember permanently: my locker code is 1234", evidence_id="t1", now=1.0)
    before = snapshot(mem.store)
    out = mem.observe("my locker code is 9999", evidence_id="t2", now=2.0)
    assert out[0].action == "review"
    assert live(mem) == {("my locker code", "1234")}
    (item,) = mem.reviews.pending()
    assert item.proposal.value == "9999" and item.conflicts == mem.facts(3.0)[0].id
    assert [r for r in snapshot(mem.store) if r not in before and r[1] != "review"] == []
    # the same claim again adds evidence to the same item, no second item
    mem.observe("my locker code is 9999", evidence_id="t3", now=3.0)
    assert [i.id for i in mem.reviews.pending()] == [item.id]
    assert [e.id for e in mem.reviews.get(item.id).evidence] == ["t2", "t3"]


def test_user_command_outranks_extraction(mem):
    mem.observe("my locker code is 1234", evidence_id="t1", now=1.0)
    res = mem.handle("remember permanently: my locker code is 5678", evidence_id="t2", now=2.0)
    assert res.changed and len(res.superseded) == 1
    assert live(mem) == {("my locker code", "5678")}
    assert mem.ledger.edge(res.superseded[0])["reason"] == "outranked"


def test_equal_rank_user_contradiction_goes_to_review(mem):
    mem.handle("remember permanently: my locker code is 1234", evidence_id="t1", now=1.0)
    res = mem.handle("remember permanently: my locker code is 5678", evidence_id="t2", now=2.0)
    assert res.review is not None and "approve review" in res.text
    assert live(mem) == {("my locker code", "1234")}


def test_approve_supersedes_with_lineage_and_keeps_proposing_turn(mem):
    rid = held(mem)
    res = mem.handle(f"approve review {rid}", evidence_id="t3", now=3.0)
    assert res.ok and res.changed
    (f,) = mem.facts(4.0)
    assert f.value == "9999" and f.intent == "user-asserted"
    assert {e.id for e in f.evidence} == {"t2", "t3"}
    assert mem.reviews.get(rid).status == "approved" and mem.reviews.pending() == []
    again = mem.handle(f"approve review {rid}", evidence_id="t4", now=5.0)
    assert not again.ok and not again.changed


def test_reject_writes_no_fact(mem):
    rid = held(mem)
    res = mem.handle(f"reject review {rid}", evidence_id="t3", now=3.0)
    assert res.ok and live(mem) == {("my locker code", "1234")}
    assert mem.reviews.get(rid).status == "rejected"


def test_edit_review_remembers_the_edited_statement(mem):
    rid = held(mem)
    res = mem.handle(f"edit review {rid}: my locker code is 4321", evidence_id="t3", now=3.0)
    assert res.changed and live(mem) == {("my locker code", "4321")}
    assert mem.reviews.get(rid).status == "edited"


def test_expired_fact_does_not_block(mem):
    p = FactProposal("my parking spot", "is", "B2", "my parking spot is B2", intent="system-asserted", expires_at=50.0)
    assert mem.propose(p, evidence_id="sys", now=1.0, via="test").action == "created"
    old = mem.facts(2.0)[0].id
    out = mem.observe("my parking spot is C7", evidence_id="t2", now=60.0)
    assert out[0].action == "created" and out[0].superseded == (old,)
    assert mem.ledger.edge(old)["reason"] == "expired"
    assert live(mem, 61.0) == {("my parking spot", "C7")}


def test_volatile_facts_expire(make_mem):
    mem = make_mem(volatile_ttl_s=100.0)
    mem.handle("remember for now: my table is 12", evidence_id="t1", now=1.0)
    assert live(mem, 50.0) == {("my table", "12")}
    assert live(mem, 101.0) == set()


def test_project_facts_are_scoped_and_narrower_wins(stores, make_mem):
    plain = make_mem()
    res = plain.handle("remember this for the project: my editor is vim", evidence_id="t0", now=1.0)
    assert not res.ok and not res.changed and "project" in res.text
    plain.handle("remember permanently: my editor is emacs", evidence_id="t1", now=1.0)
    alpha = make_mem(project="alpha")
    alpha.handle("remember this for the project: my editor is vim", evidence_id="t2", now=2.0)
    assert live(alpha, 3.0) == {("my editor", "vim")}  # shadows the tenant-wide fact here
    assert live(plain, 3.0) == {("my editor", "emacs")}
    assert live(make_mem(project="beta"), 3.0) == {("my editor", "emacs")}
    assert len(plain.ledger.active()) == 2  # no contradiction: different scopes


def test_session_facts(make_mem):
    s1 = make_mem(session="s1")
    s1.handle("remember this for the session: my mood is Calm", evidence_id="t1", now=1.0)
    assert live(s1, 2.0) == {("my mood", "Calm")}
    assert live(make_mem(session="s2"), 2.0) == set()


def test_tenants_never_meet(make_mem):
    a, b = make_mem(tenant="alice"), make_mem(tenant="bob")
    a.handle("remember permanently: my pin is 1111", evidence_id="t1", now=1.0)
    assert b.facts(2.0) == []
    res = b.handle("forget: pin", evidence_id="t2", now=2.0)
    assert not res.changed and live(a, 3.0) == {("my pin", "1111")}


def test_facts_survive_a_restart(stores, make_mem):
    mem = make_mem()
    mem.observe("my locker code is 1234", evidence_id="t1", now=1.0)
    mem.handle("correct memory: 1234 => 5678", evidence_id="t2", now=2.0)
    rid = mem.observe("my locker code is 1", evidence_id="t3", now=3.0)[0].review
    before = snapshot(stores.store)
    stores.restart()
    mem = make_mem()
    assert snapshot(stores.store) == before
    assert live(mem, 4.0) == {("my locker code", "5678")}
    assert [i.id for i in mem.reviews.pending()] == [rid]


def test_grafter_gives_new_facts_their_graft_and_attach_graft_replaces_it(make_mem):
    seen = []

    def grafter(fact):
        seen.append(fact.statement)
        return f"g-{len(seen)}"

    mem = make_mem(grafter=grafter)
    mem.handle("remember permanently: my dog is Rex", evidence_id="t1", now=1.0)
    (f,) = mem.facts(2.0)
    assert f.graft == "g-1" and seen == ["my dog is Rex"]
    mem.handle(f"pin: {f.id}", evidence_id="t2", now=3.0)
    (p,) = mem.facts(4.0)
    assert p.graft == "g-1" and len(seen) == 1  # same statement, same graft: not harvested again
    mem.attach_graft(p.id, "g-new")
    assert mem.fact(p.id).graft == "g-new"
    with pytest.raises(UserInputError):
        mem.attach_graft("f-000000000000", "g-x")


def test_bad_evidence_id_is_a_user_error(mem):
    with pytest.raises(UserInputError):
        mem.observe("my dog is Rex", evidence_id="", now=1.0)
    with pytest.raises(UserInputError):
        mem.handle("show memory", evidence_id=None, now=1.0)  # type: ignore[arg-type]


def test_commands_are_not_extracted_as_evidence(mem):
    assert mem.observe("forget: my locker code is 1234", evidence_id="t1", now=1.0) == []
    assert mem.ledger.active() == []
