"""The answer lead: a plain question's answer started for the model, by rules for wh-questions.

Small models recall a fact far better when the answer is already begun ("Question: What is the
access code for the X vault?\\nAnswer: The access code for the X vault is") than when the answer
starts blank (issue 13: SmolLM2 4/20 plain vs 13/20 primed, same text in context). Users type
plain questions, so `answer_lead` derives the lead from the question's own words:

    What is/was the X?          -> The X is/was         (also my X -> Your X)
    What is the X called?       -> The X is called
    What N <verb>s Y?           -> The N that <verb>s Y is
    Who is/was X?               -> X is/was
    When is/was X?              -> X is/was             When was X <verb>ed? -> X was <verb>ed
    When does/did S <verb> ...? -> S <verb>s/<verb>ed
    Where is/are X?             -> X is/are in          Where does/did S <verb> (to)? -> S <verb>s (to|in)
    How many N does/did S <verb>? -> S <verb>s/<verb>ed
    How many N <verb>ed Y?      -> The number of N that <verb>ed Y was
    How many N <verb> Y?        -> The number of N that <verb> Y is
    How long/much/old/... is X? -> X is
    Which/What N <verb>s Y?     -> The N that <verb>s Y is
    Which/What N does/did S <verb> Y? -> The N S <verb>s/<verb>ed Y is/was
    Which/What N should/can/will S <verb> Y? -> The N S should/can/will <verb> Y is
    What year/month/day/time did/does S <verb> Y? -> S <verb>ed/<verb>s Y in/on/at
    In/On/At/By/For what N ...? -> the same clause, then the preposition
A question no rule covers gets no lead (None): the caller asks it plain. A question that already
starts its own answer ("...\\nAnswer: ...") is never touched. First and second person swap (my ->
your, I -> you), since the answer speaks to the asker.
"""

from __future__ import annotations

import re

SWAP = {"my": "your", "our": "your", "i": "you", "me": "you", "we": "you", "mine": "yours", "am": "are",
        "myself": "yourself", "us": "you"}
DETERMINERS = ("the", "my", "our", "your", "his", "her", "their", "its", "a", "an", "this", "that")
PRONOUNS = ("i", "we", "you", "they", "he", "she", "it")
PARTICIPLES = frozenset("born built made held sold done given taken seen written known kept left found paid won "
                        "run grown begun chosen driven lit shut cut hit set put read led fed met sent spent lent "
                        "bought brought caught taught thought told heard laid paid said shot spun struck hung "
                        "worn torn sworn drawn thrown flown shown sung rung swum drunk".split())
BE = ("is", "are", "was", "were")
PREPOSITIONS = ("to", "from", "in", "at", "on", "for", "with", "into", "by", "of")
IRREGULAR_PAST = {"leave": "left", "go": "went", "come": "came", "begin": "began", "meet": "met", "buy": "bought",
                  "sell": "sold", "take": "took", "make": "made", "get": "got", "give": "gave", "find": "found",
                  "say": "said", "see": "saw", "win": "won", "hold": "held", "run": "ran", "build": "built",
                  "send": "sent", "keep": "kept", "put": "put", "pay": "paid", "lose": "lost", "spend": "spent",
                  "grow": "grew", "write": "wrote", "become": "became", "tell": "told", "bring": "brought",
                  "have": "had", "do": "did", "be": "was", "set": "set", "cost": "cost", "fly": "flew",
                  "drive": "drove",
                  "choose": "chose", "know": "knew", "think": "thought", "teach": "taught"}
# base forms a do-question's verb is recognised by (no part-of-speech tagger in the runtime)
VERBS = frozenset("""leave live move meet sell hold keep expire renew start open close arrive begin end cost weigh
own have record employ produce need want take make get go come work play run park stay study teach visit buy pay
finish land depart launch win lose attend store contain serve carry build grow print publish ship report receive
send count list earn spend charge use happen take fly drive return retire die marry join found sign rent hire
collect export import borrow lend owe plant harvest catch bake cook eat drink wear order book reserve travel
""".split())
PAST_FORMS = frozenset(IRREGULAR_PAST.values())
AUX = {"does": "present", "do": "plural", "did": "past"}
MODALS = ("should", "can", "could", "will", "would", "must", "may", "might")
PARTICLES = frozenset("in up out off down over back away".split())
ADVERBS = frozenset("first last originally initially officially recently ever once still also already just".split())
# what the answer's head noun takes before it: "What year did X open?" -> X opened in
WHEN_NOUNS = {"year": "in", "month": "in", "decade": "in", "century": "in", "season": "in", "day": "on",
              "date": "on", "time": "at", "hour": "at"}


