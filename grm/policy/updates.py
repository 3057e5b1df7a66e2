"""Plain-words updates: sentences that change an earlier fact without the command grammar.

"the launch slipped from May to June", "I switched my bank from Chase to Ally", "the wifi
password is different now: hunter3", "we no longer meet in room 4, it's room 9". Each is read
into one `FactProposal` whose `replaces` names the old value as said ("" when the sentence only
says the value changed). The conflict rules (`grm.policy.rules.decide`) then supersede the fact
holding that old value, with lineage (reason "updated"), or hold the update for review when it
is ambiguous (no single fact matches, the named old value is not what memory holds).

The patterns, tried on each sentence before the ordinary clause rules (S is "my|our|the X"):

    S <moved|slipped|changed|switched|...> from A to B      -> (S, is, B)        replaces A
    I <switched|changed|moved|...> S from A to B              -> (S, is, B)        replaces A
    I <switched|changed|...> S to B                           -> (S, is, B)        replaces ""
    I moved (from A) to P                                     -> (I, live in, P)   replaces A|""
    S is different now: B / S changed, it's B / S is now B    -> (S, is, B)        replaces ""
    S is no longer A, it's B / S is B now, not A / S is B instead of A   -> (S, is, B)  replaces A
    the|my|our new X is B                                     -> (the X, is, B)    replaces ""
    I|we no longer V in|at A, (it's|now) B                    -> (I|we, V in, B)  replaces A
    I|we now V in|at B (instead of A)                         -> (I|we, V in, B)  replaces A|""
    S was|has been|got <participle> (up|back..) (from A) to B -> (S, is, B)        replaces A|""
    S <moved|rescheduled|went up|...> to B                    -> (S, is, B)        replaces ""
    I|we have|got a new X(,|:| called) B                      -> (my|our X, is, B) replaces ""

A sentence none of these reads, but that carries a change cue (now, these days, any more,
instead, rather than, no longer, new, changed, switched, replaced, retired, dropped, ...), is
cut into clauses (at ; : and at , / so / and / but / then) and each clause, time adverbs
("now", "these days") removed, is read by the patterns above and then by the ordinary clause
rules (grm/policy/extract.py): "Kim left, so my manager is Ravi now" -> (my manager, is, Ravi);
a contrast tail names the old value ("..., not A", "instead of A", "rather than A"). A value
stops before a subordinate clause ("RT-88 after I re-registered the car" -> "RT-88").

The fact's statement (what its graft reads, alone) is the claim in canonical form, "My bank is
Ally", never the update as said: the old value named beside the new one competes with it, and
"is now" read no better (bench/results/fidelity.md). When the update supersedes a fact whose
statement holds its value, the new statement is that one with the value swapped (`restate`):
"The review is in March" updated to April reads "The review is in April", not "... is April".
"""

from __future__ import annotations

import re
from dataclasses import replace

from grm.policy.fact import MULTI_VALUED, FactProposal

_S = r"(?P<s>(?:my|our|the)\s+[\w'’-]+(?:\s+[\w'’-]+){0,4}?)"
_VERB = (r"(?:has\s+|have\s+|had\s+|was\s+|were\s+|got\s+|just\s+|been\s+)*"
         r"(?:slipped|moved|changed|shifted|switched|went|gone|pushed|bumped|jumped|dropped|rose|risen|"
         r"increased|decreased|grew|fell|fallen|was\s+raised|raised|lowered|updated|reset|rescheduled)"
         r"(?:\s+(?:back|up|down|out|over))?")
_I_VERB = (r"i(?:\s+have|'ve|\s+just|\s+finally)*\s+"
           r"(?:switched|changed|moved|swapped|updated|upgraded|reset|replaced)")
_NOW_IS = r"(?:it's|it\s+is|its|now\s+it's|now\s+it\s+is|it's\s+now|it\s+is\s+now|now|the\s+new\s+one\s+is)"
_V = r"(?P<v>[^,;]+?)"
_A = r"(?P<a>[^,;]+?)"
_END = r"\s*[.!]?\s*$"
_PREP = r"(?P<p>in|at|on|from|with|for)"
# a passive change: "was reset", "has been postponed", "got rotated" (any participle after an auxiliary)
_AUX = r"(?:has\s+been|have\s+been|had\s+been|'s\s+been|was|were|got|has\s+got|is\s+being)"
_PART = r"(?:[a-z]+ed|[a-z]+en|reset|set|put|cut|shut|sent)"
_PARTICLE = r"(?:back|up|down|out|over|forward|ahead)"
# an active change with no old value: "the meeting moved to Friday", "the rent went up to 1450"
_TO_VERB = (r"(?:moved|changed|switched|shifted|rescheduled|postponed|pushed|bumped|reset|updated|rotated|delayed|"
            r"raised|lowered|increased|decreased|(?:went|gone|jumped|rose|risen|fell|fallen|dropped)\s+(?:up|down|back))")
