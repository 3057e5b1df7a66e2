"""The memory command grammar: deterministic, no model. `parse(line)` is called on every chat
line (and by `grm memory LINE`) before anything else.

    remember permanently: S            a permanent, tenant-wide fact (user-asserted)
    remember this for the project: S   a fact of the current project (needs --project)
    remember this for the session: S   a fact of the current session
    remember for now: S                a volatile fact (expires after the policy's TTL)
    remember: S                        the policy's default lifetime (permanent)
    forget: Q                          tombstone the active facts that match Q; if more than one
                                       matches, nothing changes and the answer names a token:
    confirm forget TOKEN               forget exactly the facts that token named (still active)
    correct memory: X => Y             X matches one active fact (by content, or its id); Y is
                                       the corrected statement, or just the new value
    pin: Q / unpin: Q                  a pinned fact is always offered to the model
    mark immutable: Q / mark mutable: Q
    approve review ID / reject review ID / edit review ID: S
    cull graft ID into sections        done by the runtime (a callback); "not available" without
    show memory [about: Q]             list active facts (matching Q)
    why do you remember: Q             provenance: which turns, when, through which command
    set durability: MODE               volatile | async | normal | full | strict

Recognition: a line is a command when the words before its first ':' are one of the heads
above (NFKC + Unicode case folding: "REMEMBER PERMANENTLY:" and full-width letters work), or
when the whole line is one of the colon-free forms (approve/reject review ID, confirm forget
TOKEN, cull graft ID into sections, set durability MODE, show memory). A line that starts like
a command (approve review, correct memory, set durability, forget:, ...) but does not fit is
`Malformed`: the executor answers its one-line usage and changes nothing. Anything else is an
ordinary chat turn (`parse` returns None): "forget it", "remember when we met?".

Values: split at the first ':' (values may hold more colons); in `correct memory` X ends at the
first '=>' unless X is quoted ("a => b" => c), so Y may hold '=>'. One pair of outer quotes
("", '', “”, ‘’, «») around a value is removed.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import ClassVar, Union

from grm.policy.fact import MAX_FIELD_CHARS
from grm.store.config import DURABILITY_MODES

MAX_HEAD_CHARS = 200  # text before the first ':' longer than this is never a command head
_QUOTES = {'"': '"', "'": "'", "“": "”", "‘": "’", "«": "»", "„": "“"}


@dataclass(frozen=True)
class Remember:
    head: ClassVar[str] = "remember"
    statement: str
    lifetime: str | None  # None: the policy's default


@dataclass(frozen=True)
class Forget:
    head: ClassVar[str] = "forget"
    query: str


@dataclass(frozen=True)
class ConfirmForget:
    head: ClassVar[str] = "confirm forget"
    token: str


@dataclass(frozen=True)
class Correct:
    head: ClassVar[str] = "correct memory"
    target: str  # X: what to match
    replacement: str  # Y: the corrected statement or value


@dataclass(frozen=True)
class Pin:
    head: ClassVar[str] = "pin"
    query: str
    pinned: bool


@dataclass(frozen=True)
class SetMutability:
    head: ClassVar[str] = "mark"
    query: str
    mutable: bool


@dataclass(frozen=True)
class ReviewDecision:
    head: ClassVar[str] = "review"
    action: str  # approve | reject | edit
    review_id: str
    statement: str | None = None  # edit: the statement to remember instead


@dataclass(frozen=True)
class CullGraft:
    head: ClassVar[str] = "cull graft"
    graft_id: str


@dataclass(frozen=True)
class Show:
    head: ClassVar[str] = "show memory"
    query: str | None


@dataclass(frozen=True)
class Why:
    head: ClassVar[str] = "why do you remember"
    query: str


@dataclass(frozen=True)
class SetDurability:
    head: ClassVar[str] = "set durability"
    mode: str


@dataclass(frozen=True)
class Malformed:
    """Started like a command but does not fit: answered with `usage`, changes nothing."""

    head: ClassVar[str] = "malformed"
    usage: str
    reason: str


Command = Union[Remember, Forget, ConfirmForget, Correct, Pin, SetMutability, ReviewDecision, CullGraft,
                Show, Why, SetDurability, Malformed]

USAGE = {
    "remember": "usage: remember permanently: S | remember this for the project: S | "
                "remember this for the session: S | remember for now: S | remember: S",
    "forget": "usage: forget: WHAT (then `confirm forget TOKEN` if several facts match)",
    "confirm": "usage: confirm forget TOKEN (the token `forget:` answered with)",
    "correct": "usage: correct memory: OLD => NEW (OLD matches one fact; NEW is the statement or value)",
    "pin": "usage: pin: WHAT | unpin: WHAT",
    "mark": "usage: mark immutable: WHAT | mark mutable: WHAT",
    "review": "usage: approve review ID | reject review ID | edit review ID: STATEMENT",
    "cull": "usage: cull graft ID into sections",
    "show": "usage: show memory | show memory about: WHAT",
    "why": "usage: why do you remember: WHAT",
    "set": f"usage: set durability: {' | '.join(DURABILITY_MODES)}",
}

_REMEMBER = {
    ("remember",): None, ("remember", "this"): None,
    ("remember", "permanently"): "permanent", ("remember", "this", "permanently"): "permanent",
    ("remember", "this", "for", "the", "project"): "project", ("remember", "for", "the", "project"): "project",
    ("remember", "for", "this", "project"): "project",
    ("remember", "this", "for", "the", "session"): "session", ("remember", "for", "the", "session"): "session",
    ("remember", "for", "this", "session"): "session",
    ("remember", "for", "now"): "volatile", ("remember", "this", "for", "now"): "volatile",
}
# Two-word starts that are never ordinary chat: a line starting with one is a command or Malformed.
_STRONG = {("approve", "review"): "review", ("reject", "review"): "review", ("edit", "review"): "review",
           ("confirm", "forget"): "confirm", ("cull", "graft"): "cull", ("set", "durability"): "set",
           ("correct", "memory"): "correct", ("show", "memory"): "show", ("mark", "mutable"): "mark",
           ("mark", "immutable"): "mark", ("remember", "permanently"): "remember"}
# A colon head "remember W ..." (at most 6 words) whose second word is one of these is a
# mistyped remember command ("remember this for the projet:"), not chat.
_REMEMBER_NEXT = {"this", "for", "permanently", "forever", "permanent"}
_COLON = re.compile("[:\uff1a]")  # ':' or the full-width colon


def _group(head: list[str]) -> str | None:
    """The usage group of a colon head that is not a command but is clearly meant as one."""
    if len(head) >= 2 and (group := _STRONG.get((head[0], head[1]))) is not None:
        return group
    if 2 <= len(head) <= 6 and head[0] == "remember" and head[1] in _REMEMBER_NEXT:
        return "remember"
    return None


def _fold(text: str) -> list[str]:
    return unicodedata.normalize("NFKC", text).casefold().split()


def unquote(value: str) -> str:
    v = value.strip()
    if len(v) >= 2 and v[0] in _QUOTES and v[-1] == _QUOTES[v[0]]:
        return v[1:-1].strip()
    return v


def _ident(word: str) -> str | None:
    """An id or token as typed: ASCII letters, digits, '-', '_' and '.' (a trailing '.' dropped)."""
    w = word.rstrip(".")
    return w if w and len(w) <= 128 and all(c.isascii() and (c.isalnum() or c in "-_.") for c in w) else None


def _bad(group: str, reason: str) -> Malformed:
    return Malformed(USAGE[group], reason)


def _value(group: str, rest: str | None, what: str) -> str | Malformed:
    v = unquote(rest or "")
    if not v:
        return _bad(group, f"{what} is empty (an empty match never means everything)")
    if len(v) > MAX_FIELD_CHARS:
        return _bad(group, f"{what} is {len(v)} characters; the limit is {MAX_FIELD_CHARS}")
    return v


def _correct(rest: str) -> Command:
    rest = rest.strip()
    if rest[:1] in _QUOTES and (close := rest.find(_QUOTES[rest[0]], 1)) > 0:
        target, after = rest[1:close], rest[close + 1:].lstrip()
        if not after.startswith("=>"):
            return _bad("correct", "missing '=>' after the quoted text")
        replacement = after[2:]
    elif "=>" in rest:
        target, replacement = rest.split("=>", 1)
    else:
        return _bad("correct", "missing '=>' between the old and the new")
    t = _value("correct", target, "the text to correct")
    if isinstance(t, Malformed):
        return t
    r = _value("correct", replacement, "the corrected text")
    return r if isinstance(r, Malformed) else Correct(t, r)


def _with_colon(head: list[str], rest: str) -> Command | None:
    h = tuple(head)
    if h in _REMEMBER:
        s = _value("remember", rest, "the statement")
        return s if isinstance(s, Malformed) else Remember(s, _REMEMBER[h])
    if h == ("forget",):
        q = _value("forget", rest, "the match")
        return q if isinstance(q, Malformed) else Forget(q)
    if h in (("pin",), ("unpin",)):
        q = _value("pin", rest, "the match")
        return q if isinstance(q, Malformed) else Pin(q, h == ("pin",))
    if h in (("mark", "mutable"), ("mark", "immutable"), ("mark", "as", "mutable"), ("mark", "as", "immutable")):
        q = _value("mark", rest, "the match")
        return q if isinstance(q, Malformed) else SetMutability(q, h[-1] == "mutable")
    if h == ("correct", "memory"):
        return _correct(rest)
    if h in (("show", "memory", "about"), ("show", "memory")):
        q = unquote(rest)
        if len(q) > MAX_FIELD_CHARS:
            return _bad("show", f"the match is {len(q)} characters; the limit is {MAX_FIELD_CHARS}")
        return Show(q or None)
    if h == ("why", "do", "you", "remember"):
        q = _value("why", rest, "the match")
        return q if isinstance(q, Malformed) else Why(q)
    if h == ("set", "durability"):
        return _without_colon(["set", "durability", *_fold(rest)])
    if len(h) == 3 and h[1] == "review" and h[0] in ("approve", "reject", "edit"):
        rid = _ident(h[2])
        if rid is None:
            return _bad("review", f"bad review id {h[2]!r}")
        if h[0] == "edit":
            s = _value("review", rest, "the edited statement")
            return s if isinstance(s, Malformed) else ReviewDecision("edit", rid, s)
        return _bad("review", f"{h[0]} review takes no text after the id") if rest.strip() else ReviewDecision(h[0], rid)
    if len(h) == 2 and h[1] == "review" and h[0] in ("approve", "reject", "edit"):
        return _without_colon([*h, *_fold(rest)]) if h[0] != "edit" else _bad("review", "edit review needs an id")
    if h == ("confirm", "forget"):
        return _without_colon(["confirm", "forget", *_fold(rest)])
    return None


def _without_colon(w: list[str]) -> Command | None:
    if len(w) == 3 and w[:2] in (["approve", "review"], ["reject", "review"]):
        rid = _ident(w[2])
        return ReviewDecision(w[0], rid) if rid else _bad("review", f"bad review id {w[2]!r}")
    if len(w) == 3 and w[:2] == ["confirm", "forget"]:
        tok = _ident(w[2])
        return ConfirmForget(tok) if tok else _bad("confirm", f"bad token {w[2]!r}")
    if len(w) == 5 and w[:2] == ["cull", "graft"] and w[3:] == ["into", "sections"]:
        gid = _ident(w[2])
        return CullGraft(gid) if gid else _bad("cull", f"bad graft id {w[2]!r}")
    if len(w) == 3 and w[:2] == ["set", "durability"]:
        mode = w[2].rstrip(".")
        return SetDurability(mode) if mode in DURABILITY_MODES else _bad("set", f"unknown durability mode {w[2]!r}")
    if w == ["show", "memory"]:
        return Show(None)
    return None


def parse(text: object) -> Command | None:
    """The memory command `text` is, `Malformed` if it starts like one but does not fit, or None
    for an ordinary chat turn (including empty and whitespace-only text)."""
    if not isinstance(text, str):
        return None
    s = text.strip()
    if not s:
        return None
    m = _COLON.search(s, 0, MAX_HEAD_CHARS + 1)
    if m is not None:
        head = _fold(s[:m.start()])
        cmd = _with_colon(head, s[m.end():]) if head else None
        if cmd is None and (group := _group(head)) is not None:
            return _bad(group, f"unknown command {' '.join(head)!r}")
        return cmd
    head = _fold(s[:MAX_HEAD_CHARS])
    if len(s) > MAX_HEAD_CHARS:
        head.append("…")  # too long to be a colon-free command: at most Malformed
    cmd = _without_colon(head)
    if cmd is None and (group := _STRONG.get(tuple(head[:2]))) is not None:
        return _bad(group, "missing ':' or a wrong shape")
    return cmd
