"""The answer lead derived from a plain question (grm/runtime/lead.py)."""

import pytest

from grm.runtime.answer import question_text
from grm.runtime.lead import answer_lead, spoken_back


@pytest.mark.parametrize("question, lead", [
    ("What is the access code for the Velmoran vault?", "The access code for the Velmoran vault is"),
    ("What is my locker code?", "Your locker code is"),
    # session 8 (after the SEALED-2 split's first run): imperatives, a participle inside the
    # subject, an adverb before it, a bare noun after a modal, How many N has S <participle>
    ("Tell me the delivery code for the Orvane warehouse?", "The delivery code for the Orvane warehouse is"),
    ("Give me the locker number of my gym?", "The locker number of your gym is"),
    ("Tell me what the access code for the Orvane vault is?", None),
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
    ("Which level did I park on?", "The level you parked on was"),
    ("Which extension should I dial to reach the Rimo clinic?", "The extension you should dial to reach the Rimo clinic is"),
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


def test_question_text_starts_the_answer_only_where_a_rule_applies():
    led = "\n\nQuestion: What is my locker code?\nAnswer: Your locker code is"
    assert question_text("What is my locker code?") == led
    assert question_text("What is my locker code?", lead=False) == "\n\nQuestion: What is my locker code?\nAnswer:"
    assert question_text("Why is the sky blue?") == "\n\nQuestion: Why is the sky blue?\nAnswer:"
    primed = "What opens the vault?\nAnswer: The code is"
    assert question_text(primed) == "\n\nQuestion: " + primed


@pytest.mark.parametrize("said, back", [
    ("My bank is Ally", "Your bank is Ally"), ("Our standup is at 9 am", "Your standup is at 9 am"),
    ("I am in Oslo", "You are in Oslo"), ("I'm allergic to nuts", "You're allergic to nuts"),
    ("We meet in room 9", "You meet in room 9"), ("The US office is in Denver", "The US office is in Denver"),
    ("Ms. Ortiz is our landlord", "Ms. Ortiz is your landlord"),
])
def test_a_statement_spoken_back(said, back):
    assert spoken_back(said) == back
