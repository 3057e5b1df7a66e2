"""The user's words said back to them (grm/english/person.py)."""

from __future__ import annotations

import pytest

from grm.english.person import spoken_back


@pytest.mark.parametrize("said, back", [
    ("My bank is Ally", "Your bank is Ally"), ("Our standup is at 9 am", "Your standup is at 9 am"),
    ("I am in Oslo", "You are in Oslo"), ("I'm allergic to nuts", "You're allergic to nuts"),
    ("We meet in room 9", "You meet in room 9"), ("The US office is in Denver", "The US office is in Denver"),
    ("Ms. Ortiz is our landlord", "Ms. Ortiz is your landlord"),
])
def test_a_statement_spoken_back(said, back):
    assert spoken_back(said) == back
