"""Helpers for driving `grm` in-process (`grm.cli.main`) and, where the process itself matters
(broken pipes, argv bytes), as a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from grm.cli import main
from tests.conftest import ROOT

TINY = "tiny-random-llama"


@pytest.fixture(autouse=True)
def _restore_torch_threads():
    """In-process runs set torch's thread count; give the rest of the session its own back."""
    torch = sys.modules.get("torch")
    n = torch.get_num_threads() if torch else None
    yield
    if n is not None:
        torch.set_num_threads(n)


@pytest.fixture()
def grm(capsys):
    """grm(*argv) -> (exit status, stdout, stderr), in-process; argparse exits come back as statuses."""

    def run(*argv: object) -> tuple[int, str, str]:
        try:
            code = main([str(a) for a in argv])
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 2
        out = capsys.readouterr()
        return code, out.out, out.err

    return run


@pytest.fixture()
def grm_json(grm):
    """grm_json(*argv) -> (exit status, the JSON object on stdout or None)."""

    def run(*argv: object) -> tuple[int, dict | None]:
        code, out, err = grm(*argv, "--json")
        return code, (json.loads(out) if out.strip() else None)

    return run


def subprocess_grm(*argv: str | bytes, **kw) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "2"}
    return subprocess.run([sys.executable, "-m", "grm", *argv], cwd=ROOT, env=env, capture_output=True, **kw)


def one_error_line(stderr: str) -> str:
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("grm: error:") and "Traceback" not in stderr, stderr
    return lines[0]
