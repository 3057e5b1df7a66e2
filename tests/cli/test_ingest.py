"""`grm ingest` on bad input (grm/cli/ingest.py, grm/runtime/files.py): each bad file is skipped with a
warning naming it, never an abort of the whole ingest, never a hang, never a file read into memory
whole when it is over the limit."""

from __future__ import annotations

import logging
import os
import socket
import threading
import tracemalloc

import pytest

from grm.runtime.files import MAX_FILE_BYTES, collect
from tests.cli.conftest import TINY


def test_a_file_name_that_is_not_utf8_is_skipped_and_named(tmp_path, caplog):
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "good.txt").write_text("A good document.\n")
    bad = os.fsencode(folder) + b"/caf\xe9.txt"
    with open(bad, "wb") as f:
        f.write(b"text in a badly named file\n")
    with caplog.at_level(logging.WARNING, "grm.ingest"):
        docs = collect([folder])
    assert [d.name for d in docs] == [str(folder / "good.txt")]
    assert "caf\\xe9.txt" in caplog.text and "file name is not UTF-8" in caplog.text


def test_an_oversized_file_is_refused_before_it_is_read(tmp_path, caplog):
    huge = tmp_path / "huge.txt"
    with open(huge, "wb") as f:  # 45 MB, one line, sparse: costs no disk
        f.truncate(45 << 20)
    (tmp_path / "small.txt").write_text("small\n")
    tracemalloc.start()
    try:
        with caplog.at_level(logging.WARNING, "grm.ingest"):
            docs = collect([huge, tmp_path / "small.txt"])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert [d.text for d in docs] == ["small\n"]
    assert peak < 1 << 20, peak  # never read: far below the 45 MB
    assert f"over the {MAX_FILE_BYTES}-byte limit" in caplog.text and "--max-file-size" in caplog.text
    assert [d.text for d in collect([tmp_path / "small.txt"], max_bytes=6)] == ["small\n"]
    assert collect([tmp_path / "small.txt"], max_bytes=5) == []


def _collect_in_thread(paths: list) -> list:
    out: list = []
    t = threading.Thread(target=lambda: out.append(collect(paths)), daemon=True)
    t.start()
    t.join(20)
    assert not t.is_alive(), "collect hung on a special file"
    return out[0]


def test_fifos_sockets_and_devices_are_skipped_without_opening(tmp_path, caplog):
    folder = tmp_path / "docs"
    folder.mkdir()
    os.mkfifo(folder / "pipe")
    os.mkfifo(tmp_path / "given")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(folder / "sock"))
    (folder / "good.txt").write_text("fine\n")
    try:
        with caplog.at_level(logging.WARNING, "grm.ingest"):
            docs = _collect_in_thread([folder, tmp_path / "given", "/dev/zero"])
    finally:
        sock.close()
    assert [d.text for d in docs] == ["fine\n"]
    assert caplog.text.count("a FIFO") == 2 and "a socket" in caplog.text and "a character device" in caplog.text


def test_a_missing_path_is_still_a_user_error(tmp_path):
    from grm.errors import UserInputError

    with pytest.raises(UserInputError, match="no such file or folder"):
        collect([tmp_path / "nope"])


def test_cli_ingest_goes_on_past_bad_files_and_names_them(grm, tmp_path, caplog):
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "good.txt").write_text("The harbor boat is called Marigold.\n")
    (folder / "big.txt").write_text("x" * 5000)
    with open(os.fsencode(folder) + b"/na\xefve.txt", "wb") as f:
        f.write(b"a naive document\n")
    os.mkfifo(folder / "pipe")
    caplog.set_level(logging.WARNING, "grm.ingest")  # in-process, warnings reach pytest's log capture
    code, out, err = grm("ingest", folder, "--store", tmp_path / "s", "--model", TINY, "--max-file-size", "4k",
                         "--json")
    assert code == 0, err
    import json

    assert json.loads(out)["documents"] == 1
    log = caplog.text
    assert "big.txt: 5000 bytes is over the 4096-byte limit" in log
    assert "na\\xefve.txt" in log and "pipe: a FIFO" in log
    code, _, err = grm("ingest", folder, "--store", tmp_path / "s", "--max-file-size", "lots")
    assert code == 2 and "not a byte count" in err


def test_the_ingest_help_states_the_files_default_limit():
    from grm.cli import build_parser

    help_text = build_parser()._subparsers._group_actions[0].choices["ingest"].format_help()
    assert f"(default {MAX_FILE_BYTES >> 20}M)" in " ".join(help_text.split())


def test_the_ingest_layout_default_is_the_runtimes_and_the_help_says_it():
    import inspect

    from grm.cli import build_parser
    from grm.runtime import Runtime

    parser = build_parser()._subparsers._group_actions[0].choices["ingest"]
    default = inspect.signature(Runtime.ingest).parameters["layout"].default
    assert parser.parse_args(["x"]).layout == default == "seen"
    assert "(default seen)" in " ".join(parser.format_help().split())
