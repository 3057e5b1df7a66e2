"""Facts: the memory records of the policy plane, and the words they are made of.

A fact is one claim (subject, predicate, value) that holds in a scope (the tenant, optionally
narrowed to a project or a session) for a while (`valid_from` .. `expires_at`). Turns and
documents are evidence; a fact points to its evidence by id (strings the caller gives: turn ids,
graft ids, "cli-..."). A fact node is never edited: a correction, a pin or a change of mutability
writes a new node and marks the old one superseded with a lineage edge (`grm.policy.ledger`).

Store layout (kind "fact", key = the fact id `f-<hex>`, text = the statement, parent = the node
it supersedes or None), meta (canonical JSON, version 1):

    v, subject, predicate, value, statement, project, session, lifetime, mutable, pinned,
    intent, confidence, count, valid_from, expires_at, created, graft, supersedes [ids],
    reason, evidence [{id, at, via, action}]
"""

from __future__ import annotations

import math
import re
import unicodedata
from dataclasses import dataclass, replace

from grm.english.dates import TIME
from grm.english.words import STOP_WORDS, stem
from grm.errors import UserInputError

# Write intent, lowest rank first. Automatic extraction (observed, inferred) ranks below anything
# a person or an operator said on purpose; an import from a document a user chose to load ranks
# above chat inference but below the user's own word; the deployment (system) ranks highest.
INTENTS = ("observed", "inferred", "imported", "user-asserted", "system-asserted")
LIFETIMES = ("volatile", "session", "project", "permanent")
# Predicates that hold many values at once: a new value is another fact, never a contradiction.
MULTI_VALUED = frozenset({"note", "like", "likes", "love", "loves"})
DEFAULT_CONFIDENCE = {"observed": 0.4, "inferred": 0.6, "imported": 0.7, "user-asserted": 0.95,
                      "system-asserted": 1.0}
MAX_FIELD_CHARS = 2000  # subject, predicate, value and statement are each at most this long

_SPACE = re.compile(r"\s+")
_WORD = re.compile(r"\w+")


def norm(text: str) -> str:
    """The comparison form of a phrase: NFKC, Unicode case folding, collapsed white space and
    trailing punctuation dropped ("My  Locker CODE." == "my locker code")."""
    t = unicodedata.normalize("NFKC", text).casefold()
    return _SPACE.sub(" ", t).strip().rstrip(".!?;,").strip().strip("\"'“”‘’«»").strip()


def claim_key(subject: str, predicate: str) -> tuple[str, str]:
    """The claim a fact makes, (subject, predicate) in their comparison forms: the facts that can
    shadow or supersede each other share it (`Fact.key`)."""
    return norm(subject), norm(predicate)


_JOINED = re.compile(r"(?<=[^\W\d_])-(?=[^\W\d_])")  # a hyphen between letters: "Wi-Fi" is "wifi"


def words(text: str) -> list[str]:
    """The case-folded words of `text` (what content matching compares); a hyphen between
    letters joins ("Wi-Fi" and "wifi", "e-mail" and "email" are one word)."""
    return _WORD.findall(_JOINED.sub("", unicodedata.normalize("NFKC", text).casefold()))


# words no subject is told apart by: the stop words, and the "s" `words` leaves of a possessive
# ("doctor's" -> doctor, s)
FUNCTION_WORDS = STOP_WORDS | {"s"}


def value_like(v: str) -> bool:
    """A value a user would name: a name or a code (a capital letter, a digit, # @ _ /) or a time
    word ("noon": a time said as a word is a value too), not "nice", "camp", "really busy"."""
    return any(ch.isdigit() or ch.isupper() or ch in "#@_/" for ch in v) or TIME.fullmatch(v.strip()) is not None


def stems(text: str) -> frozenset[str]:
    """The content words of a subject, plural-folded: how an update's subject is matched to a
    stored one ("Yoga" names "my yoga class"; "our family doctor's office" its own words)."""
    return frozenset(stem(w) for w in words(text) if w not in FUNCTION_WORDS)


def rank(intent: str) -> int:
    return INTENTS.index(intent)


