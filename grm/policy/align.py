"""Updates read against what memory holds, when no phrasing rule reads them.

grm/policy/updates.py reads an update from its words alone ("the launch slipped from May to
June"), so it reads only the shapes it was written for; on a split its author never saw it read
4 of 12 (bench/results/fidelity.md, FRESH-3). People say a change in endless ways ("I've started
going to Marco for haircuts instead of Lena", "The council issued a new parking permit, number
9047", "The bike lives in the shed now"), but each names either the fact's old value or words of
its subject, and a new value of the same kind as the old one. So a turn none of the rules read as
an update is read against each live fact (`aligned`):

1. The turn is a statement (not a question, not a conditional or a plan) carrying a change cue
   (updates.py's: now, these days, new, instead, retired, switched, "from Monday" ...).
2. A fact is *named* when its old value is in the turn ("Lena"; a Name by one of its words,
   "Priya" for "Priya Raman"), *touched* when a content word of its subject is (plural-folded:
   "Piano lessons" touches "My piano lesson"; a claim of I/we by its object's words: "beans" for
   "I buy my coffee beans from Blue Door"), when the turn holds one code of its old code's shape
   ("TP1361" for "TP1357"), or, at the lowest rank, through a word of the same everyday subject
   (`_FAMILY`: "my teeth" for the dentist, "ported my number" for the phone plan). A Name is
   named by a word of its own, not by a generic head ("Street" names no "Elm Street"). The one
   named fact is taken; else the best-touched fact the turn holds a new value for: the one
   whose statement's words the turn says most ("moved my loan due date" is the loan's, not "our
   wedding date"'s), then by the share of its subject's (a tie: none; a code of the old code's
   shape breaks one). A fact of where someone lives or stays is touched by a move ("My sister
   moved to Valencia"; "we moved!" for "I live at ..."). A touched fact needs its new value linked to the
   subject's words (a be or change verb, the fact's own verb, "new", "I'm", right beside it, or
   a change verb before them and "to" before it: "upped my pills to 10 mg"), so "My sister now
   works at Globex" does not update "my sister is Alice"; one touched through a related word
   needs the value right after "to", "is", "with" ... (`_ANCHOR`) or as the doer opening the
   sentence ("Marcus Feld is handling my taxes").
3. The new value is the one span in the turn of the old value's kind (of a value of several
   kinds, "on Tuesdays at 4pm", the kind the turn says a new one of), not the old value and not
   a word of the subject: a street address ("307 Birchwood Ave", changed whole), a time ("10
   am"), a day or date ("Thursdays", "the 21st"), a number
   or code ("9047", "RT-8823", "KX19 PLM"; a number's new value is a number), a Name ("Ms.
   Ortiz", "Mint Mobile"; "a ThinkPad X1 Carbon" is a Name holding a code, so are "a 2014
   Honda Civic" and "5th Avenue"; Names joined by "of
   the", "and", "over on" are one, "Klara and the Sun"; a sentence's first
   word that reads as an adverb or verb, "Honestly", "Joined", is none; in a turn typed all
   lowercase, what follows a verb or preposition: "im on a macbook air now"), or a place ("in
   the shed"; places said one after another are one, "on the hook in the garage") for a value
   said as one. Several spans: the ones right after "to", "is", "now", ":", "at", "with" ... ;
   still several, or none: nothing is read.
4. The proposal is the fact's own claim with its value's span swapped ("stored in the basement"
   -> "stored in the shed"; a unit said with the new amount said once, "$1425/month" for "$1350 a
   month"); it names the old value only when the turn did, so the conflict rules
   (grm/policy/rules.py, rule 7) let an unnamed one replace only a fact it ranks as high as.

Plain values ("oolong", "really nice") have no kind to find again, and a turn touching no word of
the subject, naming no old value and saying no word of its everyday subject ("we got the
hatchback in red instead" for "my car is a Volvo") is not read: those stay as said, in the
turn's evidence graft.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from grm.english.dates import DATE, TIME, WEEKDAY
from grm.english.words import stem
from grm.policy.fact import FUNCTION_WORDS, MULTI_VALUED, Fact, FactProposal, stems
from grm.policy.updates import CUE, EVENT_VERB

# a street address: "12 Alder Road", "307 Birchwood Ave" (its number alone is no code to change)
_ADDRESS = re.compile(r"\b\d+[a-z]?\s+(?:[\w'’-]+\s+){1,3}?(?:street|st|road|rd|avenue|ave|lane|ln|drive|dr|boulevard|blvd|"
                      r"way|court|ct|place|pl|terrace|close|crescent|square|parkway|pkwy|highway|hwy)\b\.?", re.IGNORECASE)
# a code: "$1,975", "Marigold!2024" (a symbol inside a word is part of it); one in capitals goes on
# over a short group of capitals: "KX19 PLM", "SW1A 1AA"
_CODE = re.compile(r"(?<![\w#@$£€!*&+=-])[#@$£€]?(?:[\w-]|[!@#%&*+=](?=\w))*\d(?:[\w./-]|,\d{3}(?!\d)|[!@#%&*+=](?=\w))*"
                   r"(?<![.-])"
                   r"(?:(?<=[A-Z0-9])\s[A-Z0-9]{2,4}\b(?![.'’-]\w))?")
# a Name, with its title, ordinal ("5th Avenue") or model year ("a 2014 Honda Civic") before it
_NAME = re.compile(r"(?:\b(?:Dr|Mr|Mrs|Ms|Prof)\.?\s+|\b\d{1,3}(?:st|nd|rd|th)\s+(?=[A-Z])"
                   r"|(?:(?<=\ba )|(?<=\ban )|(?<=\bmy )|(?<=\bour )|(?<=\bthe ))(?:19|20)\d{2}\s+(?=[A-Z]))?"
                   r"\b[A-Z][\w'’&-]*(?:\s+(?:of\s+|de\s+|van\s+|&\s+)?[A-Z][\w'’&-]*)*")
_PLACE = re.compile(r"\b(?P<p>in|at|on|under|behind|inside|into|near|by|to)\s+"
                    r"(?P<np>(?:(?:the|my|our|a|an)\s+[a-z]|(?-i:[A-Z]))[\w'’-]*"  # "the shed", "Rosa's cafe"
                    r"(?:\s+(?!(?:now|today|these|from|this|starting|instead|again|for|since|in|on|at|under|behind|by|near|to|with|"
                    r"of|and|but|so)\b)[a-z][\w'’-]*)?)",
                    re.IGNORECASE)
_PLACE_OF = {"into": "in", "to": "in"}  # "moved it to the shed" is a place said "in the shed"
# right before a new value: "... to Thursdays", "is Ms. Ortiz", "now 4418", "number: 87", "with Ally"
_ANCHOR = re.compile(r"(?:\bto|\bis|\bare|['’]s|\bnow|:|\bat|\bwith|\bby|\bas|\bcalled|\bnamed|\bnumber|\bon|\bfor|"
                     r"\bgoing\s+to|\bsee|\buse|\bnew|\bpay(?:s|ing)?|\bcosts?|\bcharges?)\s*$", re.IGNORECASE)
_NOT_A_CLAIM = re.compile(r"\?|\b(?:if|maybe|might|perhaps|whether|thinking\s+(?:of|about)|considering|planning|plan\s+to|"
                          r"want\s+to|would\s+like|should\s+i|could\s+i|not\s+sure|hope|wish)\b", re.IGNORECASE)
# a cue that the old value is gone, not just "new": a turn naming an old value but no word of its
# subject needs one ("Lena introduced me to her new boss, Karl" is no update of "my hairdresser")
_GONE = re.compile(r"\b(?:instead|rather\s+than|no\s+longer|any\s*more|now|these\s+days|nowadays|from\s+now\s+on|"
                   r"(?:going|moving)\s+forward|henceforth|took\s+over|taking\s+over|"
                   r"retired|left|quit|dropped|ditched|traded|cancell?ed|got\s+rid\s+of|replaced|switched|moved|closed|stopped|sold|"
                   r"gone|not)\b", re.IGNORECASE)
# what links a touched subject to the new value said beside it: be, a change, "new", a label, or
# (by kind) an event's verb or a place's: "the storage locker is 402", "Swimming class shifted to
# Wednesdays", "the shuttle goes at 8:15", "the bike lives in the shed"; never "my sister now works
# at Globex" (a claim of another predicate, not the fact's)
_CHANGED = (r"(?:(?:mov|shift|switch|bump|push|delay|reset|rotat|renam|relocat|reassign|transferr?|reschedul|postpon|"
            r"updat|replac|reissu|issu|assign|upgrad|chang|swapp?|port|rebook|renew|rais|increas|decreas|lower|upp)"
            r"(?:e|es|ed|ing)?|(?:went|gone|go)\s+(?:up|down|to)|(?:goes|going)\s+(?:up|down)|rose|dropped|fell|"
            r"doubled|doubling|halved|halving|dropping|rising|falling|cutting|reduc(?:e|es|ed|ing)|climbed|climbing|jumped|"
            # a word that is a noun as often ("the doubles", "eye drops", "Niagara Falls") changes only with a "to" or
            # "by" after it: "payment drops to $1965", "I cut my deposit to $650"
            r"(?:doubles?|halves|drops?|rises?|falls?|cuts?|climbs?|jumps?)(?=(?:\s+[\w$£€'’-]+){0,4}?\s+(?:to|by)\b))")
# ("goes to" is a habit, "my dog goes to Greenfield", not a change; "went to $12.99" is one)
_LINK = re.compile(rf"\b(?:is|are|was|were|be|been|being|becomes?|became|new|different|number|no|code|i['’]?m|we['’]?re|"
                   rf"{_CHANGED})\b"
                   r"|['’]s\b|:", re.IGNORECASE)
_LINK_OF = {
    "time": re.compile(rf"\b(?:{EVENT_VERB}|goes|go|went)\b", re.IGNORECASE),
    "day": re.compile(rf"\b(?:{EVENT_VERB}|goes|go|went)\b", re.IGNORECASE),
    "place": re.compile(r"\b(?:lives?|living|stays?|sits?|kept|keeps?|keep|parks?|parked|stored|stores?|goes|go|went|"
                        r"meets?|hangs?|put|moved|moves?)\b", re.IGNORECASE),
}
# in a turn typed all lowercase, a Name said after a verb or preposition, up to three words: "on a
# macbook air now", "switched to geico", "with tele2 these days"
_LOWER_NAME = re.compile(r"\b(?:to|is|are|now|with|on|at|using|use|uses|got|have|has|called|named|over\s+to)\s+"
                         r"(?:(?:a|an|the)\s+)?(?P<np>(?!(?:my|our|your|his|her|their|it|this|that)\b)[a-z0-9][\w'’&.-]*"
                         r"(?:\s+(?!(?:now|these|from|this|starting|instead|again|for|since|today|yesterday|and|but|so|"
                         r"because|as|at|in|on|with|to|too|any|anymore|though|btw|lol|is|was)\b)[a-z0-9][\w'’&.-]*){0,2})")
_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
_JOINERS = frozenset("of the and de van on at in over".split())
_JOINS = re.compile(rf"\s+(?:(?:{'|'.join(_JOINERS)})\s+){{1,3}}")  # between the words of one Name
_OPENS = re.compile(r"(?:^|[.!?;:]\s*|\n\s*)$")  # a sentence starts here
# a sentence's first word read as an adverb or a verb, no Name: "Honestly", "Going", "Joined" ("Alfred",
# "Mildred" stay Names)
_VERBISH = re.compile(r"[A-Z][a-z]{2,}ly|[A-Z][a-z]+ing|[A-Z][a-z]{2,}(?<!fr|dr)ed")
MAX_WORDS = 60  # a longer turn (a pasted text) is no plain update
# capitalized words that are no Name: sentence openers, pronouns, days (found as days)
_NOT_NAMES = frozenset("i i'm i've i'll we we're we've they the a an my our your it it's this that there so and but "
                       "from starting since as of when then also just hi hey ok okay fyi btw heads update yes no "
                       "well oh actually she he his her him its their them you me us please thanks "
                       # past verbs opening a sentence ("Quit boulder barn.")
                       "quit left got sold bought took put gave made found "
                       # and words opening a sentence before its subject ("Now driving a ...", "In 2019 ...")
                       "now today yesterday tonight in on at after before".split())


def kinds(value: str) -> list[str]:
    """The kinds of value `value` holds, the first what it is (`kind`): "on Tuesdays at 4pm" is
    a time and a day."""
    if _EMAIL.search(value):
        return ["email"]  # whole: its name and domain are no Name or code of their own
    out = [k for k, p in (("address", _ADDRESS), ("time", TIME), ("day", DATE)) if p.search(value)]
    names = _names(value)
    if _CODE.search(value) and not any(b - a > len(c) for a, b in names for c in _CODE.findall(value[a:b])):
        out.append("code")  # "RT-8823", "room 4"; "a ThinkPad X1 Carbon" is a Name holding a code
    elif names:
        out.append("name")
    if not out and _PLACE.search(value):
        out.append("place")
    return out


def kind(value: str) -> str | None:
    """What kind of value `value` is: email, address, time, day, code, name, place (a value said with its
    preposition and a noun, "stored in the basement") or None (plain words)."""
    return next(iter(kinds(value)), None)


def _kind_in(value: str, text: str) -> str | None:
    """The kind of `value` the turn says a value of: "lessons are on thursdays now, same time"
    changes the day of "on Tuesdays at 4pm", not its time."""
    ks = kinds(value)
    for k in ks:
        core = _core(value, k)
        if core and any(not _said(value[core[0]:core[1]], v, k) for *_, v in _spans(text, k)):
            return k
    return next(iter(ks), None)


def _names(text: str) -> list[tuple[int, int]]:
    """Spans of Names in `text`, sentence openers and pronouns dropped from their front, and a
    sentence's first word when it reads as an adverb or a verb ("Honestly", "Going", "Joined")."""
    out = []
    for m in _NAME.finditer(text):
        start, words = m.start(), m.group().split()
        while words and (words[0].casefold().strip("'’") in _NOT_NAMES or (
                start == m.start() and _OPENS.search(text[:start]) and _VERBISH.fullmatch(words[0]))):
            start = text.index(words[0], start) + len(words[0])
            words = words[1:]
        if words and not DATE.fullmatch(" ".join(words)):
            start = text.index(words[0], start)
            if out and _JOINS.fullmatch(text[out[-1][1]:start]):
                start = out.pop()[0]  # "Klara and the Sun", "Dr. Abernathy over on Cedar Street": one Name
            out.append((start, m.end()))
    return out


