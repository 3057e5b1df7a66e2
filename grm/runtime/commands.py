"""Memory commands as the faces give them, with no model: a line of the chat grammar (`grm memory`,
a chat message, the messages of POST /v1/memories) or an operation on one fact or review item by
its id (the memory REST). Every one is run by the policy plane's `PolicyMemory.execute`
(grm/policy/commands.py), so each face follows the same conflict rules and never edits a node in
place. Imports nothing heavy (no torch): `grm memory` loads no model.
"""

from __future__ import annotations

from dataclasses import dataclass

from grm.errors import UserInputError
from grm.policy.commands import OPERATOR_SETTING
from grm.policy.config import PolicyConfig
from grm.policy.fact import LIFETIMES, Fact, words
from grm.policy.grammar import Correct, Forget, Malformed, Remember, ReviewDecision, SetDurability, Show, Why, parse
from grm.policy.memory import CommandResult, PolicyMemory
from grm.store.backend import StoreBackend

__all__ = ["LIFETIMES", "LISTINGS", "OPERATOR_SETTING", "Line", "correct", "decide_review", "forget",
           "is_command", "is_command_only", "listing", "memory_config", "parse_line", "policy_memory",
           "remember", "search", "sets_durability"]

LISTINGS = ("list", "reviews", "folds")  # `grm memory list|reviews|folds`: what `listing` shows


# ----- lines of the grammar ------------------------------------------------------------------------
def is_command(line: str) -> bool:
    """Whether `line` is a memory command (well-formed or not)."""
    return parse(line.strip()) is not None


def is_command_only(text: str) -> bool:
    """True when every non-blank line of `text` is a memory command (nothing to answer)."""
    lines = [l for l in text.splitlines() if l.strip()]
    return bool(lines) and all(is_command(l) for l in lines)


def sets_durability(text: str) -> bool:
    """Whether a line of `text` is `set durability: MODE` (the operator's setting on a server)."""
    return any(isinstance(parse(line.strip()), SetDurability) for line in text.splitlines())


@dataclass(frozen=True)
class Line:
    """One command line, parsed."""

    command: object  # the grammar's command (grm/policy/grammar.py)
    reading: bool  # it only reads (show memory, why): the store opens as a reader, nothing is created
    durability: str | None  # the mode a `set durability:` line asks for (it lasts only while the store is open)


def parse_line(text: str) -> Line:
    """`text` as one memory command; UserInputError if it is none, or a malformed one (its usage)."""
    cmd = parse(text)
    if cmd is None:
        raise UserInputError(f"not a memory command: {text[:60]!r}; try `grm memory --help`")
    if isinstance(cmd, Malformed):
        raise UserInputError(f"{cmd.reason}; {cmd.usage}")
    return Line(cmd, isinstance(cmd, (Show, Why)), cmd.mode if isinstance(cmd, SetDurability) else None)


def memory_config(tenant: str, project: str | None = None, session: str | None = None) -> PolicyConfig:
    """The policy plane's settings for `tenant` in a project and a session (the names validated:
    build it before opening a store, so a bad name creates nothing)."""
    return PolicyConfig(tenant=tenant, project=project, session=session)


def policy_memory(store: StoreBackend, config: PolicyConfig) -> PolicyMemory:
    """The tenant's memory semantics over `store`, without a model (no fact grafts are made)."""
    return PolicyMemory(store, config)


def listing(mem: PolicyMemory, what: str, now: float) -> dict:
    """`what` (one of LISTINGS) as JSON: {"facts": [...]} active facts, {"reviews": [...]} pending
    review items, or {"nodes": [...], "aborts": [...]} the folder's digests, eras and aborts."""
    if what == "list":
        return {"facts": [{"id": f.id, "statement": f.statement, "subject": f.subject, "predicate": f.predicate,
                           "value": f.value, "scope": f.scope.label(), "lifetime": f.lifetime, "intent": f.intent,
                           "confidence": f.confidence, "count": f.count, "pinned": f.pinned, "mutable": f.mutable,
                           "expires_at": f.expires_at, "graft": f.graft} for f in mem.facts(now)]}
    if what == "reviews":
        return {"reviews": [{"id": i.id, "statement": i.proposal.statement, "intent": i.proposal.intent,
                             "conflicts": i.conflicts, "reason": i.reason,
                             "evidence": [e.id for e in i.evidence]} for i in mem.reviews.pending()]}
    folder = mem.folder
    return {"nodes": [{"id": n.id, "type": n.type, "children": list(n.children), "sources": len(n.sources),
                       "coverage": n.coverage, "retired": n.retired} for n in folder.nodes()],
            "aborts": [{"id": a["id"], "coverage": a["coverage"], "sources": a["sources"]} for a in folder.aborts()]}


# ----- operations by id (the memory REST) ------------------------------------------------------------
def remember(mem: PolicyMemory, statement: str, lifetime: str | None, evidence_id: str) -> CommandResult:
    """`remember` `statement` (lifetime one of LIFETIMES, or None: the grammar's default)."""
    return mem.execute(Remember(statement, lifetime), evidence_id=evidence_id)


def forget(mem: PolicyMemory, fact_id: str, evidence_id: str) -> CommandResult:
    """Forget one fact by id (a tombstone; lineage kept)."""
    return mem.execute(Forget(fact_id), evidence_id=evidence_id)


def correct(mem: PolicyMemory, fact_id: str, text: str, evidence_id: str) -> CommandResult:
    """A new node superseding fact `fact_id` (`text`: the corrected statement, or just the new value)."""
    return mem.execute(Correct(fact_id, text), evidence_id=evidence_id)


def decide_review(mem: PolicyMemory, action: str, review_id: str, evidence_id: str) -> CommandResult:
    """approve | reject a pending review item."""
    return mem.execute(ReviewDecision(action, review_id), evidence_id=evidence_id)


def search(mem: PolicyMemory, query: str, facts: list[Fact]) -> list[Fact]:
    """The facts holding all of `query`'s words (the policy plane's match); where none does, those
    sharing any of its words, most shared first."""
    found = mem.match(query, facts)
    if found:
        return found
    want = set(words(query))
    shared = [(len(want & set(words(f"{f.statement} {f.subject} {f.value}"))), f) for f in facts]
    return [f for n, f in sorted(shared, key=lambda t: -t[0]) if n > 0]
