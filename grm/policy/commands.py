"""The executor of parsed memory commands (`grm.policy.grammar`). Every path either changes
memory through the ledger, the review buffer or the store's mode, or changes nothing and says
why. Destructive commands act only on a non-empty match; a match of several facts changes
nothing (forget answers with a confirmation token, the others ask for an id).

Forget confirmations are rows of kind "forget_confirm" (key c-<hex>, meta {facts, query,
created, expires_at}), so `grm memory "forget: X"` and a later `grm memory "confirm forget c-…"`
work across processes; a token is used once, expires after `confirm_ttl_s`, and is refused if
any of its facts changed since.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from grm.errors import GrmError
from grm.policy.fact import Evidence, Fact, FactProposal, norm, rank, stems, words
from grm.policy.grammar import (
    Command,
    ConfirmForget,
    Correct,
    CullGraft,
    Forget,
    Malformed,
    Pin,
    Remember,
    ReviewDecision,
    SetDurability,
    SetMutability,
    Show,
    Why,
)
from grm.policy.ledger import new_key
from grm.store.backend import DurabilityControl
from grm.store.config import DURABILITY_PROMISES
from grm.store.kinds import FORGET_CONFIRM

if TYPE_CHECKING:
    from grm.policy.memory import CommandResult, Outcome, PolicyMemory

CONFIRM = FORGET_CONFIRM
_REMEMBER_VIA = {None: "remember", "permanent": "remember permanently", "project": "remember this for the project",
                 "session": "remember this for the session", "volatile": "remember for now"}


def when(at: float) -> str:
    return datetime.fromtimestamp(at, timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")


def _result(head: str, text: str, changed: bool, ok: bool = True, **kw: object) -> CommandResult:
    from grm.policy.memory import CommandResult

    return CommandResult(text=text, changed=changed, ok=ok, command=head, **kw)


def _listing(mem: PolicyMemory, facts: Sequence[Fact]) -> str:
    n = mem.config.max_listed
    lines = [f"  {f.line()}" for f in facts[:n]]
    if len(facts) > n:
        lines.append(f"  ... and {len(facts) - n} more")
    return "\n".join(lines)


def _one(mem: PolicyMemory, head: str, query: str, now: float) -> Fact | CommandResult:
    """The single active fact `query` names, or the answer that says there is none or several."""
    found = mem.targets(query, now)
    if not found:
        return _result(head, f"no active fact matches {query!r}; nothing changed", False, ok=False)
    if len(found) > 1:
        return _result(head, f"{len(found)} facts match {query!r}; nothing changed. Name one by its id:\n"
                       + _listing(mem, found), False, ok=False, facts=tuple(f.id for f in found))
    return found[0]


def _describe(mem: PolicyMemory, o: Outcome, statement: str) -> str:
    if o.action == "review":
        item = mem.reviews.get(o.review)
        old = mem.fact(item.conflicts)
        was = f" ({old.statement!r})" if old is not None else ""
        return (f"held for review {o.review}: {statement!r} contradicts {item.conflicts}{was}. "
                f"Say `approve review {o.review}` to replace it, `reject review {o.review}` to drop it")
    if o.action == "unchanged" and o.review:
        return f"already held for review {o.review}: {statement!r}"
    if o.action == "refused":
        return f"not remembered: {o.detail}"
    if o.action in ("reinforced", "unchanged"):
        f = mem.fact(o.fact)
        return f"already remembered {o.fact}: {f.statement!r} (x{f.count}, conf {f.confidence:.2f})"
    sup = f"; replaces {', '.join(o.superseded)}" if o.superseded else ""
    return f"remembered {o.fact}: {statement!r} ({mem.fact(o.fact).lifetime}){sup}"


def _remember(mem: PolicyMemory, cmd: Remember, eid: str, now: float) -> CommandResult:
    head = _REMEMBER_VIA[cmd.lifetime]
    lifetime = cmd.lifetime or mem.config.command_lifetime
    outs = [(p, mem.propose(p, evidence_id=eid, now=now, via=head, default_lifetime=lifetime))
            for p in mem.statement_proposals(cmd.statement, "user-asserted")]
    return _result(head, "\n".join(_describe(mem, o, p.statement) for p, o in outs),
                   any(o.changed for _, o in outs), ok=all(o.action != "refused" for _, o in outs),
                   facts=tuple(o.fact for _, o in outs if o.fact),
                   superseded=tuple(i for _, o in outs for i in o.superseded),
                   review=next((o.review for _, o in outs if o.review), None))


def _forget_now(mem: PolicyMemory, head: str, facts: Sequence[Fact], query: str, ev: Evidence) -> CommandResult:
    tomb = mem.ledger.forget([f.id for f in facts], query, ev)
    gone = {f.id for f in facts}
    for item in mem.reviews.pending():  # a held contradiction of a forgotten fact is moot
        if item.conflicts in gone:
            mem.reviews.decide(item.id, "rejected", replace(ev, action="dropped with forgotten fact"), None)
    return _result(head, f"forgot {len(facts)} fact{'s' if len(facts) > 1 else ''} (tombstone {tomb}):\n"
                   + _listing(mem, [f.with_(state="superseded") for f in facts]), True,
                   facts=tuple(gone), superseded=tuple(f.id for f in facts))


def _forget(mem: PolicyMemory, cmd: Forget, ev: Evidence, now: float) -> CommandResult:
    found = mem.targets(cmd.query, now)
    if not found:
        return _result("forget", f"nothing matches {cmd.query!r}; nothing forgotten", False, ok=False)
    if len(found) == 1:
        return _forget_now(mem, "forget", found, cmd.query, ev)
    ids = sorted(f.id for f in found)
    token = new_key(mem.store, mem.tenant, CONFIRM, "c", cmd.query, *ids)
    mem.store.put(mem.tenant, CONFIRM, token, meta={"facts": ids, "query": cmd.query, "created": now,
                                                    "expires_at": now + mem.config.confirm_ttl_s})
    return _result("forget", f"{len(found)} facts match {cmd.query!r}; nothing forgotten yet. To forget all "
                   f"of them say `confirm forget {token}`, or forget one by its id:\n" + _listing(mem, found),
                   False, facts=tuple(ids), token=token)


def _confirm(mem: PolicyMemory, cmd: ConfirmForget, ev: Evidence, now: float) -> CommandResult:
    head = "confirm forget"
    rec = mem.store.get(mem.tenant, CONFIRM, cmd.token)
    if rec is None or rec.state != "active":
        return _result(head, f"no pending forget {cmd.token!r}; nothing forgotten", False, ok=False)
    if now >= rec.meta["expires_at"]:
        return _result(head, f"forget {cmd.token} expired; say `forget:` again", False, ok=False)
    facts = [mem.fact(i) for i in rec.meta["facts"]]
    if any(f is None or f.state != "active" for f in facts):
        return _result(head, f"memory changed since {cmd.token} was given; say `forget:` again", False, ok=False)
    mem.store.set_state(mem.tenant, CONFIRM, cmd.token, "superseded")
    return _forget_now(mem, head, facts, rec.meta["query"], ev)


def _correct(mem: PolicyMemory, cmd: Correct, ev: Evidence, now: float) -> CommandResult:
    head = "correct memory"
    old = _one(mem, head, cmd.target, now)
    if not isinstance(old, Fact):
        return old
    if not old.mutable:
        return _result(head, f"{old.id} is immutable; say `mark mutable: {old.id}` first", False, ok=False)
    props = mem.statement_proposals(cmd.replacement, "user-asserted")
    if props[0].predicate != "note" or norm(old.predicate) == "note":
        p = props[0]  # a whole claim (or a note replacing a note)
    else:  # just the new value: the old claim with it
        subject = "I" if norm(old.subject) == "i" else old.subject
        p = FactProposal(old.subject, old.predicate, cmd.replacement,
                         f"{subject} {old.predicate} {cmd.replacement}", intent="user-asserted")
    if p.key == old.key and norm(p.value) == old.value_key:
        return _result(head, f"{old.id} already says {old.statement!r}; nothing changed", False, facts=(old.id,))
    if not _same_subject(old, p):  # "my cat is called Tofu" is no correction of "my favourite editor is Vim"
        return _result(head, f"not corrected: {p.statement!r} is about {p.subject!r}, not {old.subject!r} as "
                       f"{old.id} is; say `remember: {p.statement}` for a new fact, or give only the new value",
                       False, ok=False, facts=(old.id,))
    p = replace(p, pinned=old.pinned)
    o = mem.apply(p, old.scope, old.lifetime, now, old.expires_at, replace(ev, action="corrected"), now,
                  forced=True, also_supersede=[(old.id, "corrected")], exclude=[old.id])
    if o.action == "refused":
        return _result(head, f"not corrected: {o.detail}", False, ok=False)
    new = mem.fact(o.fact)
    return _result(head, f"corrected {old.id} ({old.statement!r}) -> {new.id} ({new.statement!r})", True,
                   facts=(new.id,), superseded=o.superseded)


def _same_subject(old: Fact, new: FactProposal) -> bool:
    """Whether a whole claim may correct `old`: a note has no subject to keep; else the subjects
    are the same phrase or share a content word (plural-folded, as the conflict rules compare them)."""
    if norm(old.predicate) == "note" or norm(new.predicate) == "note":
        return True
    return norm(old.subject) == norm(new.subject) or bool(stems(old.subject) & stems(new.subject))


def _revise(mem: PolicyMemory, head: str, query: str, ev: Evidence, now: float, **change: bool) -> CommandResult:
    old = _one(mem, head, query, now)
    if not isinstance(old, Fact):
        return old
    (field, value), = change.items()
    word = {("pinned", True): "pinned", ("pinned", False): "unpinned",
            ("mutable", True): "marked mutable", ("mutable", False): "marked immutable"}[(field, value)]
    if getattr(old, field) == value:
        return _result(head, f"{old.id} is already {word.split()[-1]}; nothing changed", False, facts=(old.id,))
    new = mem.revise(old, replace(ev, action=word), word, **change)
    return _result(head, f"{word} {new.id}: {new.statement!r} (replaces {old.id})", True,
                   facts=(new.id,), superseded=(old.id,))


def _review(mem: PolicyMemory, cmd: ReviewDecision, ev: Evidence, now: float) -> CommandResult:
    head = f"{cmd.action} review"
    item = mem.reviews.get(cmd.review_id)
    if item is None:
        return _result(head, f"no review {cmd.review_id}; nothing changed", False, ok=False)
    if item.status != "pending":
        return _result(head, f"review {item.id} is already {item.status}; nothing changed", False, ok=False)
    if cmd.action == "reject":
        mem.reviews.decide(item.id, "rejected", replace(ev, action="rejected"), None)
        return _result(head, f"rejected {item.id}: {item.proposal.statement!r} was not remembered", True,
                       review=item.id)
    p = item.proposal
    if cmd.action == "edit":
        props = mem.statement_proposals(cmd.statement, "user-asserted")
        p = replace(props[0], lifetime=p.lifetime)
    else:  # the user endorses the claim: it now ranks as their word
        p = replace(p, intent=max(p.intent, "user-asserted", key=rank))
    lifetime = p.lifetime or mem.config.extracted_lifetime
    expires = p.expires_at
    if expires is None and lifetime == "volatile":
        expires = now + mem.config.volatile_ttl_s
    if expires is not None and expires <= now:
        return _result(head, f"{item.id} proposed a fact that has expired; reject it", False, ok=False, review=item.id)
    valid_from = now if p.valid_from is None else p.valid_from
    o = mem.apply(p, item.scope, lifetime, valid_from, expires,
                  replace(ev, action="approved" if cmd.action == "approve" else "edited"), now,
                  forced=True, prior=item.evidence)
    if o.action == "refused":
        return _result(head, f"{item.id} stays pending: {o.detail}", False, ok=False, review=item.id)
    status = "approved" if cmd.action == "approve" else "edited"
    mem.reviews.decide(item.id, status, replace(ev, action=status), o.fact)
    sup = f"; replaces {', '.join(o.superseded)}" if o.superseded else ""
    return _result(head, f"{status} {item.id}: remembered {o.fact}: {mem.fact(o.fact).statement!r}{sup}", True,
                   facts=(o.fact,), superseded=o.superseded, review=item.id)


def _show(mem: PolicyMemory, cmd: Show, now: float) -> CommandResult:
    facts = mem.facts(now)
    if cmd.query is not None:
        found = mem.match(cmd.query, facts)
        if not found:  # read-only: fall back to any shared word, most shared first
            want = set(words(cmd.query))
            scored = [(len(want & set(words(f.statement))), f) for f in facts]
            found = [f for n, f in sorted(scored, key=lambda t: -t[0]) if n > 0]
        facts = found
    pending = mem.reviews.pending()
    text = (_listing(mem, facts) if facts else "  (no facts)")
    about = f" about {cmd.query!r}" if cmd.query else ""
    tail = f"\n{len(pending)} pending review(s): " + ", ".join(i.id for i in pending) if pending else ""
    return _result("show memory", f"memory{about}: {len(facts)} fact(s)\n{text}{tail}", False,
                   facts=tuple(f.id for f in facts))


def provenance(mem: PolicyMemory, fact: Fact) -> list[str]:
    """One line per piece of evidence along the fact's lineage, oldest first."""
    lines = []
    for node in mem.ledger.lineage(fact.id):
        for e in sorted(node.evidence, key=lambda e: e.at):
            lines.append(f"  {when(e.at)} {e.id} via {e.via}: {e.action} {node.statement!r} ({node.id})")
    return lines


