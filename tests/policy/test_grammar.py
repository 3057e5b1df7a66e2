"""The command grammar: every form, what is not a command, and hostile input."""

from __future__ import annotations

import pytest

from grm.policy.grammar import (
    MAX_HEAD_CHARS,
    USAGE,
    ConfirmForget,
    Correct,
    CullGraft,
    Forget,
    Malformed,
    Pin,
    Remember,
    ReviewDecision,
    SetDurability,
    SetMutability,
    Show,
    Why,
    parse,
)


@pytest.mark.parametrize("line, want", [
    ("remember permanently: my locker code is 1234", Remember("my locker code is 1234", "permanent")),
    ("remember this for the project: the build uses cmake", Remember("the build uses cmake", "project")),
    ("remember for the project: x", Remember("x", "project")),
    ("remember this for the session: x", Remember("x", "session")),
    ("remember for now: x", Remember("x", "volatile")),
    ("remember: x", Remember("x", None)),
    ("forget: locker code", Forget("locker code")),
    ("confirm forget c-12ab", ConfirmForget("c-12ab")),
    ("confirm forget: c-12ab", ConfirmForget("c-12ab")),
    ("correct memory: locker code 1234 => 5678", Correct("locker code 1234", "5678")),
    ("pin: locker", Pin("locker", True)),
    ("unpin: locker", Pin("locker", False)),
    ("mark immutable: locker", SetMutability("locker", False)),
    ("mark mutable: locker", SetMutability("locker", True)),
    ("approve review r-1a", ReviewDecision("approve", "r-1a")),
    ("reject review r-1a", ReviewDecision("reject", "r-1a")),
    ("approve review: r-1a", ReviewDecision("approve", "r-1a")),
    ("edit review r-1a: my code is 9", ReviewDecision("edit", "r-1a", "my code is 9")),
    ("cull graft g-42 into sections", CullGraft("g-42")),
    ("show memory", Show(None)),
    ("show memory about: locker", Show("locker")),
    ("why do you remember: locker code", Why("locker code")),
    ("set durability: full", SetDurability("full")),
    ("set durability strict", SetDurability("strict")),
])
def test_every_form_parses(line, want):
    assert parse(line) == want


@pytest.mark.parametrize("line", [
    "", "   ", "\n\t ", "hello there", "forget it", "remember when we met?", "Note: buy milk",
    "Why do you remember that?", "pin code 1234", "I said: remember permanently: x",
    "x" * 10_000, "why: because",
])
def test_ordinary_turns_are_not_commands(line):
    assert parse(line) is None


@pytest.mark.parametrize("line, group", [
    ("forget:", "forget"), ("forget:   ", "forget"), ('forget: ""', "forget"), ("pin:", "pin"),
    ("remember permanently:", "remember"), ("remember permanently my code is 1", "remember"),
    ("remember this for the projet: x", "remember"),
    ("correct memory: no arrow here", "correct"), ("correct memory: => 5", "correct"),
    ("correct memory: x =>", "correct"), ('correct memory: "x" y => z', "correct"),
    ("approve review", "review"), ("approve review r-1 r-2", "review"), ("reject review ☃", "review"),
    ("approve review r-1: extra", "review"), ("edit review r-1:", "review"), ("edit review: r-1 x", "review"),
    ("confirm forget", "confirm"), ("cull graft g-1", "cull"), ("cull graft g-1 into pieces", "cull"),
    ("set durability: fast", "set"), ("set durability:", "set"), ("show memory about x", "show"),
    ("correct memory x => y", "correct"), ("mark immutable locker", "mark"),
])
def test_malformed_commands_get_their_usage(line, group):
    cmd = parse(line)
    assert isinstance(cmd, Malformed), cmd
    assert cmd.usage == USAGE[group]
    assert "\n" not in cmd.usage and "\n" not in cmd.reason


def test_case_folding_and_compatibility_forms():
    assert parse("REMEMBER PERMANENTLY: Ich heiße X") == Remember("Ich heiße X", "permanent")
    assert parse("ＲＥＭＥＭＢＥＲ ｐｅｒｍａｎｅｎｔｌｙ： x") == Remember("x", "permanent")  # full width, ':' too
    assert parse("  Forget :  ẞtrasse  ") == Forget("ẞtrasse")  # values keep their case
    assert parse("Set Durability: FULL") == SetDurability("full")
    assert parse("SHOW MEMORY") == Show(None)


def test_values_keep_colons_quotes_and_arrows():
    assert parse("remember permanently: the meeting is at 10:30") == Remember("the meeting is at 10:30", "permanent")
    assert parse('remember: "quoted whole"') == Remember("quoted whole", None)
    assert parse("remember: it's \"half") == Remember("it's \"half", None)
    assert parse("correct memory: arrow => the arrow is =>") == Correct("arrow", "the arrow is =>")
    assert parse('correct memory: "a => b" => c') == Correct("a => b", "c")
    assert parse("correct memory: “curly” => 'single'") == Correct("curly", "single")
    assert parse("correct memory: x => y => z") == Correct("x", "y => z")


def test_long_lines():
    long_value = "v" * 10_000
    cmd = parse("remember permanently: " + long_value)
    assert isinstance(cmd, Malformed) and "10000 characters" in cmd.reason
    assert isinstance(parse("forget: " + "y" * 10_000), Malformed)
    assert parse("a" * MAX_HEAD_CHARS + ": remember: x") is None  # the head is too long to be one
    assert parse("remember permanently: " + "w " * 900) == Remember(("w " * 900).strip(), "permanent")


def test_non_strings_are_not_commands():
    assert parse(None) is None
    assert parse(b"forget: x") is None
