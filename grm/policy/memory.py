"""PolicyMemory: the policy plane's one object. It decides what is true now and keeps why.

Lifecycle (who calls what, when; the runtime's chat loop is the usual caller):
1. `PolicyMemory(store, config, extractor=..., grafter=..., culler=...)` after the store is
   open. One instance per (store, tenant) in a process; its lock serializes its decisions.
   `grafter(fact) -> graft id | None` is called before a new fact node is written (the runtime
   harvests the statement's K/V and returns the graft id); `culler(graft id) -> str` executes
   `cull graft ID into sections`. Both are optional: without them facts have no graft and cull
   answers "not available".
2. Every user line: `handle(text, evidence_id=turn id, now=...)`. A memory command is executed
   and its `CommandResult` returned (the line is not a chat turn); None means an ordinary turn.
3. After each ordinary turn: `observe(text, evidence_id=turn id, now=...)` runs the extractor
   and puts its proposals through the conflict rules (intent inferred).
4. Before answering: `facts(now)` (live facts visible in this project/session, the narrowest
   scope winning; read from `self.index`, grm/policy/factindex.py, kept in step with the store
   by LSN) and `pinned(now)` say which fact grafts to offer; `fact(id)` reads one.
5. Folding (`self.folder`, `grm.policy.fold.Folder`): `fold_pending(turns, now=...)` after
   turns; `retired()` for the router to skip folded sources; `descend(node)` to expand a digest
   or era the router picked into its source ids.
Nothing here touches tensors or the model.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from grm.errors import UserInputError
from grm.policy.config import PolicyConfig
from grm.policy.extract import Extractor, RuleExtractor, parse_statement
from grm.policy.fact import Evidence, Fact, FactProposal, Scope, norm, words
from grm.policy.factindex import FactIndex
from grm.policy.fold import Folder
from grm.policy.grammar import Command, parse
from grm.policy.ledger import FACT, Ledger, new_key
from grm.policy.review import ReviewBuffer
from grm.policy.rules import WHICH, Candidate, decide
from grm.policy.align import aligned, kind, may_update
from grm.policy.updates import adopt
from grm.store.backend import StoreBackend


@dataclass(frozen=True)
class Outcome:
    """What happened to one proposal."""

    action: str  # created | superseded | reinforced | review | unchanged | refused
    fact: str | None = None  # the fact written or reinforced
    review: str | None = None  # the review item holding it
    superseded: tuple[str, ...] = ()
    detail: str = ""

    @property
    def changed(self) -> bool:
        return self.action in ("created", "superseded", "reinforced", "review")


@dataclass(frozen=True)
class CommandResult:
    text: str  # what to show the user (one or a few lines)
    changed: bool  # whether memory (or the store's mode) changed
    ok: bool = True  # False: nothing matched, refused, malformed or not available
    command: str = ""  # the command's head
    facts: tuple[str, ...] = ()  # facts written, matched or listed
    superseded: tuple[str, ...] = ()
    review: str | None = None
    token: str | None = None  # forget confirmation token
    malformed: bool = False

    def to_json(self) -> dict:
        return {"text": self.text, "changed": self.changed, "ok": self.ok, "command": self.command,
                "facts": list(self.facts), "superseded": list(self.superseded), "review": self.review,
                "token": self.token, "malformed": self.malformed}


class UpdateReader(Protocol):
    """Reads the update a turn makes to one of the facts held (`PolicyMemory.readers`)."""

    name: str  # evidence names the path: "extract:<name>"

    def gate(self, text: str) -> bool:
        """Whether `text` could be an update at all (the facts are listed only then)."""
        ...

    def read(self, text: str, held: list[Fact], *, claimed: bool = False,
             disputed: frozenset[str | None] = frozenset()) -> FactProposal | None: ...


class AlignedReader:
    """The rules' reader (grm/policy/align.py)."""

    name = "aligned"

    def gate(self, text: str) -> bool:
        return may_update(text)

    def read(self, text: str, held: list[Fact], *, claimed: bool = False,
             disputed: frozenset[str | None] = frozenset()) -> FactProposal | None:
        return aligned(text, held, claimed=claimed, disputed=disputed)


FIRST_PERSON = frozenset({"i", "i'm", "i've", "i'd", "i'll", "me", "my", "mine", "we", "we're", "we've", "us",
                          "our", "ours"})


