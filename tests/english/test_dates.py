"""The one set of time and date patterns."""

from __future__ import annotations

import pytest

from grm.english.dates import DATE, MONTH_NAME, TIME, YEAR


@pytest.mark.parametrize("text", ["at 4pm", "8:15", "9 a.m. sharp", "at noon", "midnight", "10 PM"])
def test_clock_times_are_times(text):
    assert TIME.search(text)


@pytest.mark.parametrize("text", ["5 amps", "3 amazing days", "room 12", "call 5551234"])
def test_numbers_that_are_no_time_are_not(text):
    assert not TIME.search(text)


@pytest.mark.parametrize("text", ["on March 5th, 2024", "the 12th", "5 of May", "on Thursdays", "tomorrow",
                                  "2024-03-05", "5/3/24", "may 5", "this weekend", "Sept. 3"])
def test_dates_weekdays_and_day_words_are_dates(text):
    assert DATE.search(text)


@pytest.mark.parametrize("text", ["the 12th floor", "5th Avenue", "I may come", "my 3rd grade teacher", "marketing"])
def test_an_ordinal_before_its_noun_and_the_modal_may_are_no_date(text):
    assert not DATE.search(text)


def test_month_and_year():
    assert MONTH_NAME.search("back in June") and MONTH_NAME.search("in May")
    assert not MONTH_NAME.search("you may go")
    assert YEAR.search("since 2019") and not YEAR.search("code 4721")
