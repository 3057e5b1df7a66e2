"""`grm bench`: lists the checkout's benchmarks, runs one, and says clearly when GRM runs from an
installed package that has no bench/ folder next to it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from grm.cli import bench as bench_cli
from tests.cli.conftest import one_error_line
from tests.conftest import ROOT


def test_help_lists_the_benchmarks_of_the_checkout(grm):
    code, out, _ = grm("bench", "--help")
    names = bench_cli.benchmarks()
    assert code == 0 and names is not None and {"exact", "grafts", "reliability"} <= set(names)
    assert "_common" not in names and "__init__" not in names and "lib" not in names
    assert all(n in " ".join(out.split()) for n in names)


def test_an_unknown_benchmark_is_one_error_line(grm):
    code, _, err = grm("bench", "no_such_bench")
    assert code == 2 and "known: " in one_error_line(err) and "exact" in err


def checkout(tmp_path: Path, monkeypatch, hello: str) -> Path:
    """A checkout-shaped bench/ folder (its _common.py and lib/) holding hello.py, grm's from now on."""
    bench = tmp_path / "bench"
    (bench / "lib").mkdir(parents=True)
    (bench / "_common.py").write_text("")
    (bench / "hello.py").write_text(hello)
    monkeypatch.setattr(bench_cli, "BENCH_DIR", bench)
    return bench


def test_a_benchmark_of_the_checkout_runs_with_the_parsed_flags(grm, tmp_path, monkeypatch):
    """A checkout-shaped bench/ folder (its _common.py and lib/): NAME.py's main(args) runs with the
    flags grm parsed, and its status is grm's."""
    checkout(tmp_path, monkeypatch,
             "from pathlib import Path\n"
             "def main(args):\n"
             f"    Path({str(tmp_path / 'ran')!r}).write_text(f'{{args.quick}} {{args.tenant}}')\n"
             "    return 3\n")
    code, _, _ = grm("bench", "hello", "--quick", "--tenant", "t1")
    assert code == 3 and (tmp_path / "ran").read_text() == "True t1"


def test_a_benchmarks_own_flags_are_passed_to_it_as_its_command_line(grm, tmp_path, monkeypatch):
    """`grm bench NAME --its-flag V` runs NAME.py as `python bench/NAME.py` would, with --model and
    --threads where given (what bench/results/ records as the command then runs as written); a flag
    it does not know is its own usage error; another command still refuses flags it does not know."""
    bench = checkout(tmp_path, monkeypatch,
                     "import argparse, sys\nfrom pathlib import Path\n"
                     "def main(args):\n    return 3\n"
                     "if __name__ == '__main__':\n"
                     "    p = argparse.ArgumentParser()\n"
                     "    for flag in ('--model', '--splits'):\n        p.add_argument(flag)\n"
                     "    p.add_argument('--threads', type=int)\n"
                     "    a = p.parse_args()\n"
                     f"    Path({str(tmp_path / 'ran')!r}).write_text(f'{{a.model}} {{a.threads}} {{a.splits}} "
                     "{sys.argv[0]}')\n"
                     "    sys.exit(4)\n")
    code, _, _ = grm("bench", "hello", "--splits", "fresh25", "--threads", "1", "--model", "m1")
    assert code == 4 and (tmp_path / "ran").read_text() == f"m1 1 fresh25 {bench / 'hello.py'}"
    code, _, err = grm("bench", "hello", "--no-such-flag")
    assert code == 2 and "unrecognized arguments: --no-such-flag" in err
    code, _, err = grm("stats", "--no-such-flag")
    assert code == 2 and "unrecognized arguments: --no-such-flag" in err


def test_an_installed_package_without_a_checkout_says_benchmarks_need_one(tmp_path: Path):
    """The grm package copied alone into a folder (as pip installs it: no bench/ beside it)."""
    site = tmp_path / "site"
    shutil.copytree(ROOT / "grm", site / "grm", ignore=shutil.ignore_patterns("__pycache__"))
    env = {**os.environ, "PYTHONPATH": str(site), "OMP_NUM_THREADS": "2"}
    run = subprocess.run([sys.executable, "-m", "grm", "bench", "exact"], cwd=site, env=env,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 2, run.stderr
    assert "benchmarks need a source checkout" in one_error_line(run.stderr)
    helped = subprocess.run([sys.executable, "-m", "grm", "bench", "--help"], cwd=site, env=env,
                            capture_output=True, text=True, timeout=120)
    assert helped.returncode == 0 and "source checkout" in helped.stdout
    # The copy really was the one imported (not the checkout's grm on the path).
    where = subprocess.run([sys.executable, "-c", "import grm; print(grm.__file__)"], cwd=site, env=env,
                           capture_output=True, text=True, timeout=60)
    assert where.stdout.strip().startswith(str(site))


@pytest.mark.parametrize("missing", ["_common.py", "lib"])
def test_a_bench_folder_that_is_not_ours_is_not_a_checkout(tmp_path: Path, missing: str):
    bench = tmp_path / "bench"
    (bench / "lib").mkdir(parents=True)
    (bench / "_common.py").write_text("")
    (bench / "x.py").write_text("")
    assert bench_cli.benchmarks(bench) == ["x"]
    target = bench / missing
    shutil.rmtree(target) if target.is_dir() else target.unlink()
    assert bench_cli.benchmarks(bench) is None


def test_a_tagged_run_writes_its_results_beside_the_untagged_ones(tmp_path: Path):
    """`python bench/NAME.py --tag T` writes NAME-T.json/.md (the tag in the recorded command), so a
    re-run does not overwrite the earlier run's files; a tag that is not a plain name is a usage error."""
    script = tmp_path / "hello.py"
    script.write_text(
        f"import sys\nsys.path.insert(0, {str(ROOT / 'bench')!r})\n"
        "from pathlib import Path\nimport _common\n"
        f"_common.RESULTS = Path({str(tmp_path / 'results')!r})\n"
        "def main(args):\n"
        "    _common.write_results('hello', {}, ['| a |'], 'python bench/hello.py')\n"
        "    return 0\n"
        "_common.run_cli(main)\n")

    def run(*flags: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, str(script), *flags], capture_output=True, text=True, timeout=120)

    assert run().returncode == 0 and run("--tag", "rerun-2").returncode == 0
    results = tmp_path / "results"
    assert sorted(p.name for p in results.iterdir()) == ["hello-rerun-2.json", "hello-rerun-2.md", "hello.json", "hello.md"]
    assert "- command: `python bench/hello.py --tag rerun-2`" in (results / "hello-rerun-2.md").read_text()
    assert "--tag" not in (results / "hello.md").read_text()
    bad = run("--tag", "../x")
    assert bad.returncode == 2 and "letters, digits, dots and dashes only" in bad.stderr
    assert not (tmp_path / "x.md").exists() and len(list(results.iterdir())) == 4