def about_the_user(subject: str) -> bool:
    """Whether a claim's subject is the user or theirs ("I", "my bank", "our flat")."""
    first = norm(subject).replace("’", "'").split(" ", 1)[0]
    return first in FIRST_PERSON


def note(statement: str, intent: str) -> FactProposal:
    """A statement the rules find no claim in: remembered whole, never contradicting others."""
    return FactProposal(statement, "note", statement, statement, intent=intent)


class PolicyMemory:
    def __init__(self, store: StoreBackend, config: PolicyConfig | None = None, *, extractor: Extractor | None = None,
                 grafter: Callable[[Fact], str | None] | None = None,
                 culler: Callable[[str], object] | None = None,
                 readers: Sequence[UpdateReader] | None = None) -> None:
        """`readers`: what reads an update the extractor missed against the facts held, in order
        until one supersedes (default: the rules' aligned reader, grm/policy/align.py; the runtime
        adds or substitutes the model's, grm/policy/model_extract.py)."""
        self.store = store
        self.config = config or PolicyConfig()
        self.tenant = self.config.tenant
        self.extractor = extractor or RuleExtractor()
        self.readers: tuple[UpdateReader, ...] = tuple(readers) if readers is not None else (AlignedReader(),)
        self.grafter = grafter
        self.culler = culler
        self.ledger = Ledger(store, self.tenant)
        self.reviews = ReviewBuffer(store, self.tenant)
        self.folder = Folder(store, self.config)
        self.index = FactIndex(store, self.tenant)  # the ledger's rows, kept in step by LSN
        self.lock = threading.RLock()

    def configure(self, **changes: object) -> None:
        """Move this tenant's one policy memory to another session/project or other numbers
        (PolicyConfig fields; the tenant cannot change). A chat calls it when it starts."""
        if "tenant" in changes and changes["tenant"] != self.tenant:
            raise UserInputError("a PolicyMemory serves one tenant; open another for another tenant")
        with self.lock:
            self.config = replace(self.config, **changes)
            self.folder.config = self.config

    # ---- the chat loop -----------------------------------------------------------------------

    def handle(self, text: str, *, evidence_id: str, now: float | None = None) -> CommandResult | None:
        """Execute `text` if it is a memory command; None if it is an ordinary turn."""
        cmd = parse(text)
        return None if cmd is None else self.execute(cmd, evidence_id=evidence_id, now=now)

    def execute(self, cmd: Command, *, evidence_id: str, now: float | None = None) -> CommandResult:
        from grm.policy.commands import execute

        _check_evidence(evidence_id)
        with self.lock:
            return execute(self, cmd, evidence_id, time.time() if now is None else now)

    def observe(self, text: str, *, evidence_id: str, now: float | None = None) -> list[Outcome]:
        """Extract facts from an ordinary turn and apply them (commands are not evidence)."""
        _check_evidence(evidence_id)
        now = time.time() if now is None else now
        if parse(text) is not None:
            return []
        via = f"extract:{getattr(self.extractor, 'name', type(self.extractor).__name__)}"
        pasted = self.pasted(text)
        readers = [] if pasted else [r for r in self.readers if r.gate(text)]
        held = self.facts(now) if readers else None  # before this turn: what an update the extractor
        # missed is read against (self.readers); not listed for a turn that cannot be one
        proposals = self.extractor.propose(text, evidence_id, now)
        if pasted:  # a pasted document's claims are its author's: only what it says of the user is theirs
            proposals = [p for p in proposals if about_the_user(p.subject)]
        out = [self.propose(p, evidence_id=evidence_id, now=now, via=via) for p in proposals]
        # an old value the rules were told that memory does not hold ("from Citi" where it holds Chase): a
        # dispute over a fact with a value of its kind, for the user; not over one of another kind ("rather
        # than by the sea" for "in Brighton"), nor when the rules could not tell which fact (WHICH)
        disputed = frozenset(kind(p.replaces) for p, o in zip(proposals, out)
                             if o.action == "review" and p.replaces and not (o.detail or "").endswith(WHICH))
        if held is not None and not any(o.action == "superseded" for o in out):
            # claimed: the rules read an update naming its old value ("from Chase to Ally"); one naming none
            # ("my training sessions are with Keisha now") leaves a fact whose old value the turn names to the reader.
            # An update the rules hold for review the reader may still place by the turn's other words ("push
            # the wedding back" for "the date is ...: which date?"); the review item stays for the user
            claimed = any(p.replaces for p in proposals)
            for reader in readers:
                p = reader.read(text, held, claimed=claimed, disputed=disputed)
                if p is not None:
                    out.append(self.propose(p, evidence_id=evidence_id, now=now, via=f"extract:{reader.name}"))
                    if out[-1].action == "superseded":
                        break
        return out

    def pasted(self, text: str) -> bool:
        """Whether a turn reads as a pasted document (PolicyConfig.paste_chars), not the user talking."""
        return len(text) >= self.config.paste_chars

    # ---- proposals and the conflict rules ------------------------------------------------------

    def place(self, p: FactProposal, now: float, default_lifetime: str | None = None) -> (
            tuple[Scope, str, float, float | None] | str):
        """(scope, lifetime, valid_from, expires_at) for `p` in this context, or why it cannot be."""
        cfg = self.config
        lifetime = p.lifetime or default_lifetime or cfg.extracted_lifetime
        expires = p.expires_at
        if lifetime == "permanent":
            scope = Scope()
        elif lifetime == "project":
            if cfg.project is None:
                return "a project fact needs a current project (start with --project NAME)"
            scope = Scope(project=cfg.project)
        elif lifetime == "session":
            if cfg.session is None:
                return "a session fact needs a current session (grm chat has one; this command has none)"
            scope = Scope(cfg.project, cfg.session)
        else:  # volatile
            scope = Scope(cfg.project, cfg.session)
            if expires is None:
                expires = now + cfg.volatile_ttl_s
        valid_from = now if p.valid_from is None else p.valid_from
        if expires is not None and expires <= valid_from:
            return "the fact would expire before it starts"
        return scope, lifetime, valid_from, expires

    def propose(self, p: FactProposal, *, evidence_id: str, now: float, via: str,
                default_lifetime: str | None = None) -> Outcome:
        """Put one proposal through the conflict rules (`grm.policy.rules`) and apply the result."""
        _check_evidence(evidence_id)
        placed = self.place(p, now, default_lifetime)
        if isinstance(placed, str):
            return Outcome("refused", detail=placed)
        scope, lifetime, valid_from, expires = placed
        with self.lock:
            return self.apply(p, scope, lifetime, valid_from, expires,
                              Evidence(evidence_id, now, via, "created"), now)

    def apply(self, p: FactProposal, scope: Scope, lifetime: str, valid_from: float, expires: float | None,
              ev: Evidence, now: float, *, forced: bool = False, prior: Sequence[Evidence] = (),
              also_supersede: Sequence[tuple[str, str]] = (), exclude: Sequence[str] = ()) -> Outcome:
        """Decide and write. `forced`: a correction or an approval (supersedes regardless of
        rank). `prior`: evidence the new node inherits (a review's proposing turn).
        `also_supersede`: nodes the caller replaces besides the contradicted ones."""
        cand = Candidate(p.subject, p.predicate, p.value, scope, p.intent, valid_from, expires, p.replaces)
        facts = [f for f in self.ledger.active() if f.id not in exclude]
        d = decide(cand, facts, now, forced=forced)
        if d.action == "review":
            if forced:
                return Outcome("refused", detail=d.reason)
            rid, wrote = self.reviews.add(p, scope, d.target, d.reason, replace(ev, action="held for review"))
            return Outcome("review" if wrote else "unchanged", review=rid, detail=d.reason)
        if d.action == "reinforce":
            if also_supersede:  # a correction to a value memory already holds: lead the old there
                self.ledger.retire(also_supersede, d.target, replace(ev, action="corrected"))
            wrote = self.ledger.reinforce(d.target, p.intent, p.confidence, replace(ev, action="reinforced"))
            sup = tuple(i for i, _ in also_supersede)
            return Outcome("reinforced" if wrote or sup else "unchanged", fact=d.target, superseded=sup,
                           detail=d.reason)
        if p.replaces is not None and len(d.supersede) == 1 and (was := self.ledger.get(d.supersede[0])):
            p = adopt(p, was.subject, was.predicate, was.statement, was.value)  # reads as the fact it changes did
        label = "corrected" if forced else "outranked"
        pairs = list(also_supersede) + [(i, label if why == "contradicted" else why)
                                        for i, why in zip(d.supersede, d.why)]
        fact = self.new_fact(p, scope, lifetime, valid_from, expires, (*prior, ev),
                             supersedes=tuple(i for i, _ in pairs), reason=d.reason)
        self.ledger.write(fact, pairs, ev)
        return Outcome("superseded" if d.action == "supersede" or also_supersede else "created", fact=fact.id,
                       superseded=tuple(i for i, _ in pairs), detail=d.reason)

    def new_fact(self, p: FactProposal, scope: Scope, lifetime: str, valid_from: float, expires: float | None,
                 evidence: Sequence[Evidence], *, supersedes: tuple[str, ...] = (), reason: str = "new fact",
                 graft: str | None = None, count: int = 1) -> Fact:
        """A fact node not yet written (the grafter, if any, gives it its graft)."""
        ev = evidence[-1]
        fid = new_key(self.store, self.tenant, FACT, "f", p.subject, p.predicate, p.value, scope.label(), ev.id, ev.at)
        fact = Fact(id=fid, subject=p.subject, predicate=p.predicate, value=p.value, statement=p.statement,
                    scope=scope, lifetime=lifetime, mutable=p.mutable, pinned=p.pinned, intent=p.intent,
                    confidence=p.confidence, count=count, valid_from=valid_from, expires_at=expires,
                    created=ev.at, graft=graft, supersedes=supersedes, reason=reason, evidence=tuple(evidence),
                    state="active", node_intent=p.intent, node_confidence=p.confidence, node_count=count)
        if graft is None and self.grafter is not None:
            fact = fact.with_(graft=self.grafter(fact))
        return fact

    def revise(self, old: Fact, ev: Evidence, reason: str, **changes: bool) -> Fact:
        """A new node with `old`'s content and effective weight and `changes` (pinned, mutable),
        superseding it: how pin and mark change a fact without editing it."""
        p = FactProposal(old.subject, old.predicate, old.value, old.statement, intent=old.intent,
                         confidence=old.confidence, mutable=changes.get("mutable", old.mutable),
                         pinned=changes.get("pinned", old.pinned))
        fact = self.new_fact(p, old.scope, old.lifetime, old.valid_from, old.expires_at, (ev,),
                             supersedes=(old.id,), reason=reason, graft=old.graft, count=old.count)
        return self.ledger.write(fact, [(old.id, reason)], ev)

    # ---- reads -------------------------------------------------------------------------------

    def facts(self, now: float | None = None) -> list[Fact]:
        """Live facts visible in this context; of single-valued claims only the narrowest scope's
        (a project's "my editor is vim" shadows the tenant's "my editor is emacs" there)."""
        now = time.time() if now is None else now
        return self.index.facts(now, self.config.scope)  # grm/policy/factindex.py: no pass over the ledger

    def pinned(self, now: float | None = None) -> list[Fact]:
        return [f for f in self.facts(now) if f.pinned]

    def fact(self, fact_id: str) -> Fact | None:
        return self.ledger.get(fact_id)

    def attach_graft(self, fact_id: str, graft_id: str) -> None:
        """Attach (or re-attach) the fact's K/V graft after the node was written."""
        self.ledger.attach_graft(fact_id, graft_id)

    def match(self, query: str, facts: Sequence[Fact]) -> list[Fact]:
        """Facts `query` names: by id; else those whose statement is exactly it; else those
        holding all its words (case-folded). No words, no match: never everything."""
        q = query.strip()
        by_id = [f for f in facts if f.id == q.casefold()]
        if by_id:
            return by_id
        exact = [f for f in facts if norm(f.statement) == norm(q)]
        if exact:
            return exact
        want = set(words(q))
        if not want:
            return []
        return [f for f in facts if want <= set(words(f"{f.statement} {f.subject} {f.value}"))]

    def targets(self, query: str, now: float) -> list[Fact]:
        """Active facts visible here that `query` names (for commands that change memory; not
        yet valid or expired ones included, so they can be forgotten too)."""
        ctx = self.config.scope
        return self.match(query, [f for f in self.ledger.active() if f.scope.visible_in(ctx)])

    def statement_proposals(self, statement: str, intent: str) -> list[FactProposal]:
        return parse_statement(statement, intent) or [note(statement, intent)]


def _check_evidence(evidence_id: object) -> None:
    if not isinstance(evidence_id, str) or not evidence_id or len(evidence_id) > 256:
        raise UserInputError(f"evidence id must be a non-empty string of at most 256 characters, got {evidence_id!r}")
