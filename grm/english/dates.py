"""The one set of patterns for a time, a date, a weekday, a month and a year said in English.

Pattern strings (MONTH, WEEKDAY) are for callers that build them into a larger pattern; the
compiled ones find a value of that kind in text. The abstention check asks whether a routed text
holds a value of the kind a question asks for ("What day ...?": grm/grafts/floor.py); the policy
plane asks what kind of value a fact holds and where ("on Tuesdays at 4pm": grm/policy/align.py).
"""

from __future__ import annotations

import re

# A month, named or cut short ("Sept.", "jan"); "May" only with its capital or before a day
# number ("may 5"), since "may" is a modal far more often than a month.
MONTH = (r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|(?-i:May|may(?=\s+\d))|june?|july?|aug(?:ust)?|"
         r"sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\b\.?")
WEEKDAY = r"(?:mon|tues|wednes|thurs|fri|satur|sun)days?"  # "Monday", "thursdays"
# an ordinal before the noun it counts is no date: "the 12th floor", "5th Avenue", "3rd grade"
_NOT_A_DATE = (r"(?!\s+(?:floor|grade|avenue|ave|street|st|road|rd|place|row|level|round|year|time|birthday|"
               r"anniversary|century|edition|(?-i:[A-Z]))\b)")

# a clock time: "4pm", "8:15", "9 a.m.", "noon"
TIME = re.compile(r"\b\d{1,2}(?::\d{2})?\s*(?:am|pm|a\.m\.|p\.m\.)(?!\w)|\b\d{1,2}:\d{2}\b|\b(?:noon|midnight|midday)\b",
                  re.IGNORECASE)
# a day: a date ("5 March", "March 5th, 2024", "the 12th", "2024-03-05", "5/3/24"), a weekday,
# "weekend", "tomorrow", "tonight"
DATE = re.compile(rf"\b(?:\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?)?{MONTH}(?:\s+\d{{1,2}}(?:st|nd|rd|th)?\b)?(?:,?\s+\d{{4}})?\b"
                  rf"|\b(?:{WEEKDAY}|weekends?|tomorrow|tonight)\b|\b(?:the\s+)?\d{{1,2}}(?:st|nd|rd|th)\b{_NOT_A_DATE}"
                  r"|\b\d{4}-\d{2}-\d{2}\b|\b\d{1,2}/\d{1,2}/\d{2,4}\b",
                  re.IGNORECASE)
MONTH_NAME = re.compile(rf"\b{MONTH}", re.IGNORECASE)
YEAR = re.compile(r"\b(?:1[89]|20)\d{2}\b")  # 1800-2099
