"""English verbs for the answer-lead rules (grm/runtime/lead.py): verb forms and plural nouns.

There is no part-of-speech tagger in the runtime, so the rules read a question's words by list:
the closed classes (grm/english/words.py), the do-auxiliaries, particles and adverbs, a few
hundred common verbs (VERBS) with their irregular pasts and participles, and nouns that end in -s
without being plural. The regular forms are derived, not listed: a verb's third person (leaves,
carries), its past (opened, shipped, carried) and, back from either, its base and the
do-auxiliary it takes ("ranks" -> rank, does). Pure functions over strings; nothing here knows
what a question is.
"""

from __future__ import annotations

import re

AUX = {"does": "present", "do": "plural", "did": "past"}  # the do-auxiliaries (words.DO) and the tense each sets
PARTICLES = frozenset("in up out off down over back away".split())
ADVERBS = frozenset("first last originally initially officially recently ever once still also already just".split())

# verbs
PARTICIPLES = frozenset("born built made held sold done given taken seen written known kept left found paid won "
                        "run grown begun chosen driven lit shut cut hit set put read led fed met sent spent lent "
                        "bought brought caught taught thought told heard laid paid said shot spun struck hung "
                        "worn torn sworn drawn thrown flown shown sung rung swum drunk".split())
IRREGULAR_PAST = {"leave": "left", "go": "went", "come": "came", "begin": "began", "meet": "met", "buy": "bought",
                  "sell": "sold", "take": "took", "make": "made", "get": "got", "give": "gave", "find": "found",
                  "say": "said", "see": "saw", "win": "won", "hold": "held", "run": "ran", "build": "built",
                  "send": "sent", "keep": "kept", "put": "put", "pay": "paid", "lose": "lost", "spend": "spent",
                  "grow": "grew", "write": "wrote", "become": "became", "tell": "told", "bring": "brought",
                  "have": "had", "do": "did", "be": "was", "set": "set", "cost": "cost", "fly": "flew",
                  "drive": "drove",
                  "choose": "chose", "know": "knew", "think": "thought", "teach": "taught", "stand": "stood",
                  "understand": "understood", "speak": "spoke", "break": "broke", "rise": "rose", "fall": "fell",
                  "feel": "felt", "sit": "sat", "lead": "led", "wake": "woke", "wear": "wore", "draw": "drew",
                  "throw": "threw", "swim": "swam", "sing": "sang", "ring": "rang", "drink": "drank", "eat": "ate",
                  "forget": "forgot", "hide": "hid", "ride": "rode", "shake": "shook", "steal": "stole",
                  "freeze": "froze", "hang": "hung", "dig": "dug", "feed": "fed", "bend": "bent", "lend": "lent",
                  "catch": "caught", "fight": "fought", "seek": "sought", "sleep": "slept", "hear": "heard",
                  "mean": "meant", "deal": "dealt", "lay": "laid", "light": "lit", "shoot": "shot", "hurt": "hurt",
                  "let": "let", "shut": "shut", "split": "split", "spread": "spread", "bet": "bet", "cast": "cast",
                  "cut": "cut", "hit": "hit", "read": "read", "beat": "beat", "broadcast": "broadcast",
                  "forgive": "forgave", "sink": "sank", "shine": "shone", "slide": "slid", "stick": "stuck",
                  "bear": "bore", "bind": "bound", "breed": "bred", "bite": "bit", "lie": "lay", "dive": "dove"}
