"""`grm grafts` and `grm chat` (grm/cli/grafts.py, grm/cli/chat.py): ISO 8601 times, flags before or
after the action, and a chat line that is not UTF-8 refused while the chat goes on."""

from __future__ import annotations

import io
import json
import re
import sys

from tests.cli.conftest import TINY

ISO = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")


def test_a_chat_line_that_is_not_utf8_is_refused_and_the_chat_goes_on(grm, tmp_path, monkeypatch):
    store = tmp_path / "s"
    stdin = io.TextIOWrapper(io.BytesIO(  # chat reads its `.buffer`: bytes the test chooses
        b"The boat is called Marigold.\ncaf\xe9 \xff\nWhat is the boat called?\n"))
    monkeypatch.setattr(sys, "stdin", stdin)
    code, out, err = grm("chat", "--store", store, "--model", TINY, "--max-new-tokens", "2", "--json")
    assert code == 0, err
    rows = [json.loads(ln) for ln in out.splitlines()]
    assert len(rows) == 3 and "answer" in rows[0] and "answer" in rows[2]
    assert "line 2 is not UTF-8 text" in rows[1]["error"] and "answer" not in rows[1]
    assert rows[2]["turn"] == rows[0]["turn"] + 1  # the bad line was not a turn


def test_grafts_show_prints_iso_times_and_takes_flags_either_side(grm, tmp_path):
    store = tmp_path / "s"
    script = tmp_path / "chat.txt"
    script.write_text("The boat is called Marigold.\n")
    code, _, err = grm("chat", "--script", script, "--store", store, "--model", TINY, "--max-new-tokens", "2")
    assert code == 0, err
    code, out, err = grm("grafts", "--store", store, "--model", TINY, "list", "--json")
    assert code == 0, err
    grafts = json.loads(out)["grafts"]
    assert grafts and all(ISO.fullmatch(g["created"]) for g in grafts)
    gid = grafts[0]["id"]
    code, out, err = grm("grafts", "show", gid[:10], "--store", store, "--model", TINY)
    assert code == 0, err
    created = next(ln for ln in out.splitlines() if ln.startswith("created:"))
    assert ISO.fullmatch(created.split(": ", 1)[1]), created
    code, out, _ = grm("grafts", "--store", store, "list", "--model", TINY)
    assert code == 0 and ISO.search(out) and gid[:12] in out


def test_an_id_from_asks_mounted_works_with_grafts_show(grm, tmp_path):
    doc = tmp_path / "d.txt"
    doc.write_text("The harbor boat is called Marigold.\n\nIt sails on Tuesdays from the north pier.\n")
    store = tmp_path / "s"
    assert grm("ingest", doc, "--store", store, "--model", TINY)[0] == 0
    code, out, err = grm("ask", "When does the boat sail?", "--store", store, "--model", TINY,
                         "--max-new-tokens", "2", "--json")
    assert code == 0, err
    mounted = json.loads(out)["mounted"]
    assert mounted, out
    for m in mounted:
        code, out, err = grm("grafts", "show", m["id"], "--store", store, "--model", TINY, "--json")
        assert code == 0, (m, err)
        shown = json.loads(out)
        assert m["id"] in (shown["id"], shown["shares_block"]) and "Marigold" in shown["text"]
