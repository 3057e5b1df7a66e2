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
    I|we have|got a new|different X(,|:| called) B            -> (my|our X, is, B) replaces ""
    (someone) gave|assigned|issued me|us a new|different X: B -> (my|our X, is, B) replaces ""
    (someone) renamed|moved|reset|... S (over) (from A) to|as B -> (S, is, B)      replaces A|""
    X <moved|was moved|...> (from A) to|as B, X a bare noun ("Yoga", "Band practice") replaces A|""
    new X: B / new X is B                                     -> (the X, is, B)    replaces ""
    (someone) put|moved|kept S (from A) in|to|under.. the|my P -> (S, is, in P)    replaces A|""
    I|we traded|swapped (the) A for|with B (names)            -> (I|we, have, B)   replaces A
    (someone) swapped|traded S for B                          -> (S, is, B)        replaces ""
    S has|got a new|different X: B                           -> (S's X, is, B)    replaces ""
    I|we switched|changed Xs to B                             -> (my|our X, is, B) replaces ""

A sentence none of these reads, but that carries a change cue (now, these days, any more,
instead, rather than, no longer, new, changed, switched, replaced, retired, dropped, "from
Monday", "starting next week", ...), is cut into clauses (at ; : and at , / so / and / but /
then) and each clause, time phrases ("now", "these days", "from Monday") removed, is read by
the patterns above, then by the ordinary clause rules (grm/policy/extract.py), then as:

    "Kim left, so my manager is Ravi now"       -> (my manager, is, Ravi)     (a clause rule)
    "..., not A" / "instead of A" / "rather than A" tail   -> names the old value A
    "swim lessons are on Saturdays now"         -> (swim lessons, is, Saturdays) (bare subject)
    "Changed the door code, it's 4418 now"      -> (the door code, is, 4418)  ("it's B", "use B",
                                                   "it lands at B" take the subject named before)
    "we switched dentists, we see Dr. Wu now"   -> (our dentist, is, Dr. Wu)
    "we see Dr. Sato now; Dr. Brandt retired"   -> (we, see, Dr. Sato)        replaces Dr. Brandt
    "I don't use Dropbox anymore, we use Box"   -> (we, use, Box)             replaces Dropbox
    "Priya left, so Oskar manages me now"       -> (I, manages me, Oskar)     replaces Priya
    "I reset the shed code. It's 9012 now."     -> (the shed code, is, 9012)  (the sentence before
                                                   names the subject: `parse_update(.., before=)`)

Openers that carry no claim ("FYI", "actually", "quick update:", "turns out", "scratch that")
are dropped from a clause; a value said as "called B" / "known as B" is B; "'s" before no noun
is "is" ("the party's on Saturday", `expand`); "(was A)" and "X used to be A, now it's B" name
the old value; "B replaced A as my X" / "B took over as the X" read as (X, is, B); clauses are
also cut at dashes.

A clause saying the old value is gone ("Z left|retired|closed|won't work", "I dropped|quit|don't
see Z") names it only for a claim of I/we: such a claim names no subject, and the rules find the
one fact holding Z (grm/policy/rules.py, rule 7); "I quit Z and joined B" reads the second
clause with the first one's subject. Values stop before a subordinate clause or a time phrase
("RT-88 after I re-registered the car" -> "RT-88", "Fridays starting next week" -> "Fridays").
Clause values must look like a value (a Name, a number or a code) unless the old one is named.

The fact's statement (what its graft reads, alone) is the claim in canonical form, "My bank is
Ally", never the update as said: the old value named beside the new one competes with it, and
"is now" read no better (bench/results/fidelity.md). When the update supersedes a fact whose
statement holds its value, the new statement is that one with the value swapped (`restate`):
"The review is in March" updated to April reads "The review is in April", not "... is April".
An update of a fact worded differently takes that fact's subject and predicate (`adopt`): one
claim, one lineage ("Yoga moved to Fridays" supersedes "My yoga class is on Wednesday" with
"My yoga class is on Fridays").
"""

from __future__ import annotations

import re
from dataclasses import replace

from grm.english.dates import WEEKDAY
from grm.english.words import stem
from grm.policy.fact import MULTI_VALUED, FactProposal, claim_key, norm, value_like

_OWNER = r"(?:my|our|the|(?-i:[A-Z])[\w-]*['’]s)"  # "my bank", "the gate code", "Anna's phone number"
_S = rf"(?P<s>{_OWNER}\s+[\w'’-]+(?:\s+[\w'’-]+){{0,4}}?)"
_VERB = (r"(?:has\s+|have\s+|had\s+|was\s+|were\s+|got\s+|just\s+|been\s+)*"
         r"(?:slipped|moved|changed|shifted|switched|went|gone|pushed|bumped|jumped|dropped|rose|risen|"
         r"increased|decreased|grew|fell|fallen|was\s+raised|raised|lowered|updated|reset|rescheduled)"
         r"(?:\s+(?:back|up|down|out|over))?")
_I_VERB = (r"i(?:\s+have|'ve|\s+just|\s+finally)*\s+"
           r"(?:switched|changed|moved|swapped|updated|upgraded|reset|replaced)")
_NOW_IS = r"(?:it's|it\s+is|its|now\s+it's|now\s+it\s+is|it's\s+now|it\s+is\s+now|now|the\s+new\s+one\s+is)"
_UNCUT = r"(?:[^,;]|(?<=\d),(?=\d{3}(?!\d)))"  # a value runs to a comma, not over one in "$1,975"
_V = rf"(?P<v>{_UNCUT}+?)"
_A = rf"(?P<a>{_UNCUT}+?)"
_END = r"\s*[.!]?\s*$"
_PREP = r"(?P<p>in|at|on|from|with|for)"
# a passive change: "was reset", "has been postponed", "got rotated" (any participle after an auxiliary)
_AUX = r"(?:has\s+been|have\s+been|had\s+been|'s\s+been|was|were|got|has\s+got|is\s+being)"
_PART = r"(?:[a-z]+ed|[a-z]+en|reset|set|put|cut|shut|sent)"
_PARTICLE = r"(?:back|up|down|out|over|forward|ahead)"
# when or where a thing happens: "the standup starts at 9", "our club meets on Tuesday" (grm/policy/extract.py)
EVENT_VERB = (r"(?:starts?|begins?|ends?|finish(?:es)?|opens?|closes?|lands?|arrives?|comes?|leaves?|departs?|meets?|runs?|"
              r"expires?|happens?|takes?\s+place|is\s+held|are\s+held)")
_OTHER = r"(?:new|different|replacement|another)"  # "I got a different locker: 87"
# an active change with no old value: "the meeting moved to Friday", "the rent went up to 1450"
_TO_VERB = (r"(?:moved|changed|switched|shifted|rescheduled|postponed|pushed|bumped|reset|updated|rotated|delayed|"
            r"relocated|renamed|transferred|reassigned|slipped|slid|reverted|swapped|flipped|"
            r"raised|lowered|increased|decreased|(?:went|gone|jumped|rose|risen|fell|fallen|dropped)\s+(?:up|down|back))")
# someone acting on a subject: "IT renamed the wifi to Vega", "we switched the channel over to #x"
_ACT = (r"(?:(?:have|has|had|'ve|just|finally|already)\s+)*(?:switched|changed|moved|swapped|updated|upgraded|reset|"
        r"replaced|renamed|relocated|rescheduled|postponed|pushed|bumped|rotated|reissued|shifted|transferred|"
        r"reassigned|set|put|delayed|raised|lowered|increased|decreased|pointed)")
_TITLE = r"(?:(?:Dr|Mr|Mrs|Ms|Prof)\.?\s+)?"  # "Dr. Brandt", "Ms Kaur"
# someone putting a thing in a place: "I put the charger in my backpack", "we moved the bikes to the shed"
_PUT = r"(?:(?:have|has|had|'ve|just|finally)\s+)*(?:moved|put|relocated|hid|stashed|stored|left|keep|kept|placed)"
_INTO = r"(?:to|into|in|onto|on|under|behind|inside)"
_AT = {"to": "in", "into": "in", "onto": "on"}
# a bare subject opening a sentence ("Yoga moved to Fridays"): 1-3 words, never a pronoun (strict)
_BARE = (r"(?P<s>(?!(?:i|we|they|he|she|it|you|this|that|there|someone|everyone|everything)\b)"
         r"[A-Za-z][\w'’-]*(?:\s+(?!(?:got|gets|was|were|has|have|had|is|are|been|just|will)\b)[a-z][\w'’-]*){0,2}?)")
# when a change takes effect: "from Monday", "starting next week", "as of the 5th"
_EFFECTIVE = (r"(?:from|starting|beginning|effective|as\s+of)\s+(?:next\s+\w+|this\s+\w+|tomorrow|today|tonight|"
              rf"{WEEKDAY}|the\s+\d+\w*|\d+\w*|"
              r"(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)\w*(?:\s+\d+\w*)?)")
# words that say a value changed: a sentence with one is read clause by clause (`_cued`)
CUE = re.compile(rf"\b(?:{_EFFECTIVE}|now|these\s+days|nowadays|from\s+now\s+on|any\s*more|no\s+longer|instead|"
                  r"rather\s+than|"
                  r"new|changed|switched|moved|replaced|reset|updated|rotated|renamed|postponed|rescheduled|delayed|"
                  r"swapped|transferred|relocated|retired|left|quit|dropped|stopped|cancell?ed|actually|update|"
                  r"heads\s+up|fyi|correction|different|isn't|aren't|used\s+to|scratch\s+that|turns\s+out|"
                  r"going\s+forward|moving\s+forward|from\s+here\s+on|henceforth|took\s+over|taking\s+over|"
                  r"previously|formerly)\b", re.IGNORECASE)
# a contrast tail naming the old value: ", not A" / "instead of A" / "rather than A" (+ "any more")
_CONTRAST = re.compile(r"\s*[,;]?\s*(?:and\s+)?\b(?:not|no\s+longer|instead\s+of|rather\s+than|in\s+place\s+of|"
                       r"previously|formerly)\s+(?P<a>[^,;:()—–]+?)(?:\s+any\s*more)?\s*[.!]?\s*$|"
                       r"\s*\(\s*(?:was|previously|formerly|used\s+to\s+be|not)\s+(?P<was>[^()]+?)\s*\)\s*[.!]?\s*$",
                       re.IGNORECASE)
# time adverbs that mark the change and are no part of the claim
_ADVERB = re.compile(rf"\s*,?\s*\b(?:{_EFFECTIVE}|now|these\s+days|nowadays|from\s+now\s+on|currently|"
                     r"any\s*more|going\s+forward|moving\s+forward|from\s+here\s+on|henceforth|instead|"
                     r"as\s+of\s+(?:today|now)|today)\b", re.IGNORECASE)
# words that open a clause and are no part of its claim: "FYI the standup is at 10 now"
_OPENER = re.compile(r"^\s*(?:fyi|btw|by\s+the\s+way|actually|heads\s+up|(?:quick\s+)?update|correction|oh|ok(?:ay)?|"
                     r"also|just\s+so\s+you\s+know|scratch\s+that|(?:it\s+)?turns\s+out|never\s+mind|apparently|"
                     r"note|reminder|psa|so)\b[\s,:-]*", re.IGNORECASE)
# clauses: at ; and : (not inside a time, "9:30"), and at , / so / and / but / then
_PIECE = re.compile(r"\s*;\s*|\s*:(?!\d)\s*|\s+[—–-]+\s+|\s*[—–]\s*|\s+(?:now\s+that|since|because|ever\s+since)\s+|"
                    r"\s*,(?!(?<=\d,)\d{3}(?!\d))\s*(?:(?:so|and|but|then)\s+)?|\s+(?:so|and|but|then)\s+",
                    re.IGNORECASE)  # not at the comma of "$1,975"
# a value stops before a subordinate clause: "RT-88 after I re-registered the car" -> "RT-88"
_TRAIL = re.compile(r"\s+(?:after|because|since|when|until|while|as\s+of|so|now|these\s+days|nowadays|"
                    r"from\s+now\s+on|any\s*more|starting|beginning|effective|from\s+next|next\s+(?:week|month|year)|"
                    r"(?:this|last)\s+(?:week|month|year|night|morning|spring|summer|fall|autumn|winter)|"
                    rf"tomorrow|yesterday|today|(?:from|as\s+of)\s+{WEEKDAY}|"
                    r"for|by\s+(?:my|our|the|his|her|their)\s+(?!way\b)[a-z]+)\b.*$", re.IGNORECASE)

# (pattern, subject override, predicate override); the subject/predicate come from the match
# when the override is None. Patterns after STRICT_FROM (and every `_cued` clause) read values
# that could be anything ("the new team is nice", "my brother was sent to camp"), so their new
# value must look like one (`_value_like`) unless the sentence names the old value.
_PATTERNS: list[tuple[re.Pattern, str | None, str | None]] = [(re.compile(p, re.IGNORECASE), s, pr) for p, s, pr in [
    (rf"^{_S}\s+{_VERB}\s+from\s+{_A}\s+to\s+{_V}{_END}", None, "is"),
    (rf"^{_I_VERB}\s+{_S}\s+from\s+{_A}\s+to\s+{_V}{_END}", None, "is"),
    (rf"^{_I_VERB}\s+{_S}\s+(?:over\s+)?to\s+{_V}{_END}", None, "is"),
    (rf"^(?:[\w'’-]+(?:\s+[\w'’-]+){{0,2}}?\s+)?{_PUT}\s+{_S}\s+(?:from\s+{_A}\s+)?(?P<at>{_INTO})\s+"
     rf"(?P<v>(?:the|my|our|a|an)\s+[\w'’-]+(?:\s+[\w'’-]+){{0,3}}){_END}", None, "is"),  # a place: not strict
    (rf"^i(?:\s+have|'ve|\s+just)*\s+moved\s+from\s+{_A}\s+to\s+{_V}{_END}", "I", "live in"),
    (rf"^i(?:\s+have|'ve|\s+just)*\s+moved\s+to\s+{_V}{_END}", "I", "live in"),
    (rf"^{_S}\s+(?:is|are)\s+different\s+now\s*[:,-]?\s*(?:{_NOW_IS}\s+)?{_V}{_END}", None, "is"),
    # "the alarm code changed: it's 7310", "... changed to 7310" (never "the council changed the route")
    (rf"^{_S}\s+(?:has\s+|have\s+)?changed(?:\s*[:,;-]\s*(?:to\s+|{_NOW_IS}\s+)?|\s+(?:to|{_NOW_IS})\s+){_V}{_END}",
     None, "is"),
    (rf"^{_S}\s+(?:(?:is|are)\s+(?:no\s+longer|not)|isn't|aren't)\s+{_A}(?:\s+any\s*more)?\s*[,;:-]\s*(?:{_NOW_IS}\s+)?{_V}{_END}",
     None, "is"),
    (rf"^{_S}\s+(?:is|are)\s+{_V}\s+now\s*,?\s*(?:and\s+)?not\s+{_A}(?:\s+any\s*more)?{_END}", None, "is"),
    (rf"^{_S}\s+(?:is|are)\s+{_V}\s+instead\s+of\s+{_A}{_END}", None, "is"),
    (rf"^{_S}\s+(?:is|are)\s+now\s+{_V}{_END}", None, "is"),
    (rf"^(?P<s>{_OWNER})\s+new\s+(?P<x>(?!one\b)[\w'’-]+(?:\s+[\w'’-]+){{0,4}}?)\s+(?:is|are)\s+{_V}{_END}", None, "is"),
    (rf"^(?P<s>i|we)\s+no\s+longer\s+(?P<verb>\w+)\s+{_PREP}\s+{_A}\s*[,;:-]\s*(?:(?:{_NOW_IS}|(?P=s)\s+(?:now\s+)?(?P=verb)\s+(?P=p)|now\s+(?P=p))\s+)?(?:(?P=p)\s+)?{_V}{_END}", None, None),
    (rf"^(?P<s>i|we)\s+now\s+(?P<verb>\w+)\s+{_PREP}\s+{_V}(?:\s*,?\s*(?:instead\s+of|not)\s+(?:(?P=p)\s+)?{_A})?{_END}", None, None),
    (rf"^{_S}\s+{_AUX}\s+(?:just\s+)?{_PART}(?:\s+{_PARTICLE})?\s+(?:from\s+{_A}\s+)?(?:to|as|for)\s+{_V}{_END}",
     None, "is"),
    (rf"^{_S}\s+(?:has\s+|have\s+)?{_TO_VERB}(?:\s+{_PARTICLE})?\s+(?:to|for)\s+{_V}{_END}", None, "is"),
    (rf"^(?P<s>i|we)(?:\s+have|'ve|\s+just)?\s+(?:have|got|gotten)\s+(?:a|an)\s+{_OTHER}\s+"
     rf"(?P<x>[\w'’-]+(?:\s+[\w'’-]+){{0,3}}?)"
     rf"\s*(?:[,:]|\s+-|\s+called|\s+named)\s*{_V}{_END}", None, "is"),
    (rf"^(?:[\w'’-]+(?:\s+[\w'’-]+){{0,2}}?\s+)?(?:gave|assigned|issued|sent|handed|allocated)\s+(?P<s>me|us)\s+"
     rf"(?:a|an)\s+{_OTHER}\s+(?P<x>[\w'’-]+(?:\s+(?!(?:for|from|at|on|in|to|with)\b)[\w'’-]+){{0,3}}?)"
     rf"\s*(?:[,:]|\s+-|\s+called|\s+named)\s*{_V}{_END}",
     None, "is"),
    (rf"^(?:[\w'’-]+(?:\s+[\w'’-]+){{0,2}}?\s+)?{_ACT}\s+{_S}\s+(?:over\s+|back\s+)?(?:from\s+{_A}\s+)?"
     rf"(?:to|into|onto|as|in|under|behind)\s+{_V}{_END}",
     None, "is"),
    (rf"^(?P<s>i|we)(?:\s+have|'ve|\s+just|\s+finally)*\s+(?:traded|swapped|exchanged|replaced)\s+"
     rf"(?:(?:the|my|our)\s+)?(?P<a>(?-i:[A-Z0-9])[^,;]*?)\s+(?:for|with)\s+"
     rf"(?P<v>(?:(?:a|an|the)\s+)?(?-i:[A-Z0-9])[^,;]*?){_END}", None, "have"),  # names only
    (rf"^(?P<v>{_TITLE}(?-i:[A-Z])[\w'’.-]*(?:\s+(?-i:[A-Z])[\w'’.-]*)?)\s+(?:has\s+|just\s+)?(?:replaced|succeeded|"
     rf"took\s+over\s+from|is\s+replacing|is\s+taking\s+over\s+from)\s+(?P<a>[^,;]+?)\s+as\s+{_S}{_END}", None, "is"),
    (rf"^(?P<v>{_TITLE}(?-i:[A-Z])[\w'’.-]*(?:\s+(?-i:[A-Z])[\w'’.-]*)?)\s+(?:has\s+|just\s+)?(?:took|taken|is\s+taking)\s+"
     rf"over\s+as\s+{_S}{_END}", None, "is"),
    (rf"^{_BARE}\s+{_VERB}\s+from\s+{_A}\s+to\s+{_V}{_END}", None, "is"),
    (rf"^{_BARE}\s+(?:has\s+|have\s+)?{_TO_VERB}(?:\s+{_PARTICLE})?\s+to\s+{_V}{_END}", None, "is"),
    (rf"^{_BARE}\s+{_AUX}\s+(?:just\s+)?{_PART}(?:\s+{_PARTICLE})?\s+(?:from\s+{_A}\s+)?(?:to|as)\s+{_V}{_END}",
     None, "is"),
    (rf"^(?P<own>(?:my|our|the)\s+[\w'’-]+(?:\s+[\w'’-]+)?)\s+(?:has|have|got|just\s+got)\s+(?:a|an)\s+{_OTHER}\s+"
     rf"(?P<x>[\w'’-]+(?:\s+(?!(?:for|from|at|on|in|to|with)\b)[\w'’-]+){{0,2}}?)\s*(?:[,:]|\s+-|\s+called|\s+named)\s*"
     rf"{_V}{_END}", None, "is"),  # "my son has a new coach, Ms. Tran" -> my son's coach
    (rf"^(?P<s>i|we)(?:\s+have|'ve|\s+just|\s+finally)*\s+(?:changed|switched|swapped)\s+"
     rf"(?P<x>[a-z]+s)(?P<plural>)\s+"
     rf"(?:over\s+)?to\s+{_V}{_END}", None, "is"),  # "we switched pediatricians to Dr. Osei"
    (rf"^(?:[\w'’-]+(?:\s+[\w'’-]+){{0,2}}?\s+)?(?:traded|swapped|exchanged|replaced)\s+{_S}\s+(?:for|with)\s+"
     rf"{_V}{_END}", None, "is"),  # "IT swapped my work laptop for a MacBook"
    (rf"^new\s+(?P<x>(?!one\b)[\w'’-]+(?:\s+[\w'’-]+){{0,4}}?)\s*(?:[:=]|\s+-|\s+is|\s+are)\s*{_V}{_END}",
     None, "is"),
]]
STRICT_FROM = 12  # the index of "the|my|our new X is B": it and every pattern after it are strict
_BAD_VALUE = re.compile(r"\b(?:not|no|never|maybe|perhaps|i|you|he|she|it|we|they)\b", re.IGNORECASE)




def _clean(v: str | None) -> str | None:
    if v is None:
        return None
    v = re.sub(r"\s*\([^()]*\)\s*[.!]?\s*$", "", v.strip())  # "4410 (was 1234)": the aside is no part of it
    v = v.strip().rstrip(".!,;:").strip().strip("\"'“”‘’«»").strip()
    v = _TRAIL.sub("", v).strip() if len(v.split()) > 1 else v
    v = re.sub(r"^(?:(?:going|gone|went|goes|been)\s+(?:up|down)\s+to|(?:up|down)\s+to)\s+", "", v,
               flags=re.IGNORECASE) if len(v.split()) > 1 else v  # "Rent's going up to $950": $950
    v = re.sub(r"^(?:to|in|at|on|called|named|known\s+as)\s+", "", v, flags=re.IGNORECASE) if len(v.split()) > 1 else v
    return v or None


_IS = re.compile(r"(?<=\w)['’]s\s+(?=(?:now|not|no|on|at|in|different|changed|moved|been|being|still|also|a|an|the|"
                 r"going|happening|scheduled|set|[A-Z0-9#])\b)")


def expand(sentence: str) -> str:
    """"'s" read as "is" where no noun follows: "the party's on Saturday", "Lisa's not my
    manager" (a possessive is kept: "my daughter's teacher")."""
    return _IS.sub(" is ", sentence)


def parse_update(sentence: str, intent: str = "inferred", before: str | None = None) -> FactProposal | None:
    """The update one sentence states, or None (not an update, a question, or a value too odd).
    `before`: the sentence said just before it, whose subject an "it's B now" takes."""
    s = expand(sentence.strip())
    if not s or s.endswith("?") or len(s) > 400:
        return None
    was = m if (m := _CONTRAST.search(s)) and m["was"] else None  # "4410 (was 1234)": the old value aside
    return (_matched(s[:was.start()] if was else s, intent, _clean(was["was"]) if was else None)
            or _cued(s, intent, named_in(before or "")))


def named_in(text: str) -> str | None:
    """The last subject `text` names ("the garage door code" in "I changed the garage door code
    yesterday"); one after a preposition is an adjunct of the one before it, so the earlier is the
    subject ("the door code" in "Security changed the door code at the office")."""
    nps = list(_NP.finditer(text))
    while len(nps) > 1 and _ADJUNCT.search(text[:nps[-1].start()]):
        nps.pop()
    return nps[-1].group() if nps else None


_ADJUNCT = re.compile(r"\b(?:at|in|on|for|of|from|near|by|with|behind|outside|inside)\s+$", re.IGNORECASE)


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
        if groups.get("at"):  # a place keeps its preposition: "in my backpack" ("to the shed": "in the shed")
            new = f"{_AT.get(groups['at'].casefold(), groups['at'].casefold())} {new}"
        if i >= STRICT_FROM and not (old or replaces) and not value_like(new):
            return None
        subj = subject or (groups.get("s") or "").strip()
        if groups.get("x"):  # "the new X is B", "I have a new X, B": the subject is "the|my|our X"
            said = groups.get("s") or "the"
            owner = {"i": "my", "me": "my", "we": "our", "us": "our"}.get(said.casefold(), said)
            x = stem(groups["x"].strip().casefold()) if groups.get("plural") is not None else groups["x"].strip()
            subj = f"{groups['own']}'s {x}" if groups.get("own") else f"{owner} {x}"
        pred = predicate or f"{groups['verb'].casefold()} {groups['p'].casefold()}"
        if subj.casefold() in ("i", "we"):
            subj = "I" if subj.casefold() == "i" else "we"
        return _proposal(subj, pred, new, old or replaces or "", intent)
    return None


def _proposal(subject: str, predicate: str, value: str, replaces: str, intent: str) -> FactProposal:
    """The update's claim, its statement canonical: "My bank is Ally" read alone (the fact's graft)."""
    said = f"{subject} {predicate} {value}"
    return FactProposal(subject, predicate, value, said[0].upper() + said[1:], intent=intent, replaces=replaces)


# "it's 4418" after a clause that named the subject ("Changed the garage door code, it's 4418")
_IT = re.compile(rf"^(?:it's|it\s+is|its|it\s+now\s+is|now\s+it's|it'll\s+be|it\s+will\s+be|they're|they\s+are|"
                 rf"the\s+new\s+one(?:'s|\s+is)|use|enter|dial|try|"
                 rf"(?:it|they)\s+(?:now\s+)?{EVENT_VERB}\s+(?:at|on|in))\s+{_V}{_END}",
                 re.IGNORECASE)
# the subject a clause names: "the garage door code" in "Changed the garage door code yesterday"
_NP = re.compile(rf"\b{_OWNER}\s+[\w'’-]+(?:\s+(?!(?:yesterday|today|tomorrow|to|from|for|at|in|on|with|again|"
                 r"because|and|but|so|last|this|now|over|back|up|down|is|are|was|were|has|have|had|it|its|got|"
                 r"will|won't|can|did|does|do|went|goes|\w+ed)\b)"
                 r"[\w'’-]+){0,4}", re.IGNORECASE)
# the old value gone: "Dr. Brandt closed his practice", "Theo moved away", "I don't see Dr. Ferris
# anymore", "I dropped Comcast" (a name or a code, as said)
_GONE = re.compile(r"^(?!(?:I|We|They|He|She|It|You|This|That|There)\b)"
                   rf"(?P<z>{_TITLE}[A-Z0-9#@][\w'’.&-]*(?:\s+[A-Z0-9][\w'’.&-]*){{0,2}})\s+"
                   r"(?:(?:has|had|just|finally|recently)\s+)*(?:left|retired|quit|resigned|"
                   r"moved\s+(?:away|out|on|to\s+(?:another|a\s+new|a\s+different)\b)|"
                   r"went\s+back|passed\s+away|stepped\s+down|closed|shut|stopped|folded|is\s+gone|"
                   r"was\s+let\s+go|got\s+fired|went\s+out\s+of\s+business|no\s+longer|won't\s+work|"
                   r"doesn't\s+work|does\s+not\s+work|stopped\s+working|expired|is\s+expired|is\s+dead)\b")
_DROPPED = re.compile(r"^(?i:i|we)\s+(?i:(?:don't|do\s+not|no\s+longer|stopped|won't)\s+"
                      r"(?:see|seeing|use|using|go\s+to|"
                      r"going\s+to|visit|visiting|bank\s+with|shop\s+at|shopping\s+at)|dropped|quit|left|ditched|"
                      r"cancell?ed|stopped|"
                      r"(?:stopped|quit|no\s+longer)\s+[a-z]+ing(?:\s+[a-z]+)?\s+(?:at|to|with|from|in))"
                      r"\s+(?P<z>[A-Z0-9#@][^,;]*?)\s*$")
# I/we and a value: "we go to Dr. Sato", "I see Dr. Wu" (the fact is found by the old value)
_I_USE = re.compile(rf"^(?P<s>i|we)(?:\s+(?:am|are)\s+|'m\s+|'re\s+|(?:\s+have|'ve)\s+been\s+|\s+)(?:only\s+)?"
                    rf"(?P<verb>go\s+to|see|use|visit|"
                    rf"bank\s+with|shop\s+at|fly\s+with|work\s+with|rely\s+on|stay\s+at|staying\s+at|going\s+to|"
                    rf"seeing|using|banking\s+with|shopping\s+at|with|joined|signed\s+up\s+(?:with|at)|went\s+with|"
                    rf"chose|picked|switched\s+to|moved\s+to|go\s+with|drive|ride|own|take|attend|follow|"
                    rf"work\s+for|play\s+for|listen\s+to|read|watch|fly|support|root\s+for|study\s+at|"
                    rf"train\s+with|run\s+with|walk\s+with)\s+{_V}{_END}", re.IGNORECASE)
# "we're going to Tokyo next year" is a trip, not where we go
_PLAN = re.compile(r"\b(?:next|tomorrow|tonight|later|soon|this\s+(?:weekend|week|month|year|summer|winter|spring|"
                   r"fall|autumn)|in\s+(?:a|\d+)\s+(?:days?|weeks?|months?|years?))\b", re.IGNORECASE)
_BASE = {"going to": "go to", "seeing": "see", "using": "use", "staying at": "stay at", "banking with": "bank with",
         "shopping at": "shop at", "work for": "work at"}  # "we've been going to Zazie": one claim with "we go to Zazie"
# someone who now does a thing for me: "Oskar manages me", "Dr. Wu treats us"
_DOES_ME = re.compile(rf"^(?P<v>{_TITLE}[A-Z][\w'’.-]*(?:\s+[A-Z][\w'’.-]*)?)\s+"
                      rf"(?P<verb>[a-z]+s)\s+(?P<s>me|us){_END}")
# a clause that goes on from the one before without its own subject: "I quit X and joined Y"
_NO_SUBJECT = frozenset("the my our your a an it it's its they he she this that there so now not no i we you "
                        "i'm we're they're".split())
# a bare subject and its value in a cued clause: "swim lessons are on Saturdays (now)"
_BARE_IS = re.compile(rf"^(?P<s>(?:(?:my|our|the)\s+)?{_BARE[6:-1]})\s+(?:is|are|will\s+be|'ll\s+be|'s|is\s+going\s+to\s+be|"
                      rf"will\s+now\s+be)\s+(?:(?:now\s+)?(?:happening|taking\s+place|being\s+held|scheduled|set|planned|"
                      rf"booked|held)\s+)?(?:(?:on|at|in|for)\s+)?{_V}{_END}",
                      re.IGNORECASE)
# "we changed hotels", "I switched dentists": names the kind of thing the next clause gives
_SWITCHED = re.compile(r"^(?P<s>i|we)(?:\s+have|'ve|\s+just|\s+finally)*\s+(?:changed|switched|swapped)\s+"
                       r"(?P<x>[a-z]+s)$", re.IGNORECASE)


# "we used to meet in room 4", "the code used to be 5521": the old value, said before the new one
_USED = re.compile(r"^(?:(?P<np>(?:my|our|the)\s+[\w'’-]+(?:\s+[\w'’-]+){0,4}?)|i|we)\s+used\s+to\s+(?:be\s+)?"
                   r"(?:[a-z]+\s+(?:(?:in|at|on|with|to)\s+)?)?(?P<a>[^,;]+)$", re.IGNORECASE)


def _cued(s: str, intent: str, named: str | None = None) -> FactProposal | None:
    """A sentence with a change cue, read clause by clause (module docstring); the last clause
    holding a claim is the update. None without a cue or a claim. A clause saying the old value
    is gone ("Dr. Brandt retired") names it for a claim of I/we ("we see Dr. Sato now"); "it's B"
    takes the subject the clause before it named."""
    from grm.policy.extract import parse_clause  # extract reads updates first: imported late

    if not CUE.search(s):
        return None
    body, old = s.rstrip(" .!"), ""
    if m := _CONTRAST.search(body):
        body, old = body[:m.start()], _clean(m["a"] or m["was"]) or ""
    pieces = [piece for piece in (_OPENER.sub("", _ADVERB.sub("", x)).strip(" ,") for x in _PIECE.split(body)) if piece]
    for i in range(1, len(pieces)):
        who, first = pieces[i - 1].split()[0], pieces[i].split()[0]
        if who.casefold() in ("i", "we") and first.islower() and first not in _NO_SUBJECT:
            pieces[i] = f"{who} {pieces[i]}"
    gone = next((_clean(g["z"]) for x in pieces if (g := _GONE.match(x) or _DROPPED.match(x))), None) or ""
    if not old and (u := next((m for x in pieces if (m := _USED.match(x))), None)):
        old = _clean(u["a"]) or ""  # "X used to be A, now it's B": A is the old value, as "not A" would say
    found, kind = None, None
    for piece in pieces:
        if _USED.match(piece):
            named = named_in(piece) or named
            continue
        if m := _SWITCHED.match(piece):
            kind = f"{'my' if m['s'].casefold() == 'i' else 'our'} {stem(m['x'].casefold())}"
            continue
        p = _checked(named, "is", m["v"], old, intent) if named and (m := _IT.match(piece)) else None
        p = p or _matched(piece, intent, old)
        if p is None and (c := parse_clause(piece, intent, habits=False)) is not None and c.key[1] not in MULTI_VALUED:
            p = _checked(c.subject, c.predicate, c.value, old or (gone if c.subject.casefold() in ("i", "we") else ""),
                         intent)
        if p is None and (m := _BARE_IS.match(piece)):
            p = _checked(m["s"], "is", m["v"], old, intent)
        if p is None and (m := _I_USE.match(piece)) and not (m["verb"].casefold() == "going to" and _PLAN.search(m["v"])):
            who = "I" if m["s"].casefold() == "i" else "we"
            p = (_checked(kind, "is", m["v"], old, intent) if kind else
                 _checked(who, _BASE.get(m["verb"].casefold(), m["verb"].casefold()), m["v"], old or gone, intent))
        if p is None and (m := _DOES_ME.match(piece)):
            p = _checked("I" if m["s"] == "me" else "we", f"{m['verb']} {m['s']}", m["v"], old or gone, intent) \
                if old or gone else None  # a claim of its own only as an update of the one who left
        if p is not None and p.value.casefold() != (p.replaces or "").casefold():
            found = p
        elif nps := _NP.findall(piece):
            named = nps[-1]
    return found


def _checked(subject: str, predicate: str, value: str, old: str, intent: str) -> FactProposal | None:
    """A cued clause's claim, if its value looks like one (a name or code, or the old value is named)."""
    v = _clean(value)
    if not v or _BAD_VALUE.search(v) or len(v.split()) > 8 or not (old or value_like(v)):
        return None
    return _proposal(subject, predicate, v, old, intent)


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


def adopt(p: FactProposal, subject: str, predicate: str, old_statement: str, old_value: str) -> FactProposal:
    """`p` as the claim it updates: the superseded fact's subject and predicate (one lineage, so
    the next update and the stale-value check find it: "yoga" -> "My yoga class"), its statement
    restated (`restate`), else canonical in the old fact's words."""
    if p.key != claim_key(subject, predicate):
        said = f"{subject} {predicate} {p.value}"
        p = replace(p, subject=subject, predicate=predicate, statement=said[0].upper() + said[1:])
    return restate(p, old_statement, old_value)