def _spans(text: str, k: str) -> list[tuple[int, int, str]]:
    """(start, end, value) of every span of kind `k` in `text`."""
    if k == "name" and not any(ch.isupper() for ch in text):  # typed lowercase: a Name is what follows
        return [(m.start("np"), m.end("np"), m["np"]) for m in _LOWER_NAME.finditer(text)]  # "im on a macbook air now"
    if k == "name":
        return [(a, b, text[a:b]) for a, b in _names(text)]
    if k == "place":  # places said one after another are one: "on the hook in the garage"
        out: list[tuple[int, int, str]] = []
        for m in _PLACE.finditer(text):
            said = f"{_PLACE_OF.get(m['p'].casefold(), m['p'].casefold())} {m['np']}"
            if out and not text[out[-1][1]:m.start()].strip():
                out[-1] = (out[-1][0], m.end(), f"{out[-1][2]} {m.group()}")
            else:
                out.append((m.start(), m.end(), said))
        return out
    pattern = {"address": _ADDRESS, "time": TIME, "day": DATE, "code": _CODE, "email": _EMAIL}[k]
    out = [(m.start(), m.end(), m.group()) for m in pattern.finditer(text)]
    if k == "code":  # a time's or a date's digits are not a code
        taken = [(m.start(), m.end()) for p in (TIME, DATE) for m in p.finditer(text)]
        out = [s for s in out if not any(a <= s[0] < b for a, b in taken)]
    return out