def _why(mem: PolicyMemory, cmd: Why, now: float) -> CommandResult:
    found = mem.match(cmd.query, mem.facts(now))
    if found:
        out = []
        for f in found[: mem.config.max_listed]:
            out.append(f"{f.line()}\n" + "\n".join(provenance(mem, f)))
        return _result("why do you remember", "\n".join(out), False, facts=tuple(f.id for f in found))
    gone = [f for f in mem.match(cmd.query, list(mem.ledger.nodes())) if f.state != "active"]
    lines = []
    for f in gone[: mem.config.max_listed]:
        edge = mem.ledger.edge(f.id) or {}
        e = edge.get("evidence") or {}
        after = mem.ledger.successor(f.id)
        now_says = f"; now {after.id}: {after.statement!r}" if after is not None else ""
        lines.append(f"  {f.id} {f.statement!r}: {edge.get('reason', 'superseded')} at {when(edge.get('at', 0.0))} "
                     f"by {e.get('id', '?')} via {e.get('via', '?')}{now_says}")
    if lines:
        return _result("why do you remember", f"no active fact matches {cmd.query!r}; earlier:\n" + "\n".join(lines),
                       False, ok=False, facts=tuple(f.id for f in gone))
    return _result("why do you remember", f"I remember nothing about {cmd.query!r}", False, ok=False)


