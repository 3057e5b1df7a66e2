"""The answer lead derived from a plain question (grm/runtime/lead.py)."""

import pytest

from grm.runtime.question import question_text
from grm.runtime.lead import answer_lead


@pytest.mark.parametrize("question, lead", [
    ("What is the access code for the Velmoran vault?", "The access code for the Velmoran vault is"),
    ("What is my locker code?", "Your locker code is"),
    # session 8 (after the SEALED-2 split's first run): imperatives, a participle inside the
    # subject, an adverb before it, a bare noun after a modal, How many N has S <participle>
    ("Tell me the delivery code for the Orvane warehouse?", "The delivery code for the Orvane warehouse is"),
    ("Give me the locker number of my gym?", "The locker number of your gym is"),
    # session 9: an embedded question in statement order is asked back ("what the X is" -> what is the X)
    ("Tell me what the access code for the Orvane vault is?", "The access code for the Orvane vault is"),
    ("At what place was Brenlow College ranked in the national survey?",
     "Brenlow College was ranked in the national survey at"),
    ("When was the Orvane bridge first opened?", "The Orvane bridge was first opened"),
    ("What is the Orvane registered office?", "The Orvane registered office is"),
    ("What number can visitors dial to reach the Orvane front desk?",
     "The number visitors can dial to reach the Orvane front desk is"),
    ("How many cats has the Orvane shelter taken in this year?", "The Orvane shelter has taken in"),
    ("How many books have you lent out?", "You have lent out"),
    ("What is my cat called?", "Your cat is called"),
    ("What number opens the Velmoran vault?", "The number that opens the Velmoran vault is"),
    ("Who is my accountant?", "Your accountant is"),
    ("When is the school play?", "The school play is"),
    ("When does my flight to Oslo leave?", "Your flight to Oslo leaves"),
    ("When was the Zeldrin observatory founded?", "The Zeldrin observatory was founded"),
    ("Where does my sister live?", "Your sister lives in"),
    ("Where did my brother move to?", "Your brother moved to"),
    ("Where are we meeting the architects?", "You are meeting the architects in"),
    ("How many tickets did the Rav Tarsel festival sell this season?", "The Rav Tarsel festival sold"),
    ("How many million litres does the Ulthor dam hold?", "The Ulthor dam holds"),
    ("How many ships arrived at the port of Zeldrin last year?",
     "The number of ships that arrived at the port of Zeldrin last year was"),
    ("How long, in metres, is the Quintaro Bridge?", "The Quintaro Bridge is"),
    ("How many people travel on the Zel ferry each week?",
     "The number of people that travel on the Zel ferry each week is"),
    ("Which train goes to the airport?", "The train that goes to the airport is"),
    ("Which team won the cup?", "The team that won the cup is"),
    ("Which level did I park on?", "You parked on level"),
    ("Which extension should I dial to reach the Rimo clinic?",
     "The extension you should dial to reach the Rimo clinic is"),
    ("What form should we sign?", "The form you should sign is"),
    ("What year did the Osk library open?", "The Osk library opened in"),
    ("At what time does the shop close?", "The shop closes at"),
    ("In what year did the Roveldal observatory open?", "The Roveldal observatory opened in"),
    ("For how many years did she teach?", "She taught for"),
    ("By how much has the Linden river risen since May?", "The Linden river has risen since May by"),
    ("How much does the Osk bakery charge for a loaf?", "The Osk bakery charges"),
    ("On what frequency does the Rav station broadcast?", "The Rav station broadcasts on"),  # a verb VERBS lacks
    ("When did my cousin graduate?", "Your cousin graduated"),
])
def test_wh_questions_get_the_answer_started_in_their_own_words(question, lead):
    assert answer_lead(question) == lead