def answer_lead(question: str) -> str | None:
    """The start of the answer to a plain wh-question, or None where no rule applies."""
    q = question.strip()
    if "\n" in q or not q.endswith("?") or q.count("?") > 1:
        return None
    words = q[:-1].strip().split()
    if len(words) < 3:
        return None
    wh = words[0].lower().rstrip(",")
    rest = words[1:]
    if wh in ("tell", "give", "show") and rest[0].lower() == "me":  # "Tell me the label code for X?"
        if rest[1].lower() in ("what", "which", "who", "when", "where", "how"):
            return answer_lead(" ".join(rest[1:]) + "?")
        target = rest[2:] if rest[1].lower() == "about" else rest[1:]
        lead = [*_swap(target), "is"] if _subject(target) and target[0].lower() not in PRONOUNS else None
    elif wh in PREPOSITIONS:
        lead = _after_preposition(wh, rest) if len(rest) >= 3 and rest[0].lower() in ("what", "which", "how") else None
    else:
        lead = {"what": _what, "which": _which, "who": _who, "when": _when, "where": _where,
                "how": _how}.get(wh, lambda _: None)(rest)
    if not lead:
        return None
    lead = " ".join(lead)
    return lead[0].upper() + lead[1:]


_BACK = re.compile(r"\b(?:i\s+am|i'm|i've|i'd|i'll|myself|ourselves|mine|ours|my|our|me|us|we|i)\b", re.IGNORECASE)
_BACK_OF = {"i am": "you are", "i'm": "you're", "i've": "you've", "i'd": "you'd", "i'll": "you'll", "ours": "yours",
            "ourselves": "yourselves"}


def spoken_back(text: str) -> str:
    """`text` as the assistant says it back to the user: "My bank is Ally" -> "Your bank is
    Ally", "I am in Oslo" -> "You are in Oslo" ("9 am" and "the US" stay)."""
    def one(m: re.Match) -> str:
        w = m.group()
        if w == "US":
            return w
        return _BACK_OF.get(re.sub(r"\s+", " ", w.lower())) or SWAP[w.lower()]
    out = _BACK.sub(one, text)
    return out[:1].upper() + out[1:]


def _swap(words: list[str]) -> list[str]:
    return [SWAP.get(w.lower(), w) if w.lower() in SWAP else w for w in words]


def _subject(words: list[str]) -> bool:
    """Does `words` start like a noun phrase (a determiner, a pronoun or a name)?"""
    if not words:
        return False
    w = words[0]
    return w.lower() in DETERMINERS or w.lower() in SWAP or w[:1].isupper()


def _third_person(verb: str, subject: list[str]) -> str:
    """`verb` agreeing with `subject` in the present ("you leave", "your flight leaves")."""
    if [w.lower() for w in subject] in (["you"], ["they"]) or (len(subject) == 1 and subject[0].lower() == "you"):
        return verb
    if verb.endswith(("s", "sh", "ch", "x", "z", "o")):
        return verb + "es"
    if verb.endswith("y") and len(verb) > 1 and verb[-2] not in "aeiou":
        return verb[:-1] + "ies"
    return verb + "s"


def _past(verb: str) -> str:
    if verb in IRREGULAR_PAST:
        return IRREGULAR_PAST[verb]
    if verb.endswith("e"):
        return verb + "d"
    if verb.endswith("y") and len(verb) > 1 and verb[-2] not in "aeiou":
        return verb[:-1] + "ied"
    return verb + "ed"


def _inflect(aux: str, verb: str, subject: list[str]) -> str:
    return {"present": _third_person(verb, subject), "plural": verb, "past": _past(verb)}[AUX[aux]]


def _be_phrase(verb: str, rest: list[str], tail: str = "") -> list[str] | None:
    """"is the X called" -> The X is called; "is the X" -> The X is (+ tail)."""
    if not _subject(rest):
        return None
    subject = _swap(rest)
    if subject[-1].lower() in PREPOSITIONS:
        return None  # "What is the box made of?": the answer's shape is not "X is"
    if len(rest) >= 2 and rest[0].lower() in PRONOUNS and rest[1].lower().endswith("ing"):
        # "are we meeting the architects" -> You are meeting the architects (in)
        return subject[:1] + [verb] + subject[1:] + ([tail] if tail else [])
    last = subject[-1].lower()
    if last == "called" or last.endswith("ed") or last in PARTICIPLES:
        k = len(subject) - 1
        if k >= 2 and (subject[k - 1].lower() in ADVERBS or subject[k - 1].lower().endswith("ly")):
            k -= 1  # "When was the X lighthouse first lit?" -> The X lighthouse was first lit
        return subject[:k] + [verb] + subject[k:] + (["in"] if tail == "in" else [])
    for k in range(2, len(subject) - 1):  # "was X University placed in the listing" -> X University was placed in ..
        w = subject[k]
        if (w.islower() and (re.fullmatch(r"[a-z]+(ed|en)", w) or w in PARTICIPLES)
                and subject[k - 1].lower() not in DETERMINERS and not subject[k - 1].endswith(("'s", "’s"))
                and subject[k + 1].lower() in PREPOSITIONS):
            return subject[:k] + [verb] + subject[k:] + ([tail] if tail else [])
    return subject + [verb] + ([tail] if tail else [])