def _core(value: str, k: str) -> tuple[int, int] | None:
    """Where in a stored value its kind's span is ("with Tello" -> "Tello"); a value of several
    Names is one from the first to the last ("the FitZone on Carver Street": a new Name replaces
    "FitZone on Carver Street")."""
    spans = _spans(value, k)
    if len(spans) > 1 and k == "name":
        return spans[0][0], spans[-1][1]
    return (spans[0][0], spans[0][1]) if len(spans) == 1 else None


def _content(text: str) -> frozenset[str]:
    return frozenset(w for w in stems(text) if w not in FUNCTION_WORDS)


# everyday subjects people name by a related word: "my teeth" for the dentist, "ported my number"
# for the phone plan, "my taxes" for the accountant (plural-folded words; a turn touching no word
# of a fact's subject touches it through one of these, at the lowest rank)
_FAMILY = [frozenset(f.split()) for f in (
    "phone mobile cell carrier sim ported porting",
    "dentist dental teeth tooth orthodontist",
    "hairdresser hairstylist stylist barber haircut hair salon",
    "accountant accounting tax bookkeeper",
    "doctor physician gp gps clinic checkup",
    "vet veterinarian veterinary",
    "insurer insurance insured",
    "bank banking account",
    "internet broadband isp",
    "gym workout fitness",
    "trainer training coach coaching",
    "coffee bean espresso roaster",
    "pharmacy pharmacist prescription meds medication",
    "landlord rent lease",
    "electricity electric power energy utility supplier",
    "address home live house apartment flat",
    "dose dosage mg milligram pill tablet",
    "job employer company work workplace office",
    "therapist therapy counselor counsellor",
    "lawyer attorney solicitor",
    "physio physiotherapist physiotherapy",
    "babysitter sitter nanny childcare",
    "laptop computer notebook",
    "mechanic repair",
    "manager boss supervisor report",
    "grocery groceries supermarket",
    "wifi router network password pw",
    "motorcycle motorbike bike",
    "flight airline depart departure",
)]