def check_intent(intent: object) -> str:
    if intent not in INTENTS:
        raise UserInputError(f"bad write intent {intent!r}: want one of {', '.join(INTENTS)}")
    return intent  # type: ignore[return-value]


def check_lifetime(lifetime: object) -> str:
    if lifetime not in LIFETIMES:
        raise UserInputError(f"bad lifetime {lifetime!r}: want one of {', '.join(LIFETIMES)}")
    return lifetime  # type: ignore[return-value]


def _check_phrase(what: str, value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise UserInputError(f"fact {what} must be a non-empty string, got {value!r}")
    if len(value) > MAX_FIELD_CHARS:
        raise UserInputError(f"fact {what} is {len(value)} characters; the limit is {MAX_FIELD_CHARS}")
    return value.strip()


def _check_time(what: str, value: object, optional: bool) -> float | None:
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise UserInputError(f"{what} must be a finite number of seconds, got {value!r}")
    return float(value)


@dataclass(frozen=True)
class Scope:
    """Where a fact holds: the whole tenant (both None), a project, a session, or both."""

    project: str | None = None
    session: str | None = None

    def __post_init__(self) -> None:
        for what in ("project", "session"):
            v = getattr(self, what)
            if v is not None and (not isinstance(v, str) or not v.strip() or len(v) > 128):
                raise UserInputError(f"bad {what} name {v!r}: want 1-128 characters")

    def visible_in(self, ctx: Scope) -> bool:
        """A fact of this scope holds in context `ctx` (a tenant-wide fact holds everywhere)."""
        return self.project in (None, ctx.project) and self.session in (None, ctx.session)

    @property
    def depth(self) -> int:
        """How narrow the scope is: the narrower fact wins when two scopes both hold."""
        return (self.project is not None) + (self.session is not None)

    def label(self) -> str:
        parts = ([f"project {self.project}"] if self.project else []) + (
            [f"session {self.session}"] if self.session else [])
        return ", ".join(parts) or "tenant"


@dataclass(frozen=True)
class Evidence:
    """One provenance edge: what (`id`, given by the caller), when (`at`, seconds), through
    which path (`via`: a command head such as "correct memory", or "extract:rule"), doing what
    (`action`: created, reinforced, corrected, approved, pinned, ...)."""

    id: str
    at: float
    via: str
    action: str

    def to_json(self) -> dict:
        return {"id": self.id, "at": self.at, "via": self.via, "action": self.action}

    @classmethod
    def from_json(cls, d: dict) -> Evidence:
        return cls(str(d["id"]), float(d["at"]), str(d["via"]), str(d["action"]))


@dataclass(frozen=True)
class FactProposal:
    """A fact someone wants remembered; the conflict rules decide what happens to it."""

    subject: str
    predicate: str
    value: str
    statement: str  # the sentence as said (or a canonical one); what the fact's graft reads
    intent: str = "inferred"
    confidence: float | None = None  # None: DEFAULT_CONFIDENCE[intent]
    lifetime: str | None = None  # None: the policy's default for this intent
    valid_from: float | None = None  # None: when it is proposed
    expires_at: float | None = None  # None: never (volatile facts get the policy's TTL)
    mutable: bool = True
    pinned: bool = False
    # a plain-words update (grm/policy/updates.py): the old value it says it replaces, "" when it
    # says only that the value changed; None: not an update
    replaces: str | None = None

    def __post_init__(self) -> None:
        for what in ("subject", "predicate", "value", "statement"):
            object.__setattr__(self, what, _check_phrase(what, getattr(self, what)))
        check_intent(self.intent)
        if self.confidence is None:
            object.__setattr__(self, "confidence", DEFAULT_CONFIDENCE[self.intent])
        c = self.confidence
        if isinstance(c, bool) or not isinstance(c, (int, float)) or not 0.0 <= c <= 1.0:
            raise UserInputError(f"confidence must be in [0, 1], got {c!r}")
        if self.lifetime is not None:
            check_lifetime(self.lifetime)
        _check_time("valid_from", self.valid_from, True)
        _check_time("expires_at", self.expires_at, True)
        if self.valid_from is not None and self.expires_at is not None and self.expires_at <= self.valid_from:
            raise UserInputError("expires_at must be after valid_from")
        if not isinstance(self.mutable, bool) or not isinstance(self.pinned, bool):
            raise UserInputError("mutable and pinned must be True or False")

    @property
    def key(self) -> tuple[str, str]:
        return claim_key(self.subject, self.predicate)


@dataclass(frozen=True)
class Fact:
    """One fact node as stored, with the effect of its reinforcements folded in (`confidence`,
    `intent`, `count` and `evidence` include the support records; `node_*` are the node's own)."""

    id: str
    subject: str
    predicate: str
    value: str
    statement: str
    scope: Scope
    lifetime: str
    mutable: bool
    pinned: bool
    intent: str
    confidence: float
    count: int
    valid_from: float
    expires_at: float | None
    created: float
    graft: str | None
    supersedes: tuple[str, ...]
    reason: str
    evidence: tuple[Evidence, ...]
    state: str  # the store state: active or superseded (damaged if fsck said so)
    node_intent: str  # the node's own intent, confidence and count (before its supports)
    node_confidence: float
    node_count: int

    @property
    def key(self) -> tuple[str, str]:
        return claim_key(self.subject, self.predicate)

    @property
    def value_key(self) -> str:
        return norm(self.value)

    @property
    def multi_valued(self) -> bool:
        return norm(self.predicate) in MULTI_VALUED

    def expired(self, now: float) -> bool:
        return self.expires_at is not None and self.expires_at <= now

    def live(self, now: float) -> bool:
        """Active, already valid and not yet expired."""
        return self.state == "active" and self.valid_from <= now and not self.expired(now)

    def overlaps(self, valid_from: float, expires_at: float | None) -> bool:
        """Whether this fact's validity window meets [valid_from, expires_at)."""
        end_a = math.inf if self.expires_at is None else self.expires_at
        end_b = math.inf if expires_at is None else expires_at
        return self.valid_from < end_b and valid_from < end_a

    def to_meta(self) -> dict:
        return {"v": 1, "subject": self.subject, "predicate": self.predicate, "value": self.value,
                "statement": self.statement, "project": self.scope.project, "session": self.scope.session,
                "lifetime": self.lifetime, "mutable": self.mutable, "pinned": self.pinned,
                "intent": self.node_intent, "confidence": self.node_confidence, "count": self.node_count,
                "valid_from": self.valid_from, "expires_at": self.expires_at, "created": self.created,
                "graft": self.graft, "supersedes": list(self.supersedes), "reason": self.reason,
                "evidence": [e.to_json() for e in self.evidence]}

    @classmethod
    def from_meta(cls, key: str, meta: dict, state: str) -> Fact:
        return cls(
            id=key, subject=meta["subject"], predicate=meta["predicate"], value=meta["value"],
            statement=meta["statement"], scope=Scope(meta.get("project"), meta.get("session")),
            lifetime=meta["lifetime"], mutable=bool(meta["mutable"]), pinned=bool(meta["pinned"]),
            intent=meta["intent"], confidence=float(meta["confidence"]), count=int(meta.get("count", 1)),
            valid_from=float(meta["valid_from"]), expires_at=meta.get("expires_at"),
            created=float(meta["created"]), graft=meta.get("graft"),
            supersedes=tuple(meta.get("supersedes", ())), reason=meta.get("reason", "created"),
            evidence=tuple(Evidence.from_json(e) for e in meta.get("evidence", ())), state=state,
            node_intent=meta["intent"], node_confidence=float(meta["confidence"]),
            node_count=int(meta.get("count", 1)))

    def with_(self, **changes: object) -> Fact:
        return replace(self, **changes)

    def line(self) -> str:
        """One line for listings: id, statement and what kind of memory it is."""
        flags = [self.lifetime, self.intent, f"conf {self.confidence:.2f}"]
        if self.count > 1:
            flags.append(f"x{self.count}")
        if self.pinned:
            flags.append("pinned")
        if not self.mutable:
            flags.append("immutable")
        if self.scope.depth:
            flags.append(self.scope.label())
        if self.state != "active":
            flags.append(self.state)
        return f"{self.id}: {self.statement} [{', '.join(flags)}]"
