"""What the CLI prints to a terminal: text that came from a store, a document or a model never
carries control characters there. A document named "\\x1b[2J\\x1b[31mall records damaged" would
otherwise clear the screen and print a fake report under `grm stats`.

`printable(text)` shows every C0 and C1 control character (ESC, CR, backspace, CSI, ...), DEL
and the bidirectional overrides (Trojan Source) as a visible escape (`\\x1b`, `\\u202e`); newlines
and tabs stay unless `lines=False`. `say(...)` prints through it. `json_text(obj)` is one JSON
document whose strings hold none of them raw either (JSON already escapes C0; C1, DEL and the
bidi controls become \\u escapes). `TerminalFilter` does the same to the CLI's log lines.
"""

from __future__ import annotations

import json
import logging
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TextIO

_BIDI = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
_UNSAFE = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f{_BIDI}]")
_UNSAFE_ONE_LINE = re.compile(f"[\x00-\x1f\x7f-\x9f{_BIDI}]")
_UNSAFE_IN_JSON = re.compile(f"[\x7f-\x9f{_BIDI}]")  # json.dumps escapes C0 itself


def _escape(m: re.Match) -> str:
    c = ord(m.group())
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"


def printable(text: object, *, lines: bool = True) -> str:
    """`text` (str() of it) with control characters shown as escapes; `lines=False` escapes
    newlines and tabs too (a name or a one-line field)."""
    return (_UNSAFE if lines else _UNSAFE_ONE_LINE).sub(_escape, str(text))


def say(*parts: object, file: TextIO | None = None, flush: bool = False, lines: bool = True) -> None:
    """print(*parts) with each part made printable."""
    print(*(printable(p, lines=lines) for p in parts), file=file if file is not None else sys.stdout, flush=flush)


def json_text(obj: Any, **dumps: Any) -> str:
    """json.dumps(obj, ensure_ascii=False, **dumps) with no control character left raw."""
    return _UNSAFE_IN_JSON.sub(lambda m: f"\\u{ord(m.group()):04x}", json.dumps(obj, ensure_ascii=False, **dumps))


@contextmanager
def waiting(what: str, stream: TextIO | None = None) -> Iterator[None]:
    """On a terminal, `grm: WHAT ...` on stderr while a step without progress of its own runs
    (importing torch and loading a model: seconds), erased when it ends; elsewhere nothing, so
    captured stderr holds only warnings and errors."""
    stream = stream if stream is not None else sys.stderr
    shown = stream.isatty()
    if shown:
        stream.write(f"grm: {printable(what, lines=False)} ...")
        stream.flush()
    try:
        yield
    finally:
        if shown:
            stream.write("\r\x1b[K")  # back to the line's start, clear it
            stream.flush()


class TerminalFilter(logging.Filter):
    """A handler filter that makes every log line printable (after any redaction)."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg, record.args = printable(record.getMessage()), None
        return True