@pytest.mark.parametrize("question", [
    "Why is the sky blue?", "What is Lisbon famous for?", "Who founded the company?", "Which level is the car on?",
    "What does my brother do?", "What kind of dog is it?",
    "Tell me the code.", "What is it?", "What is the code?\nAnswer: The code is", "Is it? Or not?",
])
def test_questions_no_rule_covers_get_no_lead(question):
    assert answer_lead(question) is None


@pytest.mark.parametrize("question, lead", [
    # session 9, 1: any common verb in its -s/-ed form after "Which/What N" (adjectives in N too)
    ("Which internal extension reaches the Vexa desk?", "The internal extension that reaches the Vexa desk is"),
    ("Which code appears on the crates Vexa Freight sends out?",
     "The code that appears on the crates Vexa Freight sends out is"),
    ("What code appears on the crates Vexa Freight sends out?",
     "The code that appears on the crates Vexa Freight sends out is"),
    ("Which road leads to the Plox farm?", "The road that leads to the Plox farm is"),
    ("Which train stops near the Vexa museum?", "The train that stops near the Vexa museum is"),
    ("Which team has the most wins?", "The team that has the most wins is"),
    ("Where does the Quill academy rank nationally?", "The Quill academy ranks nationally"),
    ("When did my parcel ship?", "Your parcel shipped"),
    ("When did the Plox river rise?", "The Plox river rose"),
    # a noun that is a verb too, inside the subject
    ("When does the Vexa book club meet?", "The Vexa book club meets"),
    ("When does the car park open?", "The car park opens"),
    ("When does the Vexa store close on Sundays?", "The Vexa store closes on Sundays"),
    ("When does the Vexa train leave Plox station?", "The Vexa train leaves Plox station"),
    ("When did my sister start work at the Plox bank?", "Your sister started work at the Plox bank"),
    ("When does Vexa ship orders?", "Vexa ships orders"),
    ("How many floors does the Plox tower have?", "The Plox tower has"),
    # 2: How much/many do S <verb>? (a bare plural subject after do)
    ("How much do tickets for the Zorba fair cost?", "Tickets for the Zorba fair cost"),
    ("How many do the Plox twins own?", "The Plox twins own"),
    ("How much do I owe the Plox bank?", "You owe"),
    ("How many guests can the Plox hall hold?", "The Plox hall can hold"),
    # 3: What/Which N do/does/did S <verb>, plural N takes "are"
    ("What number do members dial to reach the Vexa desk?", "The number members dial to reach the Vexa desk is"),
    ("What number does Vexa dial to reach the desk?", "The number Vexa dials to reach the desk is"),
    ("Which shoes do runners prefer?", "The shoes runners prefer are"),
    ("What hours does the Plox shop keep?", "The hours the Plox shop keeps are"),
    # 4: perfect tense after How far/much/long/many
    ("How far has the Plox river risen?", "The Plox river has risen"),
    ("How much has the Vexa fund grown?", "The Vexa fund has grown"),
    ("How long have the Quill twins lived in Plox?", "The Quill twins have lived in Plox"),
    ("How long has the Plox bridge been closed?", "The Plox bridge has been closed"),
    ("How many has Vexa won?", "Vexa has won"),
    ("How many people have visited Plox?", "The number of people that have visited Plox is"),
    # How long/often/far/tall do/does/did S <verb>? (the measure follows the verb)
    ("How long does the Plox ferry take?", "The Plox ferry takes"),
    ("How often does the Vexa bus run?", "The Vexa bus runs"),
    ("How long did the Vexa strike last?", "The Vexa strike lasted"),
    ("How tall does the Plox tree grow?", "The Plox tree grows"),
    ("How much is my rent?", "Your rent is"),
    # 5: a phrase after the head noun; a label noun said before its value
    ("At what number on Elm Road does the Quill bakery stand?", "The Quill bakery stands at number"),
    ("In what year did the Vexa mill close?", "The Vexa mill closed in"),
    ("On what platform does the Vexa train leave?", "The Vexa train leaves on platform"),
    # the same label asked by Which/What N: its value follows it, the verb's object or after its preposition
    ("Which platform does the Vexa express leave from?", "The Vexa express leaves from platform"),
    ("What flight number does Plox Airlines operate to Lisbon?", "Plox Airlines operates flight number"),
    ("What seat number did I book?", "You booked seat number"),
    ("What number do I dial to reach the Plox desk?", "The number you dial to reach the Plox desk is"),
    ("At what time on Sunday does the Plox shop close?", "The Plox shop closes at"),
    ("In what month of the year does the Plox fair open?", "The Plox fair opens in"),
    ("In what position did the Vexa team finish?", "The Vexa team finished in"),
    # 6: Tell me / Can you tell me / Do you know + an embedded question in statement order
    ("Tell me where the Quill academy ranks nationally?", "The Quill academy ranks nationally"),
    ("Can you tell me where the Quill academy ranks nationally?", "The Quill academy ranks nationally"),
    ("Tell me when the Plox fair opens?", "The Plox fair opens"),
    ("Tell me how many tickets the Zorba fair sold?", "The Zorba fair sold"),
    ("Tell me how long the Plox bridge is?", "The Plox bridge is"),
    ("Tell me who my accountant is?", "Your accountant is"),
    ("Tell me what time my yoga class starts?", "Your yoga class starts at"),
    ("Tell me which bank I use?", "The bank you use is"),
    ("Tell me what number members dial to reach the Vexa desk?", "The number members dial to reach the Vexa desk is"),
    ("Tell me what form I should sign?", "The form you should sign is"),
    ("Tell me which train goes to the airport?", "The train that goes to the airport is"),
    ("Do you know where I parked?", "You parked in"),
    ("Do you remember what my locker code is?", "Your locker code is"),
    ("Remind me what my locker code is?", "Your locker code is"),
    ("Could you please tell me the code for the Vexa vault?", "The code for the Vexa vault is"),
    ("Tell me, what is my locker code?", "Your locker code is"),
    # 7: personal and everyday forms
    ("Who do I see for my teeth?", "You see"),
    ("Who does the Vexa team report to?", "The Vexa team reports to"),
    ("Who does my sister work for?", "Your sister works for"),
    ("What did I order?", "You ordered"),
    ("What does Vexa Freight send out?", "Vexa Freight sends out"),
    ("What does the Plox motto mean?", "The Plox motto means"),
    ("What's my locker code?", "Your locker code is"),
    ("Who's my accountant?", "Your accountant is"),
    ("Where's the Plox museum?", "The Plox museum is in"),
    ("What time is my yoga class?", "Your yoga class is at"),
    ("What day is the Plox market held?", "The Plox market is held on"),
    ("What date is the Quill fair?", "The Quill fair is on"),
    ("What time does my yoga class start?", "Your yoga class starts at"),
    ("Which bank do I use?", "The bank you use is"),
])
def test_more_question_forms_get_their_answer_started(question, lead):
    assert answer_lead(question) == lead