def _do_phrase(aux: str, rest: list[str], tail: str = "", keep_after: bool = True) -> list[str] | None:
    """"does my flight to Oslo leave" -> Your flight to Oslo leaves (the verb is the last word, or
    the last before a final preposition)."""
    if len(rest) < 2 or not (_subject(rest) or rest[0].lower() in PRONOUNS):
        return None
    prep = rest[-1].lower() if rest[-1].lower() in PREPOSITIONS else ""
    body = rest[:-1] if prep else rest
    if len(body) < 2:
        return None
    subject, verb, after = _split_clause(body)
    if not subject or not verb:
        return None
    words = _swap(subject) + [_inflect(aux, verb.lower(), _swap(subject))]
    if not keep_after:
        return words  # "How many tickets did S sell this season?" -> S sold (the number comes next)
    words += _swap(after)
    if prep:
        words.append(prep)
    elif tail and not after:
        words.append(tail)
    return words


def _split_clause(body: list[str]) -> tuple[list[str], str, list[str]]:
    """Subject, verb, the rest: a pronoun subject is one word; otherwise the verb is the first
    common verb (VERBS) after the subject's first word that does not follow a determiner, else
    the clause's last word."""
    if body[0].lower() in PRONOUNS:
        return body[:1], body[1], body[2:]
    for j in range(1, len(body)):
        w, prev = body[j], body[j - 1].lower()
        if w in VERBS and prev not in DETERMINERS and prev not in SWAP:
            return body[:j], w, body[j + 1:]
    last = body[-1]
    if len(body) >= 3 and last.isalpha() and last.islower() and body[-2].lower() not in DETERMINERS:
        return body[:-1], last, []  # a verb the list lacks: "does the station broadcast"
    return [], "", []


def _what(rest: list[str]) -> list[str] | None:
    verb = rest[0].lower()
    if verb in BE:
        return _be_phrase(verb, rest[1:])
    if verb in AUX or verb in MODALS or verb in ("kind", "type", "sort"):
        return None
    return _which(rest)


def _which(rest: list[str]) -> list[str] | None:
    """"Which/What N ..." with N one to three lower-case words, then a verb, an auxiliary or a
    modal: the answer is "The N <the clause about it> is"."""
    for j in range(1, min(4, len(rest))):
        noun, w = rest[:j], rest[j]
        if not all(n.isalpha() and n.islower() for n in noun):
            return None
        low = w.lower()
        if low in AUX or low in MODALS:
            clause = rest[j + 1:]
            if len(clause) < 2 or not (_subject(clause) or (low in MODALS and _split_modal(clause)[1])):
                return None  # a bare noun after a modal: "What extension can callers use to reach X?"
            when = WHEN_NOUNS.get(noun[-1]) if j == 1 and low in AUX else None
            if when:  # What year did the choir start singing? -> The choir started singing in
                phrase = _do_phrase(low, clause)
                return phrase + [when] if phrase and phrase[-1].lower() not in PREPOSITIONS else phrase
            if low in AUX:  # Which train does my sister take? -> The train your sister takes is
                phrase = _do_phrase(low, clause)
                return ["The", *noun, *phrase, "was" if low == "did" else "is"] if phrase else None
            subject, verb, after = _split_modal(clause)  # Which form should I sign? -> The form you should sign is
            return ["The", *noun, *_swap(subject), low, verb, *_swap(after), "is"] if verb else None
        if low in BE:
            return None  # "Which level is the car on?": the answer's shape is not "The N that is"
        if low in PAST_FORMS or (re.fullmatch(r"[a-z]+(s|ed)", low) and _verb_form(low)):
            # Which train goes to the airport? -> The train that goes to the airport is
            return ["The", *noun, "that", *_swap(rest[j:]), "was" if low.endswith("ed") else "is"]
    return None


def _split_modal(clause: list[str]) -> tuple[list[str], str, list[str]]:
    """After a modal the verb is bare: the subject runs to the first common verb (or is a pronoun)."""
    if clause[0].lower() in PRONOUNS or clause[0].lower() in SWAP:
        return clause[:1], clause[1] if len(clause) > 1 else "", clause[2:]
    if clause[0].isalpha() and clause[0].islower() and clause[0] not in DETERMINERS and len(clause) > 1:
        return clause[:1], clause[1], clause[2:]  # a bare noun: "can visitors dial ..."
    return _split_clause(clause)


