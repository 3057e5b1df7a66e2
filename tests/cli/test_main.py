"""The process as a whole (grm/cli/__init__.py): a reader that goes away, and argv bytes that are not
UTF-8. These need a real process, so they run `python -m grm`."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.cli.conftest import one_error_line, subprocess_grm
from tests.conftest import ROOT


def _with_closed_reader(*argv: str) -> subprocess.CompletedProcess:
    """Run grm with stdout a pipe whose reading end is already closed: every write fails with EPIPE,
    as in `grm ... | head` once head has exited."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        env = {**os.environ, "OMP_NUM_THREADS": "2"}
        return subprocess.run([sys.executable, "-m", "grm", *argv], cwd=ROOT, env=env, stdout=write_end,
                              stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(write_end)


def test_a_reader_that_goes_away_ends_quietly(grm, tmp_path):
    store = tmp_path / "s"
    for n in range(3):
        assert grm("memory", "--store", store, f"remember permanently: locker {n} code is {n}{n}")[0] == 0
    for argv in (["memory", "list", "--store", str(store)], ["stats", "--store", str(store)], ["--help"],
                 ["memory", "list", "--store", str(store), "--json"]):
        proc = _with_closed_reader(*argv)
        # argparse swallows the EPIPE of its help text itself and exits 0; our commands say 141
        assert proc.returncode == (0 if argv == ["--help"] else 141), (argv, proc.returncode, proc.stderr)
        assert proc.stderr == "", (argv, proc.stderr)


def test_argv_bytes_that_are_not_utf8_are_one_line_and_exit_2(tmp_path):
    store = str(tmp_path / "s")
    for argv, what in (
        (["ask", b"caf\xe9 au lait?", "--store", store], "the question"),
        (["memory", "remember:", b"my pin is \xff\xfe", "--store", store], "the memory command"),
        (["memory", "list", "--store", store, "--tenant", b"t\xe9"], "--tenant"),
    ):
        proc = subprocess_grm(*argv, text=True, errors="replace")
        line = one_error_line(proc.stderr)
        assert proc.returncode == 2 and f"{what} is not UTF-8 text" in line, proc.stderr
    assert not (tmp_path / "s").exists()  # refused before anything was opened


def test_a_store_path_that_is_not_utf8_still_works(tmp_path):
    store = os.fsencode(tmp_path) + b"/st\xe9re"
    proc = subprocess_grm("memory", "remember permanently: the boat is Marigold", "--store", store, text=True)
    assert proc.returncode == 0, proc.stderr
    assert os.path.isdir(store)


def test_a_store_password_is_masked_in_the_error_line(grm):
    """Issue 31: an unreachable Redis store named with a password prints `redis://:***@...`."""
    from tests.conftest import free_port

    code, out, err = grm("stats", "--store", f"redis://:S3cretPW@127.0.0.1:{free_port()}/ns")
    assert code == 2 and "S3cretPW" not in err and "redis://:***@127.0.0.1" in err, err