# words that say a value changed: a sentence with one is read clause by clause (`_cued`)
_CUE = re.compile(r"\b(?:now|these\s+days|nowadays|from\s+now\s+on|any\s*more|no\s+longer|instead|rather\s+than|"
                  r"new|changed|switched|moved|replaced|reset|updated|rotated|renamed|postponed|rescheduled|delayed|"
                  r"swapped|transferred|relocated|retired|left|quit|dropped|stopped|cancell?ed)\b", re.IGNORECASE)
# a contrast tail naming the old value: ", not A" / "instead of A" / "rather than A" (+ "any more")
_CONTRAST = re.compile(r"\s*[,;]?\s*(?:and\s+)?\b(?:not|instead\s+of|rather\s+than|in\s+place\s+of)\s+"
                       r"(?P<a>[^,;:]+?)(?:\s+any\s*more)?\s*[.!]?\s*$", re.IGNORECASE)
# time adverbs that mark the change and are no part of the claim
_ADVERB = re.compile(r"\s*,?\s*\b(?:now|these\s+days|nowadays|from\s+now\s+on|currently|any\s*more|"
                     r"as\s+of\s+(?:today|now)|today)\b", re.IGNORECASE)
_PIECE = re.compile(r"\s*[;:]\s*|\s*,\s*(?:(?:so|and|but|then)\s+)?|\s+(?:so|and|but|then)\s+", re.IGNORECASE)
# a value stops before a subordinate clause: "RT-88 after I re-registered the car" -> "RT-88"
_TRAIL = re.compile(r"\s+(?:after|because|since|when|until|while|as\s+of|so|now|these\s+days|nowadays|"
                    r"from\s+now\s+on|any\s*more)\b.*$", re.IGNORECASE)

# (pattern, subject override, predicate override); the subject/predicate come from the match
# when the override is None. Patterns after STRICT_FROM (and every `_cued` clause) read values
# that could be anything ("the new team is nice", "my brother was sent to camp"), so their new
# value must look like one (`_value_like`) unless the sentence names the old value.
_PATTERNS: list[tuple[re.Pattern, str | None, str | None]] = [(re.compile(p, re.IGNORECASE), s, pr) for p, s, pr in [
    (rf"^{_S}\s+{_VERB}\s+from\s+{_A}\s+to\s+{_V}{_END}", None, "is"),
    (rf"^{_I_VERB}\s+{_S}\s+from\s+{_A}\s+to\s+{_V}{_END}", None, "is"),
    (rf"^{_I_VERB}\s+{_S}\s+(?:over\s+)?to\s+{_V}{_END}", None, "is"),
    (rf"^i(?:\s+have|'ve|\s+just)*\s+moved\s+from\s+{_A}\s+to\s+{_V}{_END}", "I", "live in"),
    (rf"^i(?:\s+have|'ve|\s+just)*\s+moved\s+to\s+{_V}{_END}", "I", "live in"),
    (rf"^{_S}\s+(?:is|are)\s+different\s+now\s*[:,-]?\s*(?:{_NOW_IS}\s+)?{_V}{_END}", None, "is"),
    (rf"^{_S}\s+(?:has\s+|have\s+)?changed\s*[:,;-]?\s*(?:to\s+|{_NOW_IS}\s+)?{_V}{_END}", None, "is"),
    (rf"^{_S}\s+(?:is|are)\s+(?:no\s+longer|not)\s+{_A}(?:\s+any\s*more)?\s*[,;:-]\s*(?:{_NOW_IS}\s+)?{_V}{_END}",
     None, "is"),
    (rf"^{_S}\s+(?:is|are)\s+{_V}\s+now\s*,?\s*(?:and\s+)?not\s+{_A}(?:\s+any\s*more)?{_END}", None, "is"),
    (rf"^{_S}\s+(?:is|are)\s+{_V}\s+instead\s+of\s+{_A}{_END}", None, "is"),
    (rf"^{_S}\s+(?:is|are)\s+now\s+{_V}{_END}", None, "is"),
    (rf"^(?P<s>(?:my|our|the))\s+new\s+(?P<x>[\w'’-]+(?:\s+[\w'’-]+){{0,4}}?)\s+(?:is|are)\s+{_V}{_END}", None, "is"),
    (rf"^(?P<s>i|we)\s+no\s+longer\s+(?P<verb>\w+)\s+{_PREP}\s+{_A}\s*[,;:-]\s*(?:(?:{_NOW_IS}|(?P=s)\s+(?:now\s+)?(?P=verb)\s+(?P=p)|now\s+(?P=p))\s+)?(?:(?P=p)\s+)?{_V}{_END}", None, None),
    (rf"^(?P<s>i|we)\s+now\s+(?P<verb>\w+)\s+{_PREP}\s+{_V}(?:\s*,?\s*(?:instead\s+of|not)\s+(?:(?P=p)\s+)?{_A})?{_END}", None, None),
    (rf"^{_S}\s+{_AUX}\s+(?:just\s+)?{_PART}(?:\s+{_PARTICLE})?\s+(?:from\s+{_A}\s+)?to\s+{_V}{_END}", None, "is"),
    (rf"^{_S}\s+(?:has\s+|have\s+)?{_TO_VERB}(?:\s+{_PARTICLE})?\s+to\s+{_V}{_END}", None, "is"),
    (rf"^(?P<s>i|we)(?:\s+have|'ve|\s+just)?\s+(?:have|got|gotten)\s+a\s+new\s+(?P<x>[\w'’-]+(?:\s+[\w'’-]+){{0,3}}?)"
     rf"\s*(?:[,:]|\s+-|\s+called|\s+named)\s*{_V}{_END}", None, "is"),
]]
STRICT_FROM = 11  # the index of "the|my|our new X is B": it and every pattern after it are strict
_BAD_VALUE = re.compile(r"\b(?:not|no|never|maybe|perhaps|i|you|he|she|it|we|they)\b", re.IGNORECASE)


