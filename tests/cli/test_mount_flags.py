"""`--repair`, `--blend`, `--reread` and `--lead` (grm/cli/common.add_mount_flags): one set of flags for
ask, chat and serve, passed through to RuntimeConfig; a bad value is an error line naming the flag and exit 2."""

from __future__ import annotations

import pytest

from grm.cli import build_parser
from grm.cli.common import mount_options


@pytest.mark.parametrize("command", [["ask", "q"], ["chat"], ["serve", "--no-auth"]])
def test_every_command_that_mounts_takes_the_same_flags(command):
    args = build_parser().parse_args([*command, "--blend", "0.2", "--reread", "never", "--repair", "3",
                                      "--lead", "rules", "--extractor", "rule", "--rules", "off", "--later", "2", "--meaning", "off"])
    assert mount_options(args) == {"repair": 3, "blend": 0.2, "reread": "never", "lead": "rules",
                                   "extractor": "rule", "rules": "off", "later": 2, "meaning": "off"}
    defaults = build_parser().parse_args(command)
    assert mount_options(defaults) == {"repair": 0, "blend": 0.0, "reread": "auto", "lead": "auto",
                                       "extractor": "rule", "rules": "auto", "later": 1, "meaning": "auto"}


@pytest.mark.parametrize("flags", [["--blend", "1.5"], ["--blend", "x"], ["--reread", "sometimes"],
                                   ["--lead", "guess"], ["--rules", "some"], ["--later", "x"],
                                   ["--meaning", "maybe"]])
def test_bad_mount_flags_are_refused_in_one_line(grm, tmp_path, flags):
    code, out, err = grm("ask", "--store", tmp_path / "s", "q", *flags)
    last = err.strip().splitlines()[-1]  # argparse's usage, then the one error line
    assert code == 2 and out == "" and last.startswith("grm ask: error: argument --") and flags[0] in last


def test_serve_keeps_a_host_tier_under_its_budget():
    from grm.cli.common import runtime_config

    args = build_parser().parse_args(["serve", "--no-auth", "--host-budget", "2G"])
    assert args.host_budget == 2 << 30
    assert runtime_config(args, host_budget=args.host_budget).host_budget == 2 << 30
    assert build_parser().parse_args(["serve", "--no-auth"]).host_budget == 1 << 30
    assert build_parser().parse_args(["serve", "--no-auth", "--host-budget", "0"]).host_budget == 0
