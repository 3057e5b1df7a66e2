"""The parser and the openers (grm/cli/__init__.py, grm/cli/common.py): no torch to build it, common
flags before and after nested actions, choices from the planes, help on every flag, one tenant
rule, --threads clamped."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

import pytest

from grm.cli import SUBCOMMANDS, build_parser
from grm.cli.common import cores, open_store, runtime_config
from grm.errors import UserInputError
from tests.cli.conftest import TINY, one_error_line
from tests.conftest import ROOT


def test_building_the_parser_and_help_load_no_torch():
    code = ("import sys; from grm.cli import build_parser; p = build_parser(); p.format_help(); "
            "print(sorted(m for m in ('torch', 'transformers', 'numpy') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def _subparsers(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _subparsers(sub, path + (name,))


def test_every_flag_of_every_subcommand_has_help_text():
    hidden = {("ask", "--block-tokens")}  # an internal knob, deliberately out of --help
    missing = []
    for path, parser in _subparsers(build_parser()):
        for action in parser._actions:
            if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
                continue
            name = action.option_strings[-1] if action.option_strings else action.dest
            if not action.help or (action.help == argparse.SUPPRESS and (path[-1:] + (name,)) not in hidden):
                missing.append(" ".join(path + (name,)))
    assert missing == []
    for cmd in ("ask", "chat", "demo"):
        parser = dict(_subparsers(build_parser()))[(cmd,)]
        assert "most tokens generated" in parser.format_help(), cmd


def test_every_flag_with_a_default_names_it():
    """Issue 30: a help text says the default a user gets (a value, or what leaving it out means),
    never where in the code it comes from ("(default: Runtime.ingest's)")."""
    vague = []
    for path, parser in _subparsers(build_parser()):
        for action in parser._actions:
            if not action.option_strings or action.help in (None, argparse.SUPPRESS):
                continue
            if isinstance(action, (argparse._HelpAction, argparse._StoreTrueAction, argparse._StoreFalseAction)):
                continue
            if action.default is argparse.SUPPRESS:  # a copy below the top level: checked there
                continue
            if "default" not in action.help or "Runtime" in action.help:
                vague.append(" ".join(path + (action.option_strings[-1],)))
    assert vague == []


@pytest.mark.parametrize("argv", [
    ["grafts", "--store", "D", "--tenant", "t", "list"],
    ["grafts", "list", "--store", "D", "--tenant", "t"],
    ["grafts", "--store", "X", "show", "--store", "D", "abc", "--tenant", "t"],  # the later one wins
    ["archive", "--store", "D", "stats", "--tenant", "t"],
    ["archive", "stats", "--store", "D", "--tenant", "t"],
    ["memory", "--store", "D", "list", "--tenant", "t"],
    ["memory", "list", "--store", "D", "--tenant", "t"],
])
def test_common_flags_before_or_after_the_action(argv):
    args = build_parser().parse_args(argv)
    assert (args.store, args.tenant, args.durability, args.device) == ("D", "t", "normal", "auto")


def _leaves() -> list[tuple[tuple[str, ...], list[str]]]:
    """Every runnable command path (`stats`, `grafts list`, ...) with placeholders for its required
    positional arguments."""
    out = []
    for path, parser in _subparsers(build_parser()):
        if not path or any(isinstance(a, argparse._SubParsersAction) for a in parser._actions):
            continue
        pos = [a for a in parser._actions if not a.option_strings and a.nargs in (None, "+")]
        out.append((path, ["0:1" if a.dest == "spans" else "X" for a in pos]))
    return out


@pytest.mark.parametrize("path, positionals", _leaves(), ids=lambda v: " ".join(v) if isinstance(v, tuple) else "")
def test_common_flags_before_or_after_every_subcommand(path, positionals):
    """Issue 30: `grm --store D stats` works like `grm stats --store D`, for every subcommand (and
    between a family and its action); a flag given twice: the later one wins; unset ones keep
    their defaults."""
    flags = ["--store", "D", "--tenant", "t", "--json"]
    orders = [flags + [*path, *positionals], [*path, *positionals] + flags]
    if len(path) == 2:
        orders.append([path[0], *flags, path[1], *positionals])
    for argv in orders:
        args = build_parser().parse_args(argv)
        assert (args.store, args.tenant, args.json, args.durability, args.threads) == ("D", "t", True, "normal", None)
    args = build_parser().parse_args(["--store", "X", *path, *positionals, "--store", "D"])
    assert args.store == "D"
    args = build_parser().parse_args([*path, *positionals])
    assert (args.store, args.tenant, args.json, args.device) == (None, "default", False, "auto")


def test_a_store_given_before_the_subcommand_is_the_one_used(grm, tmp_path):
    store = tmp_path / "s"
    assert grm("--store", store, "memory", "remember permanently: the boat is Marigold")[0] == 0
    code, out, err = grm("--store", store, "--json", "stats")
    assert code == 0 and json.loads(out)["records"] > 0, err
    code, _, err = grm("--store", tmp_path / "nope", "stats")
    assert code == 2 and str(tmp_path / "nope") in one_error_line(err)


def test_every_subcommand_is_covered_by_the_both_orders_test():
    assert {p[:1] for p, _ in _leaves()} == {n for n in dict(_subparsers(build_parser())) if len(n) == 1}
    assert ("documents", "delete") in {p for p, _ in _leaves()} and ("stats",) in {p for p, _ in _leaves()}


def test_nested_actions_keep_their_defaults():
    args = build_parser().parse_args(["archive", "stats"])
    assert (args.store, args.tenant, args.json, args.threads, args.dtype) == (None, "default", False, None, "auto")


def test_choices_are_the_planes_constants(grm):
    from grm.route import CHANNELS
    from grm.runtime.config import ASK_MODES, LAYOUTS
    from grm.store.config import DURABILITY_MODES

    parser = build_parser()
    subs = dict(_subparsers(parser))

    def choices(cmd, dest):
        return tuple(next(a for a in subs[cmd]._actions if a.dest == dest).choices)

    assert choices(("ask",), "mode") == ASK_MODES
    assert choices(("ingest",), "layout") == LAYOUTS
    assert choices(("chat",), "channel") == CHANNELS
    assert choices(("stats",), "durability") == DURABILITY_MODES
    from grm.runtime.config import DURABILITY

    assert DURABILITY is DURABILITY_MODES  # defined once, by the store plane
    code, _, err = grm("ask", "q", "--mode", "telepathy")
    assert code == 2 and "invalid choice: 'telepathy'" in err


def test_a_new_subcommand_module_is_one_line_in_the_list():
    assert SUBCOMMANDS[:3] == ["grm.cli.bench", "grm.cli.ingest", "grm.cli.ask"]
    import importlib

    for name in SUBCOMMANDS:
        assert callable(importlib.import_module(name).add_parser), name


def test_threads_above_the_cores_are_clamped_with_a_warning(tmp_path, capsys):
    args = build_parser().parse_args(["ask", "q", "--store", str(tmp_path / "s"), "--threads", "100000"])
    config = runtime_config(args)
    assert config.threads == cores() and config.threads < 100000
    assert f"--threads 100000 is more than the {cores()} cores here" in capsys.readouterr().err
    args = build_parser().parse_args(["ask", "q", "--store", str(tmp_path / "s"), "--threads", "1"])
    assert runtime_config(args).threads == 1 and capsys.readouterr().err == ""


def test_threads_zero_is_a_usage_error(grm):
    code, _, err = grm("ask", "q", "--threads", "0")
    assert code == 2 and "--threads: must be >= 1" in err


def test_device_and_dtype_reach_the_runtime_config(tmp_path):
    args = build_parser().parse_args(["ask", "q", "--store", str(tmp_path), "--device", "cpu", "--dtype", "float32"])
    config = runtime_config(args)
    assert (getattr(config, "device", "cpu"), getattr(config, "dtype", "float32")) == ("cpu", "float32")
    from grm.runtime.config import RuntimeConfig

    if "device" in RuntimeConfig.__dataclass_fields__:
        bad = build_parser().parse_args(["ask", "q", "--store", str(tmp_path), "--device", "tpu"])
        with pytest.raises(UserInputError):
            runtime_config(bad)


@pytest.mark.parametrize("argv", [
    ["memory", "list"], ["memory", "remember: x is 1"], ["stats"], ["fsck"], ["archive", "stats"],
    ["ask", "q", "--model", TINY], ["grafts", "list", "--model", TINY],
])
def test_the_system_tenant_is_refused_everywhere(grm, tmp_path, argv):
    code, out, err = grm(*argv, "--store", tmp_path / "s", "--tenant", "_system")
    assert code == 2 and "bad tenant name '_system'" in one_error_line(err)
    assert not (tmp_path / "s").exists()


def test_one_tenant_rule_in_every_config():
    from grm.policy.config import PolicyConfig
    from grm.runtime.config import RuntimeConfig
    from grm.store.tenant import SYSTEM_TENANT, check_tenant

    for make in (lambda t: RuntimeConfig.from_options(store="/tmp/x", tenant=t), lambda t: PolicyConfig(tenant=t),
                 check_tenant):
        for bad in (SYSTEM_TENANT, "_x", "", "a b", "x" * 65):
            with pytest.raises(UserInputError, match="bad tenant name"):
                make(bad)
        make("team.a-1_b")


def test_reading_commands_never_create_a_store(tmp_path):
    args = build_parser().parse_args(["stats", "--store", str(tmp_path / "s")])
    with pytest.raises(UserInputError, match="no GRM store at"):
        open_store(args)
    assert not (tmp_path / "s").exists()
    with open_store(args, create=True) as store:
        assert list(store.records("default")) == []
    with open_store(args) as store:  # now it exists
        assert list(store.records("default")) == []