@pytest.mark.parametrize("question", [
    "Which bus stops are near the Plox museum?", "Which bus stops serve the Plox museum?",  # a plural noun or a verb?
    "Which firm runs book clubs?", "What size shoes do I wear?", "What number bus goes to the Plox zoo?",
    "How long do I have to wait?", "How old was Vexa when she died?", "How many tickets the fair sold?",
    "Which bus my sister takes?", "What does my brother do?", "What did you think of the Plox film?",
    "What do I need for the trip?", "Who do you recommend?", "Who does the cooking at Plox house?",
    "What's happened to the Vexa fund?", "How's the weather?", "What year is the Vexa car?", "What time is it?",
    "Can you tell me a joke?", "Tell me a story?", "Do you know the Vexa song?", "Can you tell me more?",
    "Tell me who founded the company?", "Tell me what happened?", "What time does school start?",
])
def test_forms_left_without_a_lead(question):
    assert answer_lead(question) is None


def test_question_text_starts_the_answer_only_where_a_rule_applies():
    led = "\n\nQuestion: What is my locker code?\nAnswer: Your locker code is"
    assert question_text("What is my locker code?") == led
    assert question_text("What is my locker code?", lead=False) == "\n\nQuestion: What is my locker code?\nAnswer:"
    assert question_text("Why is the sky blue?") == "\n\nQuestion: Why is the sky blue?\nAnswer:"
    primed = "What opens the vault?\nAnswer: The code is"
    assert question_text(primed) == "\n\nQuestion: " + primed