def _cull(mem: PolicyMemory, cmd: CullGraft) -> CommandResult:
    from grm.policy.memory import CommandResult

    if mem.culler is None:
        return _result("cull graft", "cull graft is not available here: it needs the model runtime (grm chat)",
                       False, ok=False)
    try:
        out = mem.culler(cmd.graft_id)
    except GrmError as e:
        return _result("cull graft", f"cull graft {cmd.graft_id} failed: {e}", False, ok=False)
    if isinstance(out, CommandResult):
        return out
    return _result("cull graft", str(out), True)


OPERATOR_SETTING = ("set durability is an operator setting: the store's mode is chosen when the server "
                    "starts (grm serve --durability MODE) and no request can change it; nothing changed")


def _durability(mem: PolicyMemory, cmd: SetDurability) -> CommandResult:
    if not mem.config.store_settings:  # one tenant must not change the promise every tenant's writes get
        return _result("set durability", OPERATOR_SETTING, False, ok=False)
    if not isinstance(mem.store, DurabilityControl):
        return _result("set durability", f"this store's durability is not set here ({type(mem.store).__name__}: "
                       "the server's own persistence settings decide it)", False, ok=False)
    before = mem.store.durability
    mem.store.set_durability(cmd.mode)
    return _result("set durability", f"durability {cmd.mode}: {DURABILITY_PROMISES[cmd.mode]}", cmd.mode != before)