# base forms a do-question's verb is recognised by: the few hundred commonest English verbs; their
# -s/-es/-ies and -ed forms are derived (third_person, past_tense, base_form)
VERBS = frozenset("""accept add admit advise afford agree aim allow announce answer appear apply appoint approve
argue arrange arrive ask assign attach attack attempt attend avoid bake ban bear beat become begin believe belong bend
bet bind bite blame block blow boil book borrow break breed bring broadcast build burn buy call cancel carry cast
catch cause celebrate change charge chase check choose claim clean clear climb close coach collect combine come
commit compare compete complain complete confirm connect consider contain continue control cook copy correct cost
count cover create cross cure cut dance deal decide declare decline decorate deliver demand deny depart depend
describe design destroy develop die dig dine direct discover discuss display dive divide do donate draw dress drink
drive drop earn eat edit elect employ enable encourage end enjoy enter escape establish estimate examine exceed
exchange exist expand expect expire explain explore export express extend fail fall feed feel fetch fight fill find
finish fit fix fly fold follow forget forgive found freeze fund gain gather generate get give go govern graduate
greet grow guard guess handle hang happen harvest hate have hear heat help hide hire hit hold host hunt hurt
identify ignore import improve include increase indicate inform install intend introduce invent invest invite
involve issue join jump keep kick kill know land last launch lay lead learn leave lend let lift light
limit link list listen live load locate lock look lose love maintain make manage manufacture marry match mean
measure meet melt mention miss mix move need notice obtain occupy occur offer open operate order organise organize
owe own paint park pass pay perform pick plan plant play possess post pour practise practice prefer prepare present
preserve press prevent print produce promise promote propose protect prove provide publish pull purchase push put
qualify raise rank reach read realise realize receive recognise recognize recommend record recover reduce refer
refuse register reject release rely remain remember remind remove rent repair repeat replace reply report
represent require rescue reserve resign respond retire return reveal ride ring rise roll rule run sail save say
score search see seek select sell send serve set settle shake share shine ship shoot shop show shut sign sing sink
sit sleep slide smell sound speak spend split spread stand start stay steal stick stop store study submit succeed
suffer suggest supply support surround survive swim switch take talk taste teach tell test thank think throw
touch tour train transfer translate travel treat trust try turn understand update upgrade use visit vote wait
wake walk want warn wash watch water wear weigh welcome win wish work worry wrap write dial renew flow""".split())
PAST_FORMS = frozenset(IRREGULAR_PAST.values())
BASE_OF_PAST = {past: base for base, past in IRREGULAR_PAST.items() if past != base}
# two-syllable verbs stressed last, which double their final consonant (admitted, preferred)
DOUBLING = frozenset("admit commit occur prefer refer permit submit regret control transfer equip omit".split())

# nouns
NOT_PLURAL = frozenset("news series species means physics maths bus gas lens status campus address".split())


def is_plural(word: str) -> bool:
    """Does `word` name more than one (tickets, people; not bus, news, status)?"""
    low = word.lower()
    return (low.endswith("s") and not low.endswith(("ss", "us", "is")) and low not in NOT_PLURAL) \
        or low in ("people", "children", "men", "women", "staff", "they", "we", "you")


def third_person(verb: str, subject: list[str]) -> str:
    """`verb` agreeing with `subject` in the present ("you leave", "your flight leaves")."""
    if [w.lower() for w in subject] in (["you"], ["they"]) or (len(subject) == 1 and subject[0].lower() == "you"):
        return verb
    if verb == "have":
        return "has"  # "How many floors does the X tower have?" -> The X tower has
    if verb.endswith(("s", "sh", "ch", "x", "z", "o")):
        return verb + "es"
    if verb.endswith("y") and len(verb) > 1 and verb[-2] not in "aeiou":
        return verb[:-1] + "ies"
    return verb + "s"


def past_tense(verb: str) -> str:
    """The past tense of a base form: irregular (left, bought), else regular (shipped, stored, carried)."""
    if verb in IRREGULAR_PAST:
        return IRREGULAR_PAST[verb]
    if verb in DOUBLING or re.fullmatch(r"[^aeiou]*[aeiou][b-df-hj-np-tvz]", verb):
        return verb + verb[-1] + "ed"  # ship -> shipped, plan -> planned
    if verb.endswith("e"):
        return verb + "d"
    if verb.endswith("y") and len(verb) > 1 and verb[-2] not in "aeiou":
        return verb[:-1] + "ied"
    return verb + "ed"


def inflect(aux: str, verb: str, subject: list[str]) -> str:
    """`verb` in the tense a do-auxiliary sets (AUX): does -> third person, do -> as it is, did -> past."""
    return {"present": third_person(verb, subject), "plural": verb, "past": past_tense(verb)}[AUX[aux]]


def is_participle(word: str) -> bool:
    """An -ed/-en word or an irregular participle (built, sold, worn)."""
    return bool(re.fullmatch(r"[a-z]+(ed|en)", word)) or word in PARTICIPLES


def base_form(word: str) -> tuple[str, str]:
    """A finite verb's base form and its do-auxiliary: "ranks" -> (rank, does), "opened" -> (open,
    did), "use" -> (use, do); ("", "") for no common verb."""
    if word in VERBS:
        return word, "do"
    if word in BASE_OF_PAST:
        return BASE_OF_PAST[word], "did"
    if word.endswith("s"):
        stems = (word[:-1], word[:-2], word[:-3] + "y")
        return next(((stem, "does") for stem in stems if stem in VERBS and third_person(stem, []) == word),
                    ("", ""))
    if word.endswith("ed"):
        stems = (word[:-1], word[:-2], word[:-3], word[:-3] + "y")
        return next(((stem, "did") for stem in stems if stem in VERBS and past_tense(stem) == word), ("", ""))
    return "", ""


def is_verb_form(word: str) -> bool:
    """`word` is a common verb (VERBS) in an -s or -ed form (goes, carries, opened, stored, shipped)."""
    return base_form(word)[1] in ("does", "did")
