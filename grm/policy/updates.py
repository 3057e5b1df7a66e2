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
"""

from __future__ import annotations

import re

from grm.policy.fact import FactProposal

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

# (pattern, subject override, predicate override); the subject/predicate come from the match
# when the override is None
_PATTERNS: list[tuple[re.Pattern, str | None, str | None]] = [(re.compile(p, re.IGNORECASE), s, pr) for p, s, pr in [
    (rf"^{_S}\s+{_VERB}\s+from\s+{_A}\s+to\s+{_V}{_END}", None, "is"),
    (rf"^{_I_VERB}\s+{_S}\s+from\s+{_A}\s+to\s+{_V}{_END}", None, "is"),
    (rf"^{_I_VERB}\s+{_S}\s+(?:over\s+)?to\s+{_V}{_END}", None, "is"),
    (rf"^i(?:\s+have|'ve|\s+just)*\s+moved\s+from\s+{_A}\s+to\s+{_V}{_END}", "I", "live in"),
    (rf"^i(?:\s+have|'ve|\s+just)*\s+moved\s+to\s+{_V}{_END}", "I", "live in"),
    (rf"^{_S}\s+(?:is|are)\s+different\s+now\s*[:,-]?\s*(?:{_NOW_IS}\s+)?{_V}{_END}", None, "is"),
    (rf"^{_S}\s+(?:has\s+|have\s+)?changed\s*[:,;-]?\s*(?:to\s+|{_NOW_IS}\s+)?{_V}{_END}", None, "is"),
    (rf"^{_S}\s+(?:is|are)\s+no\s+longer\s+{_A}\s*[,;:-]\s*(?:{_NOW_IS}\s+)?{_V}{_END}", None, "is"),
    (rf"^{_S}\s+(?:is|are)\s+{_V}\s+now\s*,?\s*(?:and\s+)?not\s+{_A}(?:\s+any\s*more)?{_END}", None, "is"),
    (rf"^{_S}\s+(?:is|are)\s+{_V}\s+instead\s+of\s+{_A}{_END}", None, "is"),
    (rf"^{_S}\s+(?:is|are)\s+now\s+{_V}{_END}", None, "is"),
    (rf"^(?P<s>(?:my|our|the))\s+new\s+(?P<x>[\w'’-]+(?:\s+[\w'’-]+){{0,4}}?)\s+(?:is|are)\s+{_V}{_END}", None, "is"),
    (rf"^(?P<s>i|we)\s+no\s+longer\s+(?P<verb>\w+)\s+{_PREP}\s+{_A}\s*[,;:-]\s*(?:(?:{_NOW_IS}|(?P=s)\s+(?:now\s+)?(?P=verb)\s+(?P=p)|now\s+(?P=p))\s+)?(?:(?P=p)\s+)?{_V}{_END}", None, None),
    (rf"^(?P<s>i|we)\s+now\s+(?P<verb>\w+)\s+{_PREP}\s+{_V}(?:\s*,?\s*(?:instead\s+of|not)\s+(?:(?P=p)\s+)?{_A})?{_END}", None, None),
]]
_BAD_VALUE = re.compile(r"\b(?:not|no|never|maybe|perhaps)\b", re.IGNORECASE)


def _clean(v: str | None) -> str | None:
    if v is None:
        return None
    v = v.strip().rstrip(".!,;:").strip().strip("\"'“”‘’«»").strip()
    v = re.sub(r"^(?:to|in|at|on)\s+", "", v, flags=re.IGNORECASE) if len(v.split()) > 1 else v
    return v or None


def parse_update(sentence: str, intent: str = "inferred") -> FactProposal | None:
    """The update one sentence states, or None (not an update, a question, or a value too odd)."""
    s = sentence.strip()
    if not s or s.endswith("?") or len(s) > 400:
        return None
    for pattern, subject, predicate in _PATTERNS:
        m = pattern.match(s)
        if m is None:
            continue
        groups = m.groupdict()
        new, old = _clean(groups.get("v")), _clean(groups.get("a"))
        if new is None or _BAD_VALUE.search(new) or len(new) > 120 or len(new.split()) > 8:
            return None
        subj = subject or groups["s"].strip()
        if groups.get("x"):  # "the new X is B": the subject is "the X"
            subj = f"{groups['s']} {groups['x'].strip()}"
        pred = predicate or f"{groups['verb'].casefold()} {groups['p'].casefold()}"
        if subj.casefold() in ("i", "we"):
            subj = "I" if subj.casefold() == "i" else "we"
        said = f"{subj} is now {new}" if pred == "is" else f"{subj} now {pred} {new}"
        said = said[0].upper() + said[1:]  # read as a sentence of its own (the fact's graft)
        return FactProposal(subj, pred, new, said, intent=intent, replaces=old or "")
    return None
