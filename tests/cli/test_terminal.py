"""grm/cli/terminal.py: what the CLI prints carries no raw control character."""

from __future__ import annotations

import json
import logging

from grm.cli.terminal import TerminalFilter, json_text, printable


def test_printable_shows_controls_as_escapes_and_keeps_lines_unless_asked():
    assert printable("a\x1b[2Jb\rc\x08\x9b\x7f\u202e") == "a\\x1b[2Jb\\x0dc\\x08\\x9b\\x7f\\u202e"
    assert printable("one\n\ttwo") == "one\n\ttwo"
    assert printable("one\n\ttwo", lines=False) == "one\\x0a\\x09two"
    assert printable("ünïcode ✓ 東京") == "ünïcode ✓ 東京"


def test_json_text_is_the_same_json_with_no_raw_control():
    obj = {"name\x1b": ["\x9b0m", "\u202e", "plain", "\x7f"]}
    text = json_text(obj)
    assert json.loads(text) == obj
    assert not any(c in text for c in "\x1b\x9b\u202e\x7f")


def test_log_lines_are_printable():
    rec = logging.LogRecord("grm", logging.WARNING, __file__, 1, "skipping %s", ("\x1b[2Jfile",), None)
    assert TerminalFilter().filter(rec) and rec.getMessage() == "skipping \\x1b[2Jfile"


def test_a_wait_is_shown_on_a_terminal_and_erased_and_silent_elsewhere():
    import io

    from grm.cli.terminal import waiting

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    tty, pipe = Tty(), io.StringIO()
    with waiting("loading smollm2-135m\x1b[2J", tty), waiting("loading", pipe):
        assert tty.getvalue() == "grm: loading smollm2-135m\\x1b[2J ..."
    assert tty.getvalue().endswith("\r\x1b[K") and pipe.getvalue() == ""
