"""User mistakes end in one clear line and exit 2 (CLI) or a typed exception (API)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from grm.errors import StoreError, UserInputError
from tests.conftest import ROOT


def grm(*args, env_extra=None):
    env = {**os.environ, "OMP_NUM_THREADS": "2", **(env_extra or {})}
    return subprocess.run([sys.executable, "-m", "grm", *args], capture_output=True, text=True, cwd=ROOT, env=env)


def grm_here(capfd, *args) -> tuple[int, str, str]:
    """`grm ARGS` in this process, for steps whose process does not matter (no child to start):
    (exit status, stdout, stderr), captured at the file descriptors as a child's would be."""
    import torch

    from grm.cli import main

    capfd.readouterr()
    threads = torch.get_num_threads()
    try:
        code = main(list(args))
    finally:
        torch.set_num_threads(threads)  # the CLI sets it; the rest of the session keeps its own
    out = capfd.readouterr()
    return code, out.out, out.err


def test_missing_file_is_a_user_error(make_runtime, tmp_path):
    rt = make_runtime()
    with pytest.raises(UserInputError, match="no such file"):
        rt.ingest([tmp_path / "nope.txt"], progress=False)


def test_binary_and_empty_files_in_a_folder_are_skipped(make_runtime, tmp_path, caplog):
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "empty.txt").write_text("")
    (folder / "blob.bin").write_bytes(b"\x00\x01\x02binary")
    (folder / "latin1.txt").write_bytes("caf\xe9".encode("latin-1"))
    (folder / "good.txt").write_text("A good document.\n")
    rt = make_runtime()
    results = rt.ingest([folder], progress=False)
    assert [r.name for r in results] == [str(folder / "good.txt")]
    text = caplog.text
    assert "empty" in text and "binary" in text and "UTF-8" in text


def test_nothing_ingestible_is_a_user_error(make_runtime, tmp_path):
    (tmp_path / "empty.txt").write_text("   \n")
    rt = make_runtime()
    with pytest.raises(UserInputError, match="nothing could be ingested"):
        rt.ingest([tmp_path / "empty.txt"], progress=False)


def test_unknown_model_is_a_user_error(tmp_path):
    from grm.runtime import Runtime

    with pytest.raises(UserInputError, match="unknown model 'no-such-model'"):
        Runtime.open(store=tmp_path / "s", model="no-such-model")


def test_a_non_store_directory_is_refused_and_left_alone(tmp_path):
    from grm.runtime import Runtime

    (tmp_path / "mine.txt").write_text("precious")
    with pytest.raises(StoreError, match="not a GRM store"):
        Runtime.open(store=tmp_path, model="tiny-random-llama")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine.txt"]
    assert (tmp_path / "mine.txt").read_text() == "precious"


def test_a_question_longer_than_the_window_is_a_user_error(make_runtime):
    rt = make_runtime()
    with pytest.raises(UserInputError, match="prompt too long"):
        rt.ask("x" * 40000, mode="exact")
    with pytest.raises(UserInputError, match="empty question"):
        rt.ask("  ", mode="exact")


def test_cli_user_errors_are_one_line_and_exit_2(tmp_path):
    store = str(tmp_path / "store")
    cases = [
        ("ingest", str(tmp_path / "missing.txt"), "--store", store, "--model", "tiny-random-llama"),
        ("ask", "hi", "--store", store, "--model", "no-such-model"),
        ("ask", "--store", store, "--model", "tiny-random-llama"),
    ]
    for args in cases:
        proc = grm(*args)
        assert proc.returncode == 2, (args, proc.stderr)
        lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
        assert len(lines) == 1 and lines[0].startswith("grm: error:"), proc.stderr
        assert "Traceback" not in proc.stderr


def test_cli_ingest_then_ask_json(tmp_path):
    doc = tmp_path / "d.txt"
    doc.write_text("The harbor boat is called Marigold.\n\nIt sails on Tuesdays.\n")
    store = str(tmp_path / "store")
    proc = grm("ingest", str(doc), "--store", store, "--model", "tiny-random-llama", "--json")
    assert proc.returncode == 0, proc.stderr
    import json

    assert json.loads(proc.stdout)["documents"] == 1
    proc = grm("ask", "--prompt-file", str(doc), "--mode", "exact", "--max-new-tokens", "3", "--store", store,
               "--model", "tiny-random-llama", "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    for key in ("answer", "mode", "ttft_s", "total_s", "prompt_tokens", "tokens_from_memory", "tokens_computed",
                "mounted"):
        assert key in out
    assert out["tokens_from_memory"] + out["tokens_computed"] == out["prompt_tokens"]
    assert out["tokens_computed"] == 1  # the whole prompt was stored: only its last token is re-read


def test_cli_encrypted_store_needs_the_right_key(tmp_path, capfd, monkeypatch):
    """The refusals run as processes (their whole stderr is the one line); the ingest before them
    and the ask with the key from the environment run in this process."""
    doc = tmp_path / "d.txt"
    doc.write_text("The vault code is 4471.\n")
    key, wrong = tmp_path / "key", tmp_path / "wrong"
    key.write_bytes(bytes(range(32)))
    wrong.write_text("ab" * 32)
    store = str(tmp_path / "store")
    base = ("--store", store, "--model", "tiny-random-llama")
    code, _out, err = grm_here(capfd, "ingest", str(doc), *base, "--key-file", str(key), "--json")
    assert code == 0, err
    for extra in (("--key-file", str(wrong)), ()):
        proc = grm("ask", "--prompt-file", str(doc), "--mode", "exact", "--max-new-tokens", "1", *base, *extra)
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "grm: error:" in proc.stderr, proc.stderr
    monkeypatch.setenv("GRM_MASTER_KEY", bytes(range(32)).hex())
    code, stdout, err = grm_here(capfd, "ask", "--prompt-file", str(doc), "--mode", "exact", "--max-new-tokens", "1",
                                 "--json", *base)
    assert code == 0, err
    import json

    out = json.loads(stdout)
    assert out["tokens_computed"] == 1  # served from the encrypted store
    # nothing readable in the clear on disk
    blob = b"".join(p.read_bytes() for p in (tmp_path / "store").rglob("*") if p.is_file())
    assert b"vault code is 4471" not in blob
