"""The answer lead: a plain question's answer started for the model, by rules for wh-questions.

Small models recall a fact far better when the answer is already begun ("Question: What is the
access code for the X vault?\\nAnswer: The access code for the X vault is") than when the answer
starts blank (issue 13: SmolLM2 4/20 plain vs 13/20 primed, same text in context). Users type
plain questions, so `answer_lead` derives the lead from the question's own words:

    What is/was the X?          -> The X is/was         (also my X -> Your X; What's X? alike)
    What is the X called?       -> The X is called
    What time/day/date is X?    -> X is at/on/on
    What N <verb>s Y?           -> The N that <verb>s Y is
    What do/does/did S <verb> (out)? -> S <verb>s/<verb>ed (out)          (not think/do/feel...)
    Who is/was X?               -> X is/was
    Who do/does/did S <verb> Y? -> S <verb>s/<verb>ed   Who does S report to? -> S reports to
    When is/was X?              -> X is/was             When was X <verb>ed? -> X was <verb>ed
    When does/did S <verb> ...? -> S <verb>s/<verb>ed
    Where is/are X?             -> X is/are in          Where does/did S <verb> (to)? -> S <verb>s (to|in)
    Where was S <participle> in/at/on Y? -> In/At/On Y, S was <participle>   (any other phrase: None)
    How many/much N do/does/did S <verb>? -> S <verb>/<verb>s/<verb>ed    (do: "tickets for X cost")
    How many N can S <verb>?    -> S can <verb>
    How many N <verb>ed Y?      -> The number of N that <verb>ed Y was
    How many N <verb> Y?        -> The number of N that <verb> Y is    (have visited Y: the same)
    How many/much/far/long has S <participle>? -> S has <participle>    (long: and the rest)
    How long/much/old/... is X? -> X is          (", in metres" at the end dropped; How far is X from Y? -> X is)
    How much is/are S <participle> (prep)? -> S is/are <participle> (prep)   How much is S worth? -> S is worth
    How many N (of M) were/are <participle> Y? -> The number of N (of M) <participle> Y was/is
    How long/often/far/... does/did S <verb>? -> S <verb>s/<verb>ed
    Which/What N <verb>s Y?     -> The N that <verb>s Y is           (any of VERBS; N may hold adjectives)
    Which/What N does/did S <verb> Y? -> The N S <verb>s/<verb>ed Y is/was   (do: a bare plural S too)
    Which/What N is/was <participle> Y? -> The N <participle> Y is/was    (What year was S built? -> S was built in)
    Which/What N should/can/will S <verb> Y? -> The N S should/can/will <verb> Y is   (plural N: are)
    What year/month/day/time did/does S <verb> Y? -> S <verb>ed/<verb>s Y in/on/at
    In/On/At/By/For what N (PP) ...? -> the same clause, then the preposition (and N where it names
                                  its value: "At what number on Elm Road does X stand?" -> X stands at number)
    Tell/Give/Show me the X?    -> The X is
    Tell me / Can you tell me / Do you know / Remind me + wh...? -> the rule for the question
                                  asked ("where the X ranks" -> Where does the X rank?)
A question no rule covers gets no lead (None): the caller asks it plain. A question that already
starts its own answer ("...\\nAnswer: ...") is never touched. First and second person swap (my ->
your, I -> you), since the answer speaks to the asker. The words the rules read by (word classes,
common verbs and their forms) are in grm/english/.
"""

from __future__ import annotations

import re

from grm.english.verbs import (ADVERBS, AUX, PARTICIPLES, PARTICLES, PAST_FORMS, VERBS, base_form, inflect,
                               is_participle, is_plural, is_verb_form)
from grm.english.person import SWAP
from grm.english.words import BE, DETERMINERS, MODALS, PREPOSITIONS, PRONOUNS