@pytest.mark.parametrize("question, lead", [
    # session 10 (after the SEALED-4 split's first run), own examples of its forms:
    # 1. a unit after a comma at the end is dropped; How far is S from T? -> S is
    ("What is the depth of the Plox lake, in metres?", "The depth of the Plox lake is"),
    ("How tall is the Vexa mast, in feet?", "The Vexa mast is"),
    ("How far is the Plox mill from the old bridge?", "The Plox mill is"),
    ("How far is the Vexa pier from the harbour, in kilometres?", "The Vexa pier is"),
    # 2. How much/many is/are S <participle> (prep)? (a bare plural S too); How much is S worth?
    ("How much are seats for the Plox opera priced at?", "Seats for the Plox opera are priced at"),
    ("How much is the Vexa cottage insured for?", "The Vexa cottage is insured for"),
    ("How much is my bike worth?", "Your bike is worth"),
    ("How much was the Plox vase sold for at auction?", "The Plox vase was sold at auction for"),
    # 3. How many N (of M) were/are <participle> ...?; How many N of M <verb> ...?
    ("How many goats were sold at the Plox market last autumn?",
     "The number of goats sold at the Plox market last autumn was"),
    ("How many crates of apples are shipped from the Vexa orchard?",
     "The number of crates of apples shipped from the Vexa orchard is"),
    ("How many tonnes of grain reach the Vexa mill each week?",
     "The number of tonnes of grain that reach the Vexa mill each week is"),
    # 4. Which/What N is/was <participle> ...?; What year/month/day was S <participle>?
    ("What code is printed on the Plox boarding pass?", "The code printed on the Plox boarding pass is"),
    ("Which platforms are reserved for the Vexa express?", "The platforms reserved for the Vexa express are"),
    ("What name was carved into the Plox bench?", "The name carved into the Plox bench was"),
    ("What year was the Vexa mill built?", "The Vexa mill was built in"),
    # 5. Where is/was S <participle> <in/at/on/during/for phrase>? -> the phrase first, no "in" guessed
    ("Where was the Vexa team placed in the 2023 league table?", "In the 2023 league table, the Vexa team was placed"),
    ("Where was Plox ranked in the regional survey?", "In the regional survey, Plox was ranked"),
    ("Where is my spare key kept at the Plox office?", "At the Plox office, your spare key is kept"),
    ("Where was the Plox treaty signed?", "The Plox treaty was signed in"),
])
def test_sealed4_forms_get_their_answer_started(question, lead):
    assert answer_lead(question) == lead


@pytest.mark.parametrize("question", [
    "Where was the Plox treaty signed by the two kings?",  # "by" sets no scene: no "in" guessed after it
    "Where was the Plox vase sold for at auction?", "Where was the Vexa team placed in?",
    "Where is the museum, in Oslo?", "How far is it from Plox to Vexa?",
    "How many of the tickets were sold?", "How many people were there at the Plox fair?",
    "How many eggs were laid when the hens moved?", "How many are in the box?",
    "What number is the Plox door painted with?", "What colour is the Plox door?", "What year is the Vexa car?",
    "What serial number is engraved on the Vexa watch when it is sold?",
    "What does it cost to get into the Plox zoo?",
])
def test_sealed4_forms_left_without_a_lead(question):
    assert answer_lead(question) is None