def related(word: str) -> list[str]:
    """The other words of the everyday subjects `word` (plural-folded) belongs to (`_FAMILY`):
    "boss" -> manager, report, supervisor. How the runtime asks memory in the words it was told."""
    return sorted({w for fam in _FAMILY if word in fam for w in fam} - {word})


_MOVES = re.compile(r"\b(?:moved|moving|moves|relocated|relocating)\b", re.IGNORECASE)
_RESIDES = frozenset({"live", "stay", "based"})  # a fact of where someone is: a move changes it
_BY_FAMILY = 0.1  # the rank of a fact touched only through `_FAMILY`
_SAME_SHAPE = 0.01  # added to the rank of a touched fact whose old code's shape the turn holds once


def _anchored(text: str, value: str) -> bool:
    """`value` said right after an anchor word ("switched to Tele2") or as the doer opening a
    sentence ("Marcus Feld is handling my taxes"): how a fact touched only by family gets its value."""
    at = text.find(value)
    return bool(_ANCHOR.search(text[:at]) or (_OPENS.search(text[:at]) and _DOER.match(text[at + len(value):])))


_DOER = re.compile(r"\s+(?:is|are|will|has|now|\w+s)\b")  # a verb after a sentence's opening Name


def _families(words: frozenset[str]) -> frozenset[int]:
    return frozenset(i for i, fam in enumerate(_FAMILY) if fam & words)