# head nouns of a subject a verb-like word after them belongs to ("my sister start work at ...")
PEOPLE = frozenset("""sister brother mother father mum mom dad wife husband son daughter friend boss partner cousin
aunt uncle neighbour neighbor kid kids child children parents grandma grandpa family team""".split())
# nouns said before their value: "stands at number 12", "leaves from platform 4"
LABEL_NOUNS = frozenset("""number page platform gate floor room row channel exit aisle level seat chapter track lane
pier berth bay door unit suite stall booth table court stand pitch box locker route line junction""".split())
# labels a question asks the value of ("Which extension ...?"): the label nouns, and "extension"
ASKED_LABELS = LABEL_NOUNS | {"extension"}
MEASURES = ("long", "much", "old", "tall", "far", "big", "high", "deep", "wide", "heavy", "large", "often")
CLAUSE_WORDS = ("when", "if", "while", "because", "although", "whereas", "unless")
# a head noun naming a property of the next one: "What size shoes do I wear?" is no "The size shoes ..."
PROPERTY_NOUNS = ("size", "colour", "color", "brand", "make", "model", "kind", "type", "sort", "number", "style")
# verbs whose object is no value to name: "What does my brother do?", "What did you think of it?"
NO_OBJECT_ANSWER = frozenset("do think feel look seem happen become go come".split())
# a request wrapped round a question: "Can you tell me where ...?" is read as "Tell me where ...?"
REQUEST = re.compile(r"^(?:please\s+)?(?:(?:can|could|would|will)\s+you\s+(?:please\s+)?(?:tell|remind)\s+me|"
                     r"do\s+you\s+(?:know|remember)(?=\s+(?:what|which|who|when|where|how)\b)|"
                     r"remind\s+me|please\s+tell\s+me)\b,?\s*", re.IGNORECASE)
CONTRACTED = re.compile(r"^(what|who|where|when)['’]s\b", re.IGNORECASE)
# what the answer's head noun takes before it: "What year did X open?" -> X opened in
# prepositions of a phrase a where-answer can open with ("In the 2024 survey, X was ranked"); "by the
# kings" can't: "Where was the treaty signed by the kings?" gets no lead rather than a guessed "in"
FRONTED = ("in", "at", "on", "during", "for")
# a unit said after a comma at the question's end: "How far is X from Y, in metres?" asks "How far is X from Y?"
UNIT_TAIL = re.compile(r",\s*in\s+[a-z]+(?:\s+[a-z]+){0,2}\s*\?$")
WHEN_NOUNS = {"year": "in", "month": "in", "decade": "in", "century": "in", "season": "in", "day": "on",
              "date": "on", "time": "at", "hour": "at"}


def answer_lead(question: str) -> str | None:
    """The start of the answer to a plain wh-question, or None where no rule applies."""
    q = question.strip()
    if "\n" in q or not q.endswith("?") or q.count("?") > 1:
        return None
    q = CONTRACTED.sub(r"\1 is", REQUEST.sub("Tell me ", q))  # "What's X?" -> What is X?
    q = UNIT_TAIL.sub("?", q)
    words = q[:-1].strip().split()
    if len(words) < 3:
        return None
    wh = words[0].lower().rstrip(",")
    rest = words[1:]
    if wh in ("tell", "give", "show") and rest[0].lower().rstrip(",") == "me":  # "Tell me the label code for X?"
        if rest[1].lower() in ("what", "which", "who", "when", "where", "how"):
            # "Tell me where the X ranks?" -> Where does the X rank?; "Tell me which train goes ..." as it is
            lead = answer_lead(" ".join(rest[1:]) + "?")
            asked = _asked(rest[1:])
            return lead or (answer_lead(" ".join(asked) + "?") if asked else None)
        if len(rest) < 3:
            return None
        target = rest[2:] if rest[1].lower() == "about" else rest[1:]
        lead = [*_swap(target), "is"] if _subject(target) and target[0].lower() not in PRONOUNS | {"a", "an"} \
            else None  # "Tell me a joke?" asks no value
    elif wh in PREPOSITIONS:
        lead = _after_preposition(wh, rest) if len(rest) >= 3 and rest[0].lower() in ("what", "which", "how") else None
    else:
        lead = {"what": _what, "which": _which, "who": _who, "when": _when, "where": _where,
                "how": _how}.get(wh, lambda _: None)(rest)
    if not lead:
        return None
    lead = " ".join(lead)
    return lead[0].upper() + lead[1:]


