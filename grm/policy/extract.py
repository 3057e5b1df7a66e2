"""Extraction: proposing facts from ordinary turns.

`Extractor` is the interface; `RuleExtractor` is the deterministic one GRM ships (no model).
A model-backed extractor (the runtime's: it can ask the frozen model to list facts) implements
the same one-method Protocol. Whatever proposes, proposals enter with intent `inferred` (an
extractor may say `observed` for weaker ones) and go through the same conflict rules
(`grm.policy.rules`), so they never overrule what a user asserted.

The rules, applied clause by clause (a clause ends at . ! ? ; or a new line, or at "and"/"but"
before a new "my"/"I"/"the"), skipping questions, negations and conditionals:

    my|our X is|are Y          -> (my X, is, Y)           "my locker code is 1234"
    call me N / I am called N  -> (my name, is, N)
    I am N years old           -> (my age, is, N)
    I live in P                -> (i, live in, P)
    I like|love Y              -> (i, like|love, Y)       multi-valued: never a contradiction
    I|we meet|work|... in|at P -> (I|we, meet in, P)      a short list of verbs of place
    I|we V (O) in|at|with Name -> (I|we, V O at, Name)    "we eat lunch at Luigi's" (a Name only)
    I|we V O from Name         -> (I|we, V O from, Name)  "I buy my coffee beans from Blue Door" (O: 1-3 words)
    the X is|are Y | Name is Y -> (the X, is, Y)          only when Y is a number, a Name ("the
                                                          Grand Plaza") or a code ("#general")
    the X is in|on|at Y        -> (the X, is, Y)          the same, "the launch is in May"
    the X is under|behind|in.. the Y  -> (the X, is, under the Y)  a place, its preposition kept
    the|my|our X starts|meets|lands|opens.. at|on|in Y -> (X, is, Y)  Y a number or a Name
                                                          ("our book club meets on Tuesday")
    the|my|our X meets|opens.. at|in the|my Y -> (X, is, at the Y)  a place ("meets at the library")
    the|my|our X is|gets <participle> on|at|in Y -> (X, is, Y)   Y a value ("is collected on Fridays")
    the|my|our X is <participle> under|in.. the Y -> (X, is, under the Y)  a place ("is hidden under the mat")
    I|we have a|my N on|at|every Y -> (my N, is, Y)     Y a value ("I have a pottery class on Thursdays")
    I|we set my|our X at|to Y  -> (my X, is, Y)           Y a number ("I set my grocery budget at $600")
    I|we pay Y for X           -> (I, pay for X, Y)       Y an amount ("I pay $11.99 a month for Spotify")
    my|our X lives|works|stays in|at Y -> (my X, lives in, Y)  where someone is ("my sister Priya lives
                                                          in Leeds"), Y a Name or a place
    my|our X V-s (prep) Y      -> (my X, V prep, Y)       a habit, last: "my dog goes to Greenfield Vets",
    I|we V (prep) Y                                       "my gym costs $45 a month", "I drive a Honda Civic";
                                                          Y a Name in its first three words (for my X a
                                                          number too); no past, no verb of thought or saying
    the X at|of|for my Y is Z  -> (the X at my Y, is, Z)  "the gate code at my building is 2580"

A value may be a day with its part of the day ("Thursday evenings").

A sentence that states a plain-words update ("the launch slipped from May to June") is read by
grm/policy/updates.py instead: one proposal whose `replaces` names the old value.

A proposal's statement is the claim alone ("my locker code is 1234", without the chat around
it): it is what the fact's graft reads. `canonical(p)` writes a proposal back as a sentence these
rules read to the same claim; folding relies on that to measure whether a digest kept its facts.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Protocol, runtime_checkable

from grm.english.dates import TIME
from grm.policy.fact import MAX_FIELD_CHARS, MULTI_VALUED, FactProposal, norm, value_like
from grm.policy.updates import EVENT_VERB, expand, parse_update

MAX_VALUE_CHARS = 200
MAX_SUBJECT_WORDS = 8

# a period ends a sentence or clause before a space (or the end), not inside a number (3.5) or an
# address (jen.morales@outlook.com), nor after a title ("Dr. Okafor")
_TITLES = "".join(rf"(?<!\b{t})" for t in ("Dr", "Mr", "Mrs", "Ms", "St", "Prof", "Jr", "Sr", "Mt"))
# ("3.5", "ann@x.org", "Marigold!2024" are not ends)
_SENTENCE = re.compile(r"[!?](?![^\s!?])|\n|" + _TITLES + r"\.(?=\s)")
_CLAUSE = re.compile(r"[!?](?![^\s!?])|[;\n]|" + _TITLES + r"\.(?=\s|$)|,?\s+(?:and|but)\s+(?=(?:my|our|i|the)\b)",
                     re.IGNORECASE)
_POSSESSIVE = re.compile(r"\b(?P<s>(?:my|our|(?-i:[A-Z])[\w-]*['’]s)\s+\w[\w'’ -]{0,80}?)\s+(?P<p>is|are)\s+(?P<v>.+)",
                         re.IGNORECASE)
_HEAD_OF = re.compile(r"\s*(?:the|my|our)\s+[\w'’-]+(?:\s+[\w'’-]+){0,2}\s+(?:at|of|for|in|on)\s+", re.IGNORECASE)
_NAME = re.compile(r"\b(?:call me|i am called|i'm called)\s+(?P<v>.+)", re.IGNORECASE)
_AGE = re.compile(r"\bi(?:\s+am|'m)\s+(?P<v>\d{1,3})\s+years?\s+old\b", re.IGNORECASE)
_LIVE = re.compile(r"\bi\s+live\s+in\s+(?P<v>.+)", re.IGNORECASE)
# "we meet in room 4", "I work at Globex": one verb, then where
_USUALLY = r"(?:(?:usually|always|normally|often|still|mostly|currently)\s+)?"  # "we usually meet at the Cafe"
_WHERE = re.compile(rf"^(?P<s>i|we)\s+{_USUALLY}(?P<verb>[a-z]+)\s+(?P<p>in|at)\s+(?P<v>.+)", re.IGNORECASE)
_WHERE_VERBS = frozenset("meet work park train study sit shop stay eat practise practice rehearse gather".split())
# "we eat lunch at Luigi's", "I get coffee at Blue Bottle": a verb, one object word, then a Name
# "I buy my coffee beans from Blue Door Roasters": an object of up to three words, then where from
_DOING = re.compile(rf"^(?P<s>i|we)\s+{_USUALLY}(?P<verb>[a-z]+)(?:\s+(?P<obj>(?:(?:my|our|the)\s+)?[a-z]+(?:\s+[a-z]+){{0,2}}?))?"
                    r"\s+(?:(?P<p>in|at|with)|(?<=[a-z]\s)(?<!\b(?:me|us)\s)(?P<from>from))\s+(?P<v>.+)$", re.IGNORECASE)
_NOT_DOING = frozenset("am are was were be been is do did does don't didn't never not can could will would should "
                       "might must have had has just also arrived landed".split())
# "the launch is in May", "the party is on Friday": the value after the preposition
_WHEN = re.compile(r"^(?:in|on|at)\s+(?P<v>.+)", re.IGNORECASE)
# "the standup starts at 9:30", "our book club meets on Tuesday": when or where a thing happens
_EVENT = re.compile(rf"^(?P<s>(?:my|our|the)\s+[\w'’-]+(?:\s+[\w'’-]+){{0,4}}?)\s+{EVENT_VERB}\s+(?P<p>at|on|in)\s+(?P<v>.+)$",
                    re.IGNORECASE)
# "the recycling is collected on Friday mornings", "the bins are emptied at 7": when, said passively
_PASSIVE = re.compile(r"^(?P<s>(?:my|our|the)\s+[\w'’-]+(?:\s+[\w'’-]+){0,4}?)\s+(?:is|are|gets?)\s+(?:usually\s+)?"
                      r"(?:[a-z]+ed|held|done|run|seen|taken|kept)(?:\s+(?:up|out|off))?\s+(?:on|at|in|every)\s+(?P<v>.+)$",
                      re.IGNORECASE)
# "the spare key is hidden under the flowerpot": where a thing is, said passively
_PASSIVE_PLACE = re.compile(r"^(?P<s>(?:my|our|the)\s+[\w'’-]+(?:\s+[\w'’-]+){0,4}?)\s+(?:is|are)\s+(?:usually\s+|always\s+)?"
                            r"(?:[a-z]+ed|hidden|kept|hung|left|put)\s+(?P<v>.+)$", re.IGNORECASE)
# a place said with its preposition: "under the mat", "next to the door", "in the top drawer"
_PLACE = re.compile(r"^(?:under|underneath|behind|beside|inside|next\s+to|near|above|below|in|on|at)\s+"
                    r"(?:the|a|an|my|our)\s+[\w'’-]+(?:\s+[\w'’-]+){0,2}$", re.IGNORECASE)
# "my sister Priya lives in Leeds", "my brother works at Globex": where someone (not I/we) is
_THEIR_PLACE = re.compile(r"^(?P<s>(?:my|our)\s+[\w'’-]+(?:\s+[\w'’-]+){0,3}?)\s+(?P<verb>lives|works|stays|studies|is\s+based)"
                          r"\s+(?P<p>in|at)\s+(?P<v>.+)$", re.IGNORECASE)
# "I have a pottery class on Thursdays", "we have our team meeting at 10": when a thing of mine is
_HAVE_ON = re.compile(r"^(?P<s>i|we)\s+(?:usually\s+|always\s+)?have\s+(?:a|an|my|our)\s+"
                      r"(?P<n>(?!(?:lot|lots|bit|few|couple|ton|feeling|chance|day|week|night)\b)[a-z][\w'’-]*"
                      r"(?:\s+[a-z][\w'’-]*){0,2}?)\s+(?P<p>on|at|every)\s+(?P<v>.+)$", re.IGNORECASE)
# "I set my grocery budget at $600", "we set our thermostat to 19": a setting of mine
_SET = re.compile(r"^(?P<s>i|we)\s+(?:have\s+)?(?:set|keep|kept)\s+(?P<o>(?:my|our)\s+[a-z][\w'’-]*(?:\s+[a-z][\w'’-]*){0,3}?)"
                  r"\s+(?:at|to)\s+(?P<v>.+)$", re.IGNORECASE)
# "I pay $11.99 a month for Spotify": what I pay for a thing
_PAY = re.compile(r"^(?P<s>i|we)\s+(?:now\s+|currently\s+)?pay\s+(?P<v>[$£€]?\d[\d,.]*(?:\s+[a-z]+){0,3}?)\s+for\s+"
                  r"(?P<o>(?:my|our|the)?\s*[\w'’-]+(?:\s+[\w'’-]+){0,2})$", re.IGNORECASE)
# "my dog goes to Greenfield Animal Hospital", "my gym membership costs $45 a month", "I drive a
# silver Honda Civic": a habit of mine said with a present verb (`_habit`)
_HABIT_OF = re.compile(r"^(?:i|we|(?:my|our)\s+[\w'’-]+(?:\s+[\w'’-]+){0,3}?)\s+", re.IGNORECASE)
_HABIT_PREP = frozenset("to at from with by on in for".split())
_HABIT_ADVERB = frozenset("usually always currently still".split())
_NOT_HABIT = frozenset("think thinks know knows guess believe believes feel feels hope hopes wish want wants need needs "
                       "mean means say says tell tells suppose reckon bet doubt hear hears remember "
                       "remembers forget forgets like likes love loves hate hates seem seems look looks sound sounds "
                       "miss misses is was has does "
                       # a past is no habit: "I left Telia for Tele2"
                       "left got went took made bought sold had came saw met gave told found ran paid sent spent kept "
                       "brought thought felt won lost began wrote drove flew ate put set quit heard knew became chose "
                       "switched".split()) | _NOT_DOING
_PART_OF_DAY = re.compile(r"[A-Z][a-z]+s?\s+(?:mornings?|afternoons?|evenings?|nights?|lunchtimes?)")  # "Thursday evenings"
_LIKE = re.compile(r"\bi\s+(?P<p>like|love)\s+(?P<v>.+)", re.IGNORECASE)
_GENERIC = re.compile(r"(?P<s>\S.{0,80}?)\s+(?P<be>is|are)\s+(?P<v>.+)", re.IGNORECASE)
_WHEN_SAID = re.compile(r"\s*,?\s+(?:now|these\s+days|nowadays|any\s*more|from\s+now\s+on|for\s+now)$", re.IGNORECASE)
_CALLED = re.compile(r"^(?:called|named|known\s+as)\s+", re.IGNORECASE)
# where a value ends and the next clause of the same sentence begins: a second predicate of the
# same subject ("with Geico and costs $112 a month") or a clause of its own after a comma ("Dr.
# Lena Moss, I see her every other Wednesday"); the value is what comes before
_NEXT_CLAUSE = re.compile(r"\s+and\s+(?=(?:is|are|was|has|have|costs?|takes?|pays?|gets?|runs?|meets?|starts?|ends?|"
                          r"lives?|works?|goes?|charges?|comes?|opens?|closes?)\b)"
                          r"|,\s+(?:and\s+)?(?=(?:i|we|he|she|they|it)\s+[a-z])", re.IGNORECASE)
_SKIP_START = ("if ", "when ", "whether ", "what ", "who ", "where ", "how ", "why ", "which ",
               "do ", "does ", "is ", "are ", "maybe ", "perhaps ", "unless ")
_NEGATION = ("not ", "no ", "no longer ", "never ", "n't ")


@runtime_checkable
class Extractor(Protocol):
    """Proposes facts found in one turn. Called by `PolicyMemory.observe` after each ordinary
    (non-command) turn; must not write anything itself."""

    def propose(self, text: str, evidence_id: str, now: float) -> list[FactProposal]: ...


def _clean_value(v: str) -> str | None:
    v = _NEXT_CLAUSE.split(v, maxsplit=1)[0]  # "Geico and costs $112 a month" is "Geico"
    v = v.strip().rstrip(".!,;:").strip().strip("\"'“”‘’«»").strip()
    v = _CALLED.sub("", v) if len(v.split()) > 1 else v  # "called Orion" is "Orion"
    v = _WHEN_SAID.sub("", v).strip().rstrip(",") if len(v.split()) > 1 else v  # "green tea now" is "green tea"
    if not v or len(v) > MAX_VALUE_CHARS or v.casefold().startswith(_NEGATION):
        return None
    return v


def _is_name(v: str) -> bool:
    ws = v.split()
    return 0 < len(ws) <= 4 and all(w[0].isupper() for w in ws)


def _is_number(v: str) -> bool:
    return len(v) <= 40 and len(v.split()) <= 3 and any(ch.isdigit() for ch in v)


def _is_value(v: str) -> bool:
    """A value the generic rules take: a number, a Name ("the Grand Plaza" too) or a code (#general)."""
    bare = re.sub(r"^(?:the|a|an)\s+", "", v.strip())
    return (_is_number(v) or _is_name(bare) or TIME.fullmatch(bare) is not None or bool(_PART_OF_DAY.fullmatch(bare))
            or (len(v) <= 40 and " " not in v and any(ch in "#@_/" for ch in v)))


# a value said with an adjunct after it: "8:30 on school nights", "March 14 at 3pm"
_HEAD_THEN = re.compile(r"^(?P<head>\S+(?:\s+\S+){0,2}?)\s+(?:on|at|in|for|every|from|with)\s+\S", re.IGNORECASE)


def _valued(v: str) -> bool:
    """A value the generic rules take (`_is_value`), or one followed by an adjunct phrase."""
    return _is_value(v) or bool(not _WHEN.match(v) and (m := _HEAD_THEN.match(v)) and _is_value(m["head"]))


def clauses(text: str) -> list[str]:
    """Declarative clauses of `text` (questions dropped)."""
    out = []
    pos = 0
    for m in _CLAUSE.finditer(text + "\n"):
        clause = text[pos:m.start()].strip()
        question = m.group(0) == "?"
        pos = m.end()
        if clause and not question:
            out.append(clause)
    return out


def _subject_ok(s: str) -> bool:
    return 0 < len(s.split()) <= MAX_SUBJECT_WORDS and len(s) <= MAX_FIELD_CHARS


def parse_clause(clause: str, intent: str = "inferred", habits: bool = True) -> FactProposal | None:
    """The one claim a clause makes under the rules above, or None. `habits`: read a habit of
    mine too (`_habit`; the update reader has its own "we use X now")."""
    low = norm(clause)
    if not low or low.startswith(_SKIP_START):
        return None

    def make(subject: str, predicate: str, value: str) -> FactProposal | None:
        v = _clean_value(value)
        if v is None or not _subject_ok(subject):
            return None
        subject = subject.strip()
        said = value.strip().rstrip(".!,;:").strip()  # "is called Heron": the value is Heron, the words stay
        kept = said if _CALLED.match(said) and said.endswith(v) else v
        return FactProposal(subject, predicate, v, f"{subject} {predicate} {kept}", intent=intent)

    if m := _NAME.search(clause):
        return make("my name", "is", m["v"]) if _is_name(m["v"].strip().rstrip(".!")) else None
    if m := _AGE.search(clause):
        return make("my age", "is", m["v"])
    if m := _POSSESSIVE.search(clause):
        head = _HEAD_OF.fullmatch(clause[:m.start("s")])  # "The gate code at my apartment complex is 2580"
        return make(head[0] + m["s"] if head else m["s"], m["p"].casefold(), m["v"])
    if m := _LIVE.search(clause):
        return make("I", "live in", m["v"])
    if (m := _WHERE.match(clause.strip())) and m["verb"].casefold() in _WHERE_VERBS:
        v = _clean_value(m["v"])
        if v is not None and len(v.split()) <= 5:
            return make("I" if m["s"].casefold() == "i" else "we", f"{m['verb'].casefold()} {m['p'].casefold()}", v)
    if ((m := _DOING.match(clause.strip())) and not {m["verb"].casefold(), *(m["obj"] or "").casefold().split()} & _NOT_DOING
            and (m["obj"] or not m["from"])):  # "from" only after an object: "I get my meds from CVS"
        v = _clean_value(m["v"])
        if v is not None and _is_name(v):
            verb = " ".join(w.casefold() for w in (m["verb"], m["obj"], m["p"] or m["from"]) if w)
            return make("I" if m["s"].casefold() == "i" else "we", verb, v)
    if m := _LIKE.search(clause):
        return make("I", m["p"].casefold(), m["v"])
    if (h := _HAVE_ON.match(clause.strip())) and (v := _clean_value(h["v"])) is not None and _valued(v):
        whose = "my" if h["s"].casefold() == "i" else "our"
        p = make(f"{whose} {h['n']}", "is", h["v"])  # "I have a pottery class on Thursdays": my pottery class
        said = f"{whose.capitalize()} {h['n']} is {h['p'].casefold()} {p.value}" if p else ""
        return None if p is None else replace(p, statement=said)
    if m := _PAY.match(clause.strip().rstrip(".!")):
        p = make("I" if m["s"].casefold() == "i" else "we", f"pay for {m['o'].strip()}", m["v"])
        return None if p is None else replace(p, statement=clause.strip().rstrip(".!"))  # as said
    if (t := _SET.match(clause.strip())) and _is_number(_clean_value(t["v"]) or ""):
        return make(t["o"], "is", t["v"])  # "I set my grocery budget at $600": my grocery budget is $600
    if (m := _THEIR_PLACE.match(clause.strip())) and (_is_name(_clean_value(m["v"]) or "")
                                                       or _PLACE.match(f"{m['p']} {m['v'].strip().rstrip('.!')}")):
        verb = "is based" if m["verb"].casefold().startswith("is") else m["verb"].casefold()
        return make(m["s"], f"{verb} {m['p'].casefold()}", m["v"])
    if (m := _EVENT.match(clause.strip())) and _is_value(m["v"].strip().rstrip(".!")):
        p = make(m["s"], "is", m["v"])  # "the standup starts at 9": when it is; the statement as said
        return None if p is None else replace(p, statement=clause.strip().rstrip(".!"))
    if (w := _PASSIVE.match(clause.strip())) and value_like(w["v"]):
        p = make(w["s"], "is", w["v"])  # "the recycling is collected on Fridays": when; the statement as said
        return None if p is None else replace(p, statement=clause.strip().rstrip(".!"))
    if (w := _PASSIVE_PLACE.match(clause.strip())) and _PLACE.match(w["v"].strip().rstrip(".!")):
        p = make(w["s"], "is", w["v"])  # "the spare key is hidden under the flowerpot": where; as said
        return None if p is None else replace(p, statement=clause.strip().rstrip(".!"))
    if m and _PLACE.match(f"{m['p']} {m['v'].strip().rstrip('.!')}"):
        p = make(m["s"], "is", f"{m['p'].casefold()} {m['v']}")  # "the book club meets at the library": where
        return None if p is None else replace(p, statement=clause.strip().rstrip(".!"))
    if m := _GENERIC.fullmatch(clause.strip()):  # the predicate is "is" for "are" too; the statement as said
        s, v, be = m["s"].strip(), _clean_value(m["v"]), m["be"].casefold()
        subject_ok = s.casefold().startswith("the ") or _is_name(s)
        if v is not None and subject_ok and _valued(v):
            p = make(s, "is", v)
            return None if p is None else replace(p, statement=f"{p.subject} {be} {v}")
        when = _WHEN.match(v or "")
        if when and subject_ok and _is_value(when["v"]):
            p = make(s, "is", when["v"])  # the value without its preposition
            return None if p is None else replace(p, statement=f"{p.subject} {be} {v}")
        if v is not None and subject_ok and _PLACE.match(v):
            p = make(s, "is", v)  # "the spare key is under the mat": the place, its preposition kept
            return None if p is None else replace(p, statement=f"{p.subject} {be} {v}")
    if habits and (h := _habit(clause.strip().rstrip(".!"))):
        p = make(*h)
        return None if p is None else replace(p, statement=clause.strip().rstrip(".!"))  # as said
    return None


def _habit(clause: str) -> tuple[str, str, str] | None:
    """(subject, verb and its preposition, value) of a habit of mine (`_HABIT_OF`): my X with a
    present verb in -s ("costs", "goes to"), I/we with a bare one ("drive"), not a verb of thought
    or saying; the value a Name within its first three words (for my X a number too): "my dog goes
    to the park" is no fact to find again, "I think Anna is nice" no habit."""
    words = clause.split()
    mine = words[:1] and words[0].casefold() in ("my", "our")
    for i in range(2 if mine else 1, min(len(words) - 1, 6)):
        if not _HABIT_OF.fullmatch(" ".join(words[:i]) + " "):
            break
        j = i + (words[i].casefold() in _HABIT_ADVERB)
        verb = words[j].casefold() if j < len(words) else ""
        if not verb.isalpha() or verb in _NOT_HABIT or verb.endswith(("ed", "ing")) or mine != (
                verb.endswith("s") and not verb.endswith("ss")):
            continue
        k = j + 1 + (j + 1 < len(words) and words[j + 1].casefold() in _HABIT_PREP)
        value = " ".join(words[k:])
        head = words[k:k + 3]
        if 0 < len(words) - k <= 8 and any(w[:1].isupper() or (mine and any(ch.isdigit() for ch in w)) for w in head):
            who = " ".join(words[:i])
            return {"i": "I", "we": "we"}.get(who.casefold(), who), " ".join(words[j:k]).casefold(), value
    return None


def sentences(text: str) -> list[str]:
    """`text` cut at sentence ends (. ! ? new line; not inside a number or after a title)."""
    out, pos = [], 0
    for m in _SENTENCE.finditer(text + "\n"):
        if text[pos:m.start()].strip():
            out.append(text[pos:m.end()].strip())
        pos = m.end()
    return out


def claims_of(text: str, intent: str, updates: bool = True) -> list[FactProposal | None]:
    """Each sentence's plain-words update (grm/policy/updates.py) if it states one (`updates`),
    else its clauses' claims."""
    out: list[FactProposal | None] = []
    before = None
    for sentence in sentences(text):
        update = parse_update(sentence, intent, before) if updates else None  # "I changed the gate code. It's 4410 now."
        out.extend([update] if update is not None else [parse_clause(c, intent) for c in clauses(expand(sentence))])
        before = sentence
    return out


def parse_statement(text: str, intent: str = "inferred", updates: bool = True) -> list[FactProposal]:
    """Every claim in `text`, one per clause (or per sentence, for an update the rules read:
    `updates`); of a repeated single-valued (subject, predicate) only the first."""
    seen: set[tuple[str, ...]] = set()
    out = []
    for p in claims_of(text, intent, updates):
        if p is None:
            continue
        ident = p.key + ((norm(p.value),) if p.key[1] in MULTI_VALUED else ())
        if ident not in seen:
            seen.add(ident)
            out.append(p)
    return out


def canonical(p: FactProposal) -> str:
    """The claim as one sentence the rules read back to the same (subject, predicate, value)."""
    subject = "I" if norm(p.subject) == "i" else p.subject
    return f"{subject} {p.predicate} {p.value}."


class RuleExtractor:
    """The deterministic extractor (rules in the module docstring)."""

    name = "rule"  # evidence names the path a fact came by: "extract:rule"

    def __init__(self, intent: str = "inferred", updates: bool = True) -> None:
        self.intent = intent  # "inferred", or "observed" for a more cautious deployment
        self.updates = updates  # read plain-words updates by the rules (grm/policy/updates.py)

    def propose(self, text: str, evidence_id: str, now: float) -> list[FactProposal]:
        return parse_statement(text, self.intent, self.updates)


class NoExtractor:
    """Reads nothing from a plain turn (RuntimeConfig.rules "off"): facts come from memory commands
    (grm/policy/grammar.py), and updates from the model where `--extractor model` asks it."""

    name = "none"

    def propose(self, text: str, evidence_id: str, now: float) -> list[FactProposal]:
        return []