def _verb_form(word: str) -> bool:
    """`word` is a common verb (VERBS) in an -s or -ed form (goes, carries, opened, stored)."""
    return any(stem in VERBS for stem in (word[:-1], word[:-2], word[:-3] + "y"))


def _after_preposition(prep: str, rest: list[str]) -> list[str] | None:
    """"In what year did the observatory open?" -> The observatory opened in; "By how many metres
    has the glacier shrunk since 1950?" -> The glacier has shrunk since 1950 by."""
    words = rest[1:]
    if rest[0].lower() == "how":
        if words[0].lower() not in ("many", "much", "long", "far"):
            return None
        words = words[1:]
    for j, w in enumerate(words):  # skip the head noun ("year", "metres") to the auxiliary
        low = w.lower()
        if low in AUX:
            phrase = _do_phrase(low, words[j + 1:])
        elif low in ("has", "have", "had") and j + 2 < len(words):
            subject, after = _perfect(words[j + 1:])
            phrase = [*_swap(subject), low if subject[0].lower() not in ("i", "we", "you") else "have", *after] \
                if subject else None
        elif low in BE:
            phrase = _be_phrase(low, words[j + 1:])
        else:
            if j >= 3:
                return None
            continue
        return phrase + [prep] if phrase and phrase[-1].lower() not in PREPOSITIONS else phrase
    return None


def _perfect(clause: list[str]) -> tuple[list[str], list[str]]:
    """"the glacier shrunk since 1950" -> (the glacier, shrunk since 1950): the participle is the
    first -ed/-en word or irregular participle after the subject's first word."""
    if not (_subject(clause) or clause[0].lower() in PRONOUNS):
        return [], []
    for j in range(1, len(clause)):
        w = clause[j]  # a capitalized word is a name ("the Linden glacier"), never the participle
        if re.fullmatch(r"[a-z]+(ed|en|wn|ung|unk)", w) or w in PARTICIPLES or w in PAST_FORMS:
            return clause[:j], clause[j:]
    return [], []


def _who(rest: list[str]) -> list[str] | None:
    verb = rest[0].lower()
    return _be_phrase(verb, rest[1:]) if verb in BE else None


def _when(rest: list[str]) -> list[str] | None:
    """No preposition after: "on" pushed a small model to a day where the answer was a time
    ("The standup is on Monday" for 9:45; bench/results/fact_reading.md)."""
    verb = rest[0].lower()
    if verb in BE:
        return _be_phrase(verb, rest[1:])
    if verb in AUX:
        return _do_phrase(verb, rest[1:])
    return None


def _where(rest: list[str]) -> list[str] | None:
    verb = rest[0].lower()
    if verb in BE:
        return _be_phrase(verb, rest[1:], "in")
    if verb in AUX:
        return _do_phrase(verb, rest[1:], "in")  # "Where does my sister live?" -> Your sister lives in
    return None


def _how(rest: list[str]) -> list[str] | None:
    first = rest[0].lower().rstrip(",")
    if first == "many" or first == "much":
        # How many N does/did S <verb> ...? -> S <verb>s/<verb>ed
        for j, w in enumerate(rest[1:], 1):
            if w.lower() in ("has", "have") and j >= 2 and first == "many":
                # How many N has S <participle> (in) ...? -> S has <participle> (in)
                subject, after = _perfect(rest[j + 1:])
                if not subject:
                    return None
                keep = after[:2] if len(after) > 1 and after[1].lower() in PARTICLES else after[:1]
                return [*_swap(subject), w.lower() if subject[0].lower() not in ("i", "we", "you") else "have", *keep]
            if w.lower() in AUX:
                if j < 2 and first == "many":
                    return None
                if rest[-1].lower() in PREPOSITIONS:
                    return None
                return _do_phrase(w.lower(), rest[j + 1:], keep_after=False)
            if w.lower() in BE and j >= 2 and first == "many":
                return None  # "How many people are there in X?": no lead
            if (re.fullmatch(r"[a-z]+ed", w) or w in PAST_FORMS) and j >= 2:
                # How many N <verb>ed Y? -> The number of N that <verb>ed Y was
                return ["The", "number", "of"] + rest[1:j] + ["that"] + _swap(rest[j:]) + ["was"]
            if w in VERBS and j >= 2 and first == "many" and rest[j - 1].lower() not in DETERMINERS:
                # How many N <verb> Y? -> The number of N that <verb> Y is
                return ["The", "number", "of"] + rest[1:j] + ["that"] + _swap(rest[j:]) + ["is"]
        return None
    if first in ("long", "much", "old", "tall", "far", "big", "high", "deep", "wide", "heavy", "large", "often"):
        for j, w in enumerate(rest[1:], 1):
            if w.lower() in BE:
                return _be_phrase(w.lower(), rest[j + 1:])
    return None