def asked_label(question: str) -> str | None:
    """The label a Which/What question asks the value of, with the words before it ("What flight
    number does X operate?" -> "flight number", "Which internal extension reaches X?" -> "internal
    extension", "Which room of the X Hotel ...?" -> "room"), or None: no label noun (ASKED_LABELS)
    within its first three words, or a bare "number" ("What number opens the X vault?": many texts
    say "number" before some other value)."""
    words = question.strip().rstrip("?").split()
    if len(words) < 3 or words[0].lower() not in ("which", "what"):
        return None
    label = None
    for j in range(1, min(4, len(words))):
        if not _plain_word(words[j]):
            break
        if words[j] in ASKED_LABELS and words[1:j + 1] != ["number"]:
            label = " ".join(words[1:j + 1])  # the longest: "seat number", not "seat"
    return label


def _swap(words: list[str]) -> list[str]:
    return [SWAP.get(w.lower(), w) if w.lower() in SWAP else w for w in words]


def _subject(words: list[str]) -> bool:
    """Does `words` start like a noun phrase (a determiner, a pronoun or a name)?"""
    if not words:
        return False
    w = words[0]
    return w.lower() in DETERMINERS or w.lower() in SWAP or w[:1].isupper()


def _inner_participle(subject: list[str]) -> int:
    """Where a participle with a prepositional phrase after it sits inside `subject` (0: none):
    "X University placed in the listing" -> 2; never right after a determiner or possessive."""
    for k in range(1, len(subject) - 1):
        w = subject[k]
        if (w.islower() and is_participle(w) and subject[k - 1].lower() not in DETERMINERS
                and not subject[k - 1].endswith(("'s", "’s")) and subject[k + 1].lower() in PREPOSITIONS):
            return k
    return 0


def _fronted(verb: str, clause: list[str], k: int) -> list[str] | None:
    """"was the X school ranked in the 2024 survey" (participle at k) -> In the 2024 survey, the X
    school was ranked: the answer (a place or a rank) then comes last. None where the phrase is
    no setting ("signed by the kings") or holds a clause."""
    subject, phrase = clause[:k], clause[k + 1:]
    if (not _subject(subject) or phrase[0].lower() not in FRONTED or len(phrase) < 2
            or phrase[1].lower() in PREPOSITIONS or phrase[-1].lower() in PREPOSITIONS
            or any(w.lower() in CLAUSE_WORDS for w in phrase)):
        return None
    return [*_swap(phrase[:-1]), _swap(phrase[-1:])[0] + ",", *_swap(subject), verb, clause[k]]


def _be_phrase(verb: str, rest: list[str], tail: str = "") -> list[str] | None:
    """"is the X called" -> The X is called; "is the X" -> The X is (+ tail)."""
    if not _subject(rest):
        return None
    subject = _swap(rest)
    if subject[-1].lower() in PREPOSITIONS:
        return None  # "What is the box made of?": the answer's shape is not "X is"
    if any(w.lower() in CLAUSE_WORDS for w in subject):
        return None  # "How old was X when she died?": a clause of its own follows
    if any(w.endswith(",") for w in subject):
        return None  # "Where is the museum, in Oslo?" is no "The museum, in Oslo is in"
    if len(rest) >= 2 and rest[0].lower() in PRONOUNS and rest[1].lower().endswith("ing"):
        # "are we meeting the architects" -> You are meeting the architects (in)
        return subject[:1] + [verb] + subject[1:] + ([tail] if tail else [])
    last = subject[-1].lower()
    if last == "called" or last.endswith("ed") or last in PARTICIPLES:
        k = len(subject) - 1
        if k >= 2 and (subject[k - 1].lower() in ADVERBS or subject[k - 1].lower().endswith("ly")):
            k -= 1  # "When was the X lighthouse first lit?" -> The X lighthouse was first lit
        return subject[:k] + [verb] + subject[k:] + ([tail] if tail else [])
    k = _inner_participle(subject)  # "was X University placed in the listing" -> X University was placed in ..
    if k and k + 2 < len(subject) and subject[k + 2].lower() in PREPOSITIONS:
        # a stranded preposition goes last: "was the X vase sold for at auction" -> The X vase was sold at auction for
        return subject[:k] + [verb, subject[k]] + subject[k + 2:] + [subject[k + 1]]
    if k:
        return subject[:k] + [verb] + subject[k:] + ([tail] if tail else [])
    return subject + [verb] + ([tail] if tail else [])