def _topic(f: Fact) -> frozenset[str]:
    """The words a turn touches a fact by: its subject's, or for a claim of I/we its object's
    ("coffee", "bean" of "I buy my coffee beans from Blue Door")."""
    return _content(f.subject) or _content(f.predicate) - _content(f.predicate.split()[0])


_TITLE_WORDS = ("dr", "mr", "mrs", "ms", "prof")
# the common noun a Name ends in: what kind of place it is, not which ("Cedar Street", "Riverside Clinic")
_HEADS = frozenset("street st road rd avenue ave lane ln drive dr boulevard blvd way place court square park center "
                   "centre clinic hospital school college university academy club cafe café restaurant bar hotel inn "
                   "bank company co inc ltd llc group team studio salon shop store market gym hall house building "
                   "tower station airport office church library museum city town village county".split())


def _said(value: str, text: str, k: str | None = None) -> bool:
    """The value's words are in the turn ("Dr. Brandt" is said by "Brandt" too); a Name's by any
    of its words of 3 letters or more, plural-folded ("Priya" says "Priya Raman", "the Ghosts"
    says "the Brooks Ghost", "civic" says "a Honda Civic")."""
    words = [w for w in re.findall(r"[\w-]+", value.casefold()) if w not in FUNCTION_WORDS and w not in _TITLE_WORDS]
    if k == "name":  # by a word of its Names, not a generic head ("Street" says no "Elm Street")
        names = {w for a, b in _names(value) for w in re.findall(r"[\w-]+", value[a:b].casefold())} - _JOINERS or set(words)
        said = _content(text)
        return any(len(w) >= 3 and w in names and w not in _HEADS and stem(w) in said for w in words)
    return bool(words) and all(re.search(rf"(?<![\w-]){re.escape(w)}(?![\w-])", text, re.IGNORECASE) for w in words)