def _value_like(v: str) -> bool:
    """A value a user would name: a name or a code (a capital letter or a digit), not "nice", "camp"."""
    return any(ch.isdigit() or ch.isupper() for ch in v)


def _clean(v: str | None) -> str | None:
    if v is None:
        return None
    v = v.strip().rstrip(".!,;:").strip().strip("\"'“”‘’«»").strip()
    v = _TRAIL.sub("", v).strip() if len(v.split()) > 1 else v
    v = re.sub(r"^(?:to|in|at|on)\s+", "", v, flags=re.IGNORECASE) if len(v.split()) > 1 else v
    return v or None


def parse_update(sentence: str, intent: str = "inferred") -> FactProposal | None:
    """The update one sentence states, or None (not an update, a question, or a value too odd)."""
    s = sentence.strip()
    if not s or s.endswith("?") or len(s) > 400:
        return None
    return _matched(s, intent) or _cued(s, intent)


def _matched(s: str, intent: str, replaces: str | None = None) -> FactProposal | None:
    """The update one of `_PATTERNS` reads in `s` (`replaces`: the old value named elsewhere)."""
    for i, (pattern, subject, predicate) in enumerate(_PATTERNS):
        m = pattern.match(s)
        if m is None:
            continue
        groups = m.groupdict()
        new, old = _clean(groups.get("v")), _clean(groups.get("a"))
        if new is None or _BAD_VALUE.search(new) or len(new) > 120 or len(new.split()) > 8:
            return None
        if i >= STRICT_FROM and not (old or replaces) and not _value_like(new):
            return None
        subj = subject or groups["s"].strip()
        if groups.get("x"):  # "the new X is B", "I have a new X, B": the subject is "the|my|our X"
            owner = {"i": "my", "we": "our"}.get(groups["s"].casefold(), groups["s"])
            subj = f"{owner} {groups['x'].strip()}"
        pred = predicate or f"{groups['verb'].casefold()} {groups['p'].casefold()}"
        if subj.casefold() in ("i", "we"):
            subj = "I" if subj.casefold() == "i" else "we"
        return _proposal(subj, pred, new, old or replaces or "", intent)
    return None


def _proposal(subject: str, predicate: str, value: str, replaces: str, intent: str) -> FactProposal:
    """The update's claim, its statement canonical: "My bank is Ally" read alone (the fact's graft)."""
    said = f"{subject} {predicate} {value}"
    return FactProposal(subject, predicate, value, said[0].upper() + said[1:], intent=intent, replaces=replaces)


def _cued(s: str, intent: str) -> FactProposal | None:
    """A sentence with a change cue, read clause by clause (module docstring); the last clause
    holding a claim is the update. None without a cue or a claim."""
    from grm.policy.extract import parse_clause  # extract reads updates first: imported late

    if not _CUE.search(s):
        return None
    body, old = s.rstrip(" .!"), ""
    if m := _CONTRAST.search(body):
        body, old = body[:m.start()], _clean(m["a"]) or ""
    found = None
    for piece in _PIECE.split(body):
        piece = _ADVERB.sub("", piece).strip(" ,")
        if not piece:
            continue
        p = _matched(piece, intent, old)
        if p is None and (c := parse_clause(piece, intent)) is not None and c.key[1] not in MULTI_VALUED:
            value = _clean(c.value)
            if value and not _BAD_VALUE.search(value) and len(value.split()) <= 8 and (old or _value_like(value)):
                p = _proposal(c.subject, c.predicate, value, old, intent)
        if p is not None and p.value.casefold() != (p.replaces or "").casefold():
            found = p
    return found


_PREP_LEAD = re.compile(r"^(?:(?:in|on|at)\s+)+", re.IGNORECASE)  # "on June 3": the value is "June 3"


def restate(p: FactProposal, old_statement: str, old_value: str) -> FactProposal:
    """`p` (an update) stated as the fact it supersedes was, its value swapped for the new one,
    when that statement holds the old value once; else `p` unchanged."""
    old_core, new_core = _PREP_LEAD.sub("", old_value.strip()), _PREP_LEAD.sub("", p.value.strip())
    pattern = re.compile(rf"(?<!\w){re.escape(old_core)}(?!\w)", re.IGNORECASE)
    if not old_core or not new_core or len(pattern.findall(old_statement)) != 1:
        return p
    said = pattern.sub(lambda _: new_core, old_statement).strip().rstrip(".")
    return replace(p, statement=said[0].upper() + said[1:])