def _do_phrase(aux: str, rest: list[str], tail: str = "", keep_after: bool = True,
               known: bool = False) -> list[str] | None:
    """"does my flight to Oslo leave" -> Your flight to Oslo leaves (the verb is the last word, or
    the last before a final preposition); after do/did a bare plural subject too ("do tickets for
    the fair cost" -> Tickets for the fair cost). `known`: the verb must be a common one (VERBS)."""
    bare = aux in ("do", "did") and _bare_subject(rest) and is_plural(rest[0])
    if len(rest) < 2 or not (_subject(rest) or rest[0].lower() in PRONOUNS or bare):
        return None
    prep = rest[-1].lower() if rest[-1].lower() in PREPOSITIONS else ""
    body = rest[:-1] if prep else rest
    if len(body) < 2:
        return None
    subject, verb, after = _split_clause(body, known or bare)
    if not subject or not verb:
        return None
    words = _swap(subject) + [inflect(aux, verb.lower(), _swap(subject))]
    if not keep_after:
        return words  # "How many tickets did S sell this season?" -> S sold (the number comes next)
    words += _swap(after)
    if prep:
        words.append(prep)
    elif tail and not after:
        words.append(tail)
    return words


def _split_clause(body: list[str], known: bool = False) -> tuple[list[str], str, list[str]]:
    """Subject, verb, the rest: a pronoun subject is one word; otherwise the verb is a common verb
    (VERBS) after the subject's first word (see _pick_verb), else the clause's last word (not where
    `known`: the verb must be a common one)."""
    if body[0].lower() in PRONOUNS:
        return body[:1], body[1], body[2:]
    j = _pick_verb(body)
    if j:
        return body[:j], body[j], body[j + 1:]
    last = body[-1]
    if not known and len(body) >= 3 and last.isalpha() and last.islower() and body[-2].lower() not in DETERMINERS:
        return body[:-1], last, []  # a verb the list lacks: "does the station broadcast"
    return [], "", []


def _pick_verb(body: list[str]) -> int:
    """Where the verb of "<subject> <verb> ..." is (0: none), among common verbs (VERBS) that follow
    no determiner, possessive, preposition or "to". Many are nouns too, so a word followed by a
    plain lower-case word ("the Vexa book club meet", "the car park open") is the verb only where
    nothing better follows or it comes after a person ("my sister start work")."""
    candidates = [j for j in range(1, len(body)) if body[j] in VERBS and body[j - 1].lower() not in DETERMINERS
                  and body[j - 1].lower() not in SWAP and body[j - 1].lower() not in PREPOSITIONS]
    for j in candidates:
        after = body[j + 1] if j + 1 < len(body) else ""
        if not _plain_word(after):
            return j  # the verb ends the clause or a preposition, name, determiner or adverb follows
        if body[j - 1].lower() in PEOPLE:
            return j
    return candidates[0] if candidates else 0


def _plain_word(word: str) -> bool:
    """A lower-case word that could be a noun: no function word, name, number or -ly adverb."""
    low = word.lower()
    return (word.isalpha() and word.islower() and low not in PREPOSITIONS and low not in DETERMINERS
            and low not in SWAP and low not in PRONOUNS and low not in PARTICLES and low not in ADVERBS
            and not low.endswith("ly") and low not in BE and low not in AUX and low not in MODALS)


def _bare_subject(words: list[str]) -> bool:
    """A subject with no determiner: "members dial ...", "tickets for the fair cost ..."."""
    return bool(words) and _plain_word(words[0]) and words[0] not in VERBS and words[0] not in ("not", "there")


