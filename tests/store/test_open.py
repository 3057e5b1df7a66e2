"""Opening a store: creation rules, the marker, the lock, config validation."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from grm.errors import StoreError, UserInputError
from grm.store import StoreConfig
from tests.store.helpers import open_store


def test_missing_dir_is_created_as_a_store(root: Path) -> None:
    with open_store(root) as s:
        s.put("t", "block", "k")
    marker = json.loads((root / "GRM-STORE").read_text())
    assert marker == {"format": "grm-store", "version": 1}


def test_empty_dir_is_accepted(root: Path) -> None:
    root.mkdir()
    with open_store(root) as s:
        assert s.put("t", "block", "k").lsn == 1


def test_non_store_dir_is_refused_and_left_alone(root: Path) -> None:
    root.mkdir()
    (root / "notes.txt").write_text("mine")
    with pytest.raises(StoreError, match="is not a GRM store"):
        open_store(root)
    assert sorted(os.listdir(root)) == ["notes.txt"]


def test_a_file_is_refused(tmp_path: Path) -> None:
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(StoreError, match="is not a GRM store"):
        open_store(f)


def test_newer_format_version_is_refused(root: Path) -> None:
    open_store(root).close()
    (root / "GRM-STORE").write_text(json.dumps({"format": "grm-store", "version": 99}))
    with pytest.raises(StoreError, match="version 99"):
        open_store(root)


def test_second_open_while_locked_is_refused_naming_the_pid(root: Path) -> None:
    with open_store(root):
        with pytest.raises(StoreError, match=f"pid {os.getpid()}"):
            open_store(root)
    open_store(root).close()  # released on close


def test_lock_held_by_another_process_is_refused(root: Path) -> None:
    open_store(root).close()
    code = ("import sys, time; from pathlib import Path; from grm.store import Store, StoreConfig;"
            f"s = Store.open(StoreConfig(Path({str(root)!r}))); print('ready', flush=True); time.sleep(30)")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                            cwd=Path(__file__).resolve().parents[2])
    try:
        assert proc.stdout.readline().strip() == "ready"
        with pytest.raises(StoreError, match=f"pid {proc.pid}"):
            open_store(root)
    finally:
        proc.kill()
        proc.wait()
        proc.stdout.close()
    open_store(root).close()  # the dead holder's flock is gone


def test_lock_timeout_waits_for_the_holder(root: Path) -> None:
    s = open_store(root)
    t0 = time.monotonic()
    with pytest.raises(StoreError):
        open_store(root, lock_timeout=0.3)
    assert time.monotonic() - t0 >= 0.3
    s.close()


@pytest.mark.parametrize("kw", [{"durability": "sometimes"}, {"checkpoint_every": 0},
                                {"lock_timeout": -1}])
def test_bad_config_is_a_user_error(root: Path, kw: dict) -> None:
    with pytest.raises(UserInputError):
        StoreConfig(root, **kw)


@pytest.mark.parametrize("mode", ["volatile", "async", "normal", "full", "strict"])
def test_every_durability_mode_is_accepted(root: Path, mode: str) -> None:
    with open_store(root, durability=mode) as s:
        s.put("t", "block", "k", payload=b"x")
    with open_store(root, durability=mode) as s:
        assert s.get("t", "block", "k") is not None


def test_config_accepts_a_string_root(root: Path) -> None:
    assert StoreConfig(str(root)).root == root


def test_closed_store_refuses_calls(root: Path) -> None:
    s = open_store(root)
    s.close()
    s.close()  # idempotent
    with pytest.raises(StoreError, match="closed"):
        s.put("t", "block", "k")
    with pytest.raises(StoreError, match="closed"):
        s.get("t", "block", "k")


def test_recovery_does_not_import_torch(root: Path) -> None:
    open_store(root).close()
    code = ("import sys; from pathlib import Path; from grm.store import Store, StoreConfig;"
            f"Store.open(StoreConfig(Path({str(root)!r}))).close();"
            "print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[2])
    assert out.stdout.strip() == "[]"