def _shape(code: str) -> str:
    """A code's shape: letter runs as A, digit runs as 9 ("TP1357" and "TP1361" are "A9",
    "B-12" and "C-07" "A-9"); a plain number or amount has none (too many are alike: "$650" is
    no new "$2180")."""
    shape = re.sub(r"\d+", "9", re.sub(r"[^\W\d_]+", "A", code))
    return "" if re.fullmatch(r"[$£€]?9(?:[.,]9)*", shape) else shape


_NUMBER = re.compile(r"[$£€]?\d")


def _be(predicate: str) -> bool:
    return predicate.casefold() in ("is", "are", "was", "were")


def _linked(text: str, fact: Fact, k: str, a: int, b: int) -> bool:
    """Between a word of the fact's subject and the span text[a:b] is a link (`_LINK`, the kind's
    verbs, or a verb of the fact's own statement: "meets" for "the book club meets at ...")."""
    topic = _topic(fact)
    own = _content(fact.statement) - topic - _content(fact.value)
    link = _LINK_OF.get(k)
    if k in ("time", "day") and re.search(rf"\b{_CHANGED}\b", text, re.IGNORECASE):
        return True  # "The council changed the route, so recycling gets picked up on Tuesdays"
    if re.search(rf"\b{_CHANGED}\b[^.!?;]*\bto\s+$", text[:a], re.IGNORECASE):
        return True  # "Doctor upped my blood pressure pills to 10 mg"
    for m in re.finditer(r"[\w'’-]+", text):
        if not _content(m.group()) & topic:
            continue
        if (re.search(rf"\b{_CHANGED}\s+(?:(?:my|our|the)\s+)?$", text[:m.start()], re.IGNORECASE)
                and m.end() <= a and _ANCHOR.search(text[:a])):
            return True  # the subject changed, then its new value named: "switched therapists, seeing someone named X"
        gap = text[m.end():a] if m.end() <= a else text[b:m.start()]
        if (not _content(gap) or _LINK.search(gap) or (link and link.search(gap)) or _content(gap) & own
                or re.search(r"\bnew\s+(?:[\w'’-]+\s+){0,3}$", text[:m.start()], re.IGNORECASE)):
            return True
    return False


def _new_value(text: str, fact: Fact, k: str, core: tuple[int, int], named: bool) -> str | None:
    """The one span of kind `k` in the turn that is neither the fact's old value nor a word of
    its subject (several: those right after an anchor word), or None. A fact found by its subject
    alone needs the span linked to it (`_linked`)."""
    old = fact.value[core[0]:core[1]]
    subject = _topic(fact)
    found = []
    for a, b, v in _spans(text, k):
        if _said(old, v, k) or _said(v, old, k) or (_content(v) and _content(v) <= subject):
            continue
        if k == "code" and _NUMBER.match(old) and not _NUMBER.match(v):
            continue  # a number's new value is a number: "Tele2" is no locker number for "318", "REFINANCED" no "$2180"
        if not named and not _linked(text, fact, k, a, b):
            continue
        found.append((a, v))
    if len(found) > 1:
        found = [(a, v) for a, v in found if _ANCHOR.search(text[:a])]
    if len({v.casefold() for _, v in found}) != 1:
        return None
    return found[0][1]


def may_update(text: str) -> bool:
    """Whether `aligned` could read `text` at all (a short statement with a change cue): the
    caller need not list the facts for a turn that cannot be an update."""
    text = text.strip()
    aside = re.sub(r"\([^()]*\)", " ", text)  # "(kitchen fire??)" asks nothing of the claim around it
    return bool(text) and len(text.split()) <= MAX_WORDS and not _NOT_A_CLAIM.search(aside) and bool(
        CUE.search(text) or _GONE.search(text) or re.search(rf"\b{_CHANGED}\b", text, re.IGNORECASE))