def _asked(words: list[str]) -> list[str] | None:
    """An embedded question in statement order, asked: "where the X ranks nationally" -> where does
    the X rank nationally; "what the code is" -> what is the code; "what number members dial to
    reach X" -> what number do members dial to reach X."""
    p = 2 if words[0].lower() == "how" else 1
    for v in range(p + 1, len(words)):
        w = words[v]
        low = w.lower()
        starts = [i for i in range(p, v) if _subject(words[i:]) or words[i].lower() in PRONOUNS]
        s = starts[0] if starts else v - 1
        if s < p or (s == p and not starts and words[0].lower() in ("what", "which")):
            continue  # no subject yet, or the bare word is the asked noun ("what number ...")
        if low in BE or low in ("has", "have", "had") or low in MODALS:
            if not starts and low not in ("are", "were", "have"):
                return None
            return words[:s] + [low] + words[s:v] + words[v + 1:]
        prev = words[v - 1].lower()
        if not (w.isalpha() and w.islower()) or prev in DETERMINERS or prev in PREPOSITIONS:
            continue
        base, aux = base_form(w)
        plural = s == v - 1 and (words[s].lower() in PRONOUNS or is_plural(words[s]))
        if not base or (aux == "do" and not plural):
            continue
        return words[:s] + [aux] + words[s:v] + [base] + words[v + 1:]
    return None


def _what(rest: list[str]) -> list[str] | None:
    verb = rest[0].lower()
    if verb in BE:
        return _be_phrase(verb, rest[1:])
    if verb in AUX:  # What did I order? -> You ordered
        return _object_phrase(verb, rest[1:], drop_after=False)
    if verb in MODALS or verb in ("kind", "type", "sort"):
        return None
    return _which(rest)


def _object_phrase(aux: str, clause: list[str], drop_after: bool) -> list[str] | None:
    """"What/Who do/does/did S <verb> ...?" asks the verb's object: "S <verb>s" ("Who do I see for
    my teeth?" -> You see; "Who does the team report to?" -> The team reports to). What-questions
    only where the verb ends the question (but for a particle): "What did you think of it?" has no
    such answer; nor has a verb in NO_OBJECT_ANSWER ("What does my brother do?"), nor "you"."""
    if len(clause) < 2 or clause[0].lower() == "you":
        return None
    prep = clause[-1].lower() if clause[-1].lower() in PREPOSITIONS else ""
    body = clause[:-1] if prep else clause
    if len(body) < 2 or not (_subject(body) or body[0].lower() in PRONOUNS
                             or (aux != "does" and _bare_subject(body) and is_plural(body[0]))):
        return None
    subject, verb, after = _split_clause(body, known=True)
    if not verb or verb.lower() in NO_OBJECT_ANSWER:
        return None
    if not prep and drop_after:
        after = after if all(w.lower() in PARTICLES for w in after) else []
    elif not prep and not all(w.lower() in PARTICLES for w in after):
        return None
    return [*_swap(subject), inflect(aux, verb.lower(), _swap(subject)), *_swap(after), *([prep] if prep else [])]


