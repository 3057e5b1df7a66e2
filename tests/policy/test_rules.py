"""The conflict rules as a pure function: one test per rule (grm.policy.rules docstring)."""

from __future__ import annotations

from grm.policy.fact import Evidence, Fact, Scope
from grm.policy.rules import Candidate, decide

NOW = 1_000.0


def fact(fid: str, value: str, *, scope: Scope = Scope(), intent: str = "inferred", mutable: bool = True,
         valid_from: float = 0.0, expires_at: float | None = None, predicate: str = "is",
         subject: str = "my locker code", state: str = "active") -> Fact:
    return Fact(id=fid, subject=subject, predicate=predicate, value=value, statement=f"{subject} {predicate} {value}",
                scope=scope, lifetime="permanent", mutable=mutable, pinned=False, intent=intent, confidence=0.6,
                count=1, valid_from=valid_from, expires_at=expires_at, created=0.0, graft=None, supersedes=(),
                reason="", evidence=(Evidence("t0", 0.0, "test", "created"),), state=state, node_intent=intent,
                node_confidence=0.6, node_count=1)


def cand(value: str, *, scope: Scope = Scope(), intent: str = "inferred", valid_from: float = NOW,
         expires_at: float | None = None, predicate: str = "is", subject: str = "My Locker Code") -> Candidate:
    return Candidate(subject, predicate, value, scope, intent, valid_from, expires_at)


def test_nothing_stored_creates():
    assert decide(cand("1234"), [], NOW).action == "create"


def test_duplicate_reinforces_case_folded():
    d = decide(cand("ABC"), [fact("f1", "abc")], NOW)
    assert (d.action, d.target) == ("reinforce", "f1")


def test_other_scope_does_not_conflict():
    old = fact("f1", "1234", scope=Scope(project="p"))
    assert decide(cand("5678"), [old], NOW).action == "create"
    assert decide(cand("5678", scope=Scope("p", "s")), [old], NOW).action == "create"
    assert decide(cand("5678", scope=Scope(project="p")), [old], NOW).action != "create"  # the same scope conflicts


def test_expired_fact_does_not_block_and_is_superseded():
    old = fact("f1", "1234", intent="system-asserted", expires_at=NOW - 1)
    d = decide(cand("5678"), [old], NOW)
    assert (d.action, d.supersede, d.why) == ("create", ("f1",), ("expired",))


def test_fact_expiring_exactly_now_is_expired():
    assert decide(cand("5678"), [fact("f1", "1", intent="system-asserted", expires_at=NOW)], NOW).action == "create"


def test_non_overlapping_windows_do_not_conflict():
    old = fact("f1", "1234", intent="user-asserted", expires_at=NOW + 100)
    assert decide(cand("5678", valid_from=NOW + 100), [old], NOW).action == "create"
    assert decide(cand("5678", valid_from=NOW + 99), [old], NOW).action == "review"


def test_lower_or_equal_rank_goes_to_review():
    old = fact("f1", "1234", intent="user-asserted")
    for intent in ("observed", "inferred", "imported", "user-asserted"):
        d = decide(cand("5678", intent=intent), [old], NOW)
        assert (d.action, d.target) == ("review", "f1"), intent


def test_higher_rank_supersedes():
    old = fact("f1", "1234", intent="inferred")
    d = decide(cand("5678", intent="user-asserted"), [old], NOW)
    assert (d.action, d.supersede, d.why) == ("supersede", ("f1",), ("contradicted",))
    d = decide(cand("5678", intent="system-asserted"), [fact("f2", "1", intent="user-asserted")], NOW)
    assert d.action == "supersede"


def test_forced_supersedes_regardless_of_rank_but_not_immutable():
    old = fact("f1", "1234", intent="system-asserted")
    assert decide(cand("5678", intent="inferred"), [old], NOW, forced=True).action == "supersede"
    locked = fact("f2", "1234", intent="inferred", mutable=False)
    d = decide(cand("5678", intent="system-asserted"), [locked], NOW, forced=True)
    assert (d.action, d.target) == ("review", "f2")


def test_multi_valued_predicates_never_contradict():
    old = fact("f1", "tea", predicate="like", subject="I", intent="user-asserted")
    assert decide(cand("coffee", predicate="like", subject="i"), [old], NOW).action == "create"
    assert decide(cand("Tea", predicate="like", subject="i"), [old], NOW).action == "reinforce"


def test_superseded_facts_are_ignored():
    old = fact("f1", "1234", intent="system-asserted", state="superseded")
    assert decide(cand("5678"), [old], NOW).action == "create"


def test_different_subject_or_predicate_is_unrelated():
    old = fact("f1", "1234", intent="system-asserted")
    assert decide(cand("5678", subject="my gym code"), [old], NOW).action == "create"
    assert decide(cand("5678", predicate="was"), [old], NOW).action == "create"


def test_supersede_also_retires_expired_same_key_facts():
    live = fact("f1", "1", intent="inferred")
    gone = fact("f0", "0", intent="system-asserted", expires_at=NOW - 5)
    d = decide(cand("2", intent="user-asserted"), [gone, live], NOW)
    assert d.action == "supersede" and dict(zip(d.supersede, d.why)) == {"f1": "contradicted", "f0": "expired"}