def execute(mem: PolicyMemory, cmd: Command, eid: str, now: float) -> CommandResult:
    """Run `cmd` for `mem` (called by `PolicyMemory.execute`, under its lock)."""
    ev = Evidence(eid, now, cmd.head, "")
    if isinstance(cmd, Malformed):
        return _result("malformed", f"{cmd.reason}; {cmd.usage}", False, ok=False, malformed=True)
    if isinstance(cmd, Remember):
        return _remember(mem, cmd, eid, now)
    if isinstance(cmd, Forget):
        return _forget(mem, cmd, replace(ev, action="forgotten"), now)
    if isinstance(cmd, ConfirmForget):
        return _confirm(mem, cmd, replace(ev, action="forgotten"), now)
    if isinstance(cmd, Correct):
        return _correct(mem, cmd, ev, now)
    if isinstance(cmd, Pin):
        return _revise(mem, "pin" if cmd.pinned else "unpin", cmd.query, replace(ev, via="pin" if cmd.pinned else "unpin"),
                       now, pinned=cmd.pinned)
    if isinstance(cmd, SetMutability):
        via = "mark mutable" if cmd.mutable else "mark immutable"
        return _revise(mem, via, cmd.query, replace(ev, via=via), now, mutable=cmd.mutable)
    if isinstance(cmd, ReviewDecision):
        return _review(mem, cmd, replace(ev, via=f"{cmd.action} review"), now)
    if isinstance(cmd, Show):
        return _show(mem, cmd, now)
    if isinstance(cmd, Why):
        return _why(mem, cmd, now)
    if isinstance(cmd, CullGraft):
        return _cull(mem, cmd)
    if isinstance(cmd, SetDurability):
        return _durability(mem, cmd)
    raise TypeError(f"not a memory command: {cmd!r}")