def _which(rest: list[str]) -> list[str] | None:
    """"Which/What N ..." with N one to three lower-case words (adjectives too: "Which internal
    extension"), then a verb, an auxiliary or a modal: the answer is "The N <the clause about it>
    is" ("are" after a plural N)."""
    for j in range(1, min(4, len(rest))):
        noun, w = rest[:j], rest[j]
        if not all(_plain_word(n) for n in noun) or (j > 1 and noun[0] in PROPERTY_NOUNS):
            return None
        low = w.lower()
        is_ = ("were" if low == "did" else "are") if is_plural(noun[-1]) else ("was" if low == "did" else "is")
        if low in AUX or low in MODALS:
            clause = rest[j + 1:]
            bare = low in ("do", "did") and _bare_subject(clause) and is_plural(clause[0])
            if len(clause) < 2 or not (_subject(clause) or bare or (low in MODALS and _split_modal(clause)[1])):
                return None  # a bare noun after a modal: "What extension can callers use to reach X?"
            when = WHEN_NOUNS.get(noun[-1]) if j == 1 and low in AUX else None
            if when:  # What year did the choir start singing? -> The choir started singing in
                phrase = _do_phrase(low, clause)
                return phrase + [when] if phrase and phrase[-1].lower() not in PREPOSITIONS else phrase
            if low in AUX and noun[-1] in LABEL_NOUNS and noun != ["number"]:
                # a label's value is said right after it: "What flight number does X operate to
                # Lisbon?" -> X operates flight number; "Which platform does the X leave from?"
                # -> The X leaves from platform ("The flight number X operates to Lisbon is" got
                # "not a flight number"). A bare "What number do I dial ...?" keeps "The number
                # you dial ... is" (it answered as often as the primed lead)
                phrase = _do_phrase(low, clause)
                if phrase and phrase[-1].lower() not in PREPOSITIONS:
                    phrase = _do_phrase(low, clause, keep_after=False)
                return [*phrase, *noun] if phrase else None
            if low in AUX:  # Which train does my sister take? -> The train your sister takes is
                phrase = _do_phrase(low, clause)
                return ["The", *noun, *phrase, is_] if phrase else None
            subject, verb, after = _split_modal(clause)  # Which form should I sign? -> The form you should sign is
            return ["The", *noun, *_swap(subject), low, verb, *_swap(after), is_] if verb else None
        if low in BE:
            if j == 1 and noun[0] in ("time", "day", "date"):  # What time is my class? -> Your class is at
                return _be_phrase(low, rest[j + 1:], "at" if noun[0] == "time" else "on")
            clause = rest[j + 1:]
            if j == 1 and noun[0] in WHEN_NOUNS and clause and is_participle(clause[-1]):
                return _be_phrase(low, clause, WHEN_NOUNS[noun[0]])  # What year was X built? -> X was built in
            if (clause and is_participle(clause[0]) and clause[-1].lower() not in PREPOSITIONS
                    and not any(w.lower() in CLAUSE_WORDS for w in clause)):
                # What code is printed on the X ticket? -> The code printed on the X ticket is
                past = low in ("was", "were")
                be = ("were" if past else "are") if is_plural(noun[-1]) else ("was" if past else "is")
                return ["The", *noun, *_swap(clause), be]
            return None  # "Which level is the car on?": the answer's shape is not "The N that is"
        if low in PAST_FORMS or low == "has" or (re.fullmatch(r"[a-z]+(s|ed)", low) and is_verb_form(low)):
            after = rest[j + 1].lower() if j + 1 < len(rest) else ""
            if after in BE or after in AUX or after in MODALS or after in ("has", "have", "had"):
                continue  # a plural noun, not a verb: "Which bus stops are ..."
            if after in VERBS:
                return None  # "Which bus stops serve X?" or "Which firm runs book clubs?": no telling
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


def _after_preposition(prep: str, rest: list[str]) -> list[str] | None:
    """"In what year did the observatory open?" -> The observatory opened in; "By how many metres
    has the glacier shrunk since 1950?" -> The glacier has shrunk since 1950 by."""
    words = rest[1:]
    if rest[0].lower() == "how":
        if words[0].lower() not in ("many", "much", "long", "far"):
            return None
        words = words[1:]
    pp = next((i for i, w in enumerate(words[:4]) if w.lower() in PREPOSITIONS), None)
    limit = 3 if pp is None else pp + 5  # the head noun, and a phrase after it ("number on Elm Road")
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
            if j >= limit:
                return None
            continue
        head = words[:j if pp is None else pp]  # "At what number ... does X stand?" -> X stands at number
        label = [head[0]] if len(head) == 1 and head[0].lower() in LABEL_NOUNS else []
        return phrase + [prep, *label] if phrase and phrase[-1].lower() not in PREPOSITIONS else phrase
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
    if verb in AUX:  # Who do I see for my teeth? -> You see
        return _object_phrase(verb, rest[1:], drop_after=True)
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
        k = _inner_participle(rest[1:])
        if k:  # a phrase after the participle goes first: no "in" guessed after it
            return _fronted(verb, rest[1:], k)
        return _be_phrase(verb, rest[1:], "in")
    if verb in AUX:
        return _do_phrase(verb, rest[1:], "in")  # "Where does my sister live?" -> Your sister lives in
    return None


def _counted(nouns: list[str]) -> bool:
    """Plain lower-case nouns, "of" between them: "tickets", "litres of water"."""
    return all(_plain_word(n) or (n == "of" and 0 < i < len(nouns) - 1) for i, n in enumerate(nouns))