def aligned(text: str, facts: Iterable[Fact], intent: str = "inferred", claimed: bool = False,
            disputed: frozenset[str | None] = frozenset()) -> FactProposal | None:
    """The update `text` makes to one of `facts` (live, single-valued, mutable ones are read),
    as a proposal in that fact's words, or None (module docstring). `claimed`: the rules read the
    turn as an update of a subject memory does not hold ("I switched my bank from Chase to
    Ally"), so a fact it only names the old value of ("my credit card is Chase") is not it.
    `disputed`: kinds of old values the rules read that memory does not hold: a fact whose value
    is of one of them is left to the review ("from Citi to Ally" where memory holds Chase)."""
    if not may_update(text):
        return None
    text = text.strip()
    mine = _content(text)
    named, touched = [], []
    for f in facts:
        if f.state != "active" or not f.mutable or f.key[1] in MULTI_VALUED:
            continue
        k = _kind_in(f.value, text)
        core = _core(f.value, k) if k else None
        if core is None:
            continue
        topic = _topic(f)
        share = len(topic & mine) / max(1, len(topic))
        old = f.value[core[0]:core[1]]
        if _said(old, text, k):
            if share > 0 or (_GONE.search(text) and not claimed):
                named.append((f, k, core))
            continue
        shaped = k == "code" and bool(_shape(old)) and sum(_shape(v) == _shape(old) for *_, v in _spans(text, k)) == 1
        moved = bool(_MOVES.search(text)) and bool(_content(f.predicate) & _RESIDES)
        if (share > 0 or (moved and not topic)) and (_be(f.predicate) or _content(f.predicate) & mine or moved):
            # "My sister moved to Valencia" for "my sister lives in Porto", "we moved!" for "I live at ..."
            # "lives in" is read only where the turn says "live"; a code of the old one's shape
            # ranks it above a fact touched alike ("the new plate is RD23 WTA" for "my car's registration")
            # ranked by how many words of its statement (less the old value) the turn says, then by the
            # share of its subject's: "moved my loan due date" is the loan's, not "our wedding date"'s
            said = (_content(f.statement) - _content(old)) & mine
            touched.append((len(said) + share / 2 + _SAME_SHAPE * shaped, f, k, core))
        elif shaped:
            touched.append((0.5, f, k, core))  # "They rebooked me onto TP1361" for "my flight is TP1357"
        elif _families(topic) & _families(mine):
            touched.append((_BY_FAMILY, f, k, core))  # "ported my number over to Tele2" for "my phone plan"
    if len(named) == 1:
        f, k, core = named[0]
        new = _new_value(text, f, k, core, True)
    elif not named and touched:  # the best touched fact the turn holds a new value for; a tie: none
        found = [(share, f, k, core, v) for share, f, k, core in touched
                 if (v := _new_value(text, f, k, core, not _topic(f) & mine)) is not None
                 and (share > _BY_FAMILY or _anchored(text, v))]
        found.sort(key=lambda t: -t[0])
        if not found or (len(found) > 1 and found[1][0] == found[0][0]):
            return None
        _, f, k, core, new = found[0]
    else:
        return None
    if new is None or kind(f.value) in disputed:
        return None
    if k == "code" and f.value[core[0]] in "$£€" and new[:1].isdigit():
        new = f.value[core[0]] + new  # "$11.99" -> "$12.99" where the turn said "12.99"
    if k == "day":  # "wednesdays" -> "Wednesdays"; before "evenings": "Wednesday evenings"
        new = re.sub(rf"\b{WEEKDAY}\b", lambda m: m[0].capitalize(), new,
                     flags=re.IGNORECASE)
        if re.match(r"\s+(?:mornings?|afternoons?|evenings?|nights?)\b", f.value[core[1]:], re.IGNORECASE):
            new = re.sub(r"(?<=day)s\b", "", new, flags=re.IGNORECASE)
    before = re.sub(r"\b(an?)\s+$", lambda m: ("an " if new[:1].casefold() in "aeiou" else "a ") if new[:1] else m[0],
                    f.value[:core[0]])  # "a Pixel" -> "an iphone"
    after = f.value[core[1]:]
    if k == "code":  # "$1425/month" for "$1350 a month", "40mg" for "20 mg ...": the unit is said once
        new = re.sub(r"/(?:month|mo|week|wk|year|yr|day|hour|hr)$", "", new) if re.match(r"\s+(?:a|an|per)\s", after) else new
        after = re.sub(rf"^\s*{re.escape(m[0])}\b", "", after) if (m := re.search(r"[a-z]+$", new, re.I)) else after
    value = before + new + after if k != "place" else f.value[:core[0]] + new
    # the fact's own words, its value changed ("My son's practice starts at 6:15"), where it says its value once
    said = f.statement.replace(f.value, value) if f.statement.count(f.value) == 1 else f"{f.subject} {f.predicate} {value}"
    return FactProposal(f.subject, f.predicate, value, said[0].upper() + said[1:], intent=intent,
                        replaces=f.value if named else "")