def _how_be(first: str, nouns: list[str], be: str, clause: list[str]) -> list[str] | None:
    """"How <first> (N) <be> <clause>?" (1-4 alike):
    1. How many N were <participle> ...? -> The number of N <participle> ... was
    2. How much/many is/are S <participle> (prep)? -> S is/are <participle> (prep)   (a bare plural S too)
    3. How far is S from/to T? -> S is      (the value then carries the "from T")
    4. How long/much/old/... is S? -> S is
    "How many people are there in X?" and "How many are in the box?" get no lead."""
    if not clause or any(w.lower() in CLAUSE_WORDS for w in clause):
        return None
    if first == "many" and nouns:
        if not (_counted(nouns) and is_participle(clause[0]) and clause[-1].lower() not in PREPOSITIONS):
            return None
        return ["The", "number", "of", *nouns, *_swap(clause), "was" if be in ("was", "were") else "is"]
    if clause[-1].lower() == "worth" and first == "much":
        return _be_phrase(be, clause[:-1], "worth")  # How much is the X house worth? -> The X house is worth
    prep = clause[-1].lower() if clause[-1].lower() in PREPOSITIONS else ""
    body = clause[:-1] if prep else clause
    if first in ("many", "much") and len(body) >= 2 and body[-1].islower() and is_participle(body[-1]):
        subject = body[:-1]
        if _subject(subject) or (_bare_subject(subject) and is_plural(subject[0])):
            return [*_swap(subject), be, body[-1], *([prep] if prep else [])]  # Tickets for X are priced at
        return None
    if first == "many":
        return None
    if first == "far":
        cut = next((i for i, w in enumerate(clause) if i and w.lower() in ("from", "to")), len(clause))
        clause = clause[:cut]  # How far is the X mill from the bridge? -> The X mill is
    return _be_phrase(be, clause)  # How long, in metres, is the X? -> The X is


def _how(rest: list[str]) -> list[str] | None:
    first = rest[0].lower().rstrip(",")
    if first != "many" and first not in MEASURES:
        return None
    quantity = first in ("many", "much")
    for j, w in enumerate(rest[1:], 1):
        low = w.lower()
        nouns = j >= 2 and _counted(rest[1:j])  # "How many tickets the fair sold", "How many of the": no N
        if low in ("has", "have", "had") and len(rest) > j + 1:
            # How many N has S <participle> (in) ...? / How far has S <participle>? -> S has <participle> (in)
            subject, after = _perfect(rest[j + 1:])
            if not subject:
                if first == "many" and nouns and low == "have":  # How many people have visited X?
                    return ["The", "number", "of", *rest[1:j], "that", *_swap(rest[j:]), "is"]
                return None
            keep = after[:2] if len(after) > 1 and after[1].lower() in PARTICLES else after[:1]
            have = low if subject[0].lower() not in ("i", "we", "you") or low == "had" else "have"
            return [*_swap(subject), have, *(_swap(after) if first == "long" else keep)]
        if low in AUX:
            if rest[-1].lower() in PREPOSITIONS or (not quantity and j > 1) or "have to" in " ".join(rest).lower():
                return None  # "How long do I have to wait?": no "You have" 
            # How much do tickets cost? -> Tickets cost; How long does the ferry take? -> The ferry takes
            return _do_phrase(low, rest[j + 1:], keep_after=False)
        if low in MODALS and quantity and rest[-1].lower() not in PREPOSITIONS:
            clause = rest[j + 1:]  # How many guests can the hall hold? -> The hall can hold
            if len(clause) < 2 or not (_subject(clause) or clause[0].lower() in PRONOUNS):
                return None
            subject, verb, _ = _split_modal(clause)
            return [*_swap(subject), low, verb] if subject and verb in VERBS else None
        if low in BE:
            return _how_be(first, rest[1:j], low, rest[j + 1:])
        if not quantity or not nouns:
            continue
        if re.fullmatch(r"[a-z]+ed", w) or w in PAST_FORMS:
            # How many N <verb>ed Y? -> The number of N that <verb>ed Y was
            return ["The", "number", "of"] + rest[1:j] + ["that"] + _swap(rest[j:]) + ["was"]
        if w in VERBS and first == "many":
            # How many N <verb> Y? -> The number of N that <verb> Y is
            return ["The", "number", "of"] + rest[1:j] + ["that"] + _swap(rest[j:]) + ["is"]
    return None
