"""`grm memory`: commands through the CLI on a real store folder, without a model."""

from __future__ import annotations

import json

from grm.cli import main


def grm(capsys, store, *words, json_out=False):
    argv = ["memory", "--store", str(store), *(["--json"] if json_out else []), *words]
    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_remember_list_correct_why_across_processes(tmp_path, capsys):
    store = tmp_path / "store"
    code, out, _ = grm(capsys, store, "remember permanently: my locker code is 1234")
    assert code == 0 and "remembered" in out
    code, out, _ = grm(capsys, store, "list", json_out=True)
    facts = json.loads(out)["facts"]
    assert code == 0 and [f["value"] for f in facts] == ["1234"]
    code, out, _ = grm(capsys, store, "correct", "memory:", "locker", "code", "=>", "5678")  # unquoted words
    assert code == 0 and "corrected" in out
    code, out, _ = grm(capsys, store, "why do you remember: locker code", json_out=True)
    res = json.loads(out)
    assert code == 0 and "remember permanently" in res["text"] and "correct memory" in res["text"]


def test_forget_many_then_confirm(tmp_path, capsys):
    store = tmp_path / "store"
    grm(capsys, store, "remember: my locker code is 1")
    grm(capsys, store, "remember: my gym code is 2")
    code, out, _ = grm(capsys, store, "forget: code", json_out=True)
    res = json.loads(out)
    assert code == 0 and not res["changed"] and res["token"]
    code, out, _ = grm(capsys, store, "confirm", "forget", res["token"])
    assert code == 0 and "forgot 2 facts" in out
    code, out, _ = grm(capsys, store, "list", json_out=True)
    assert json.loads(out)["facts"] == []


def test_user_errors_are_one_line_exit_2_and_change_nothing(tmp_path, capsys):
    store = tmp_path / "store"
    grm(capsys, store, "remember: my locker code is 1")
    for words in (["hello", "there"], ["forget:"], ["correct memory: no arrow"], ["set durability: fast"], [" "]):
        code, out, err = grm(capsys, store, *words)
        assert code == 2 and out == "" and err.count("\n") == 1 and err.startswith("grm: error: "), words
    code, out, _ = grm(capsys, store, "forget: zebra")
    assert code == 1 and "nothing forgotten" in out
    code, out, _ = grm(capsys, store, "list", json_out=True)
    assert len(json.loads(out)["facts"]) == 1


def test_reading_commands_never_create_a_store(tmp_path, capsys):
    store = tmp_path / "missing"
    for words in (["list"], ["show memory"], ["why do you remember: x"]):
        code, _, err = grm(capsys, store, *words)
        assert code == 2 and "no GRM store" in err
    assert not store.exists()


def test_project_flag_scopes_facts(tmp_path, capsys):
    store = tmp_path / "store"
    code, _, _ = grm(capsys, store, "remember this for the project: my editor is vim")
    assert code == 1  # no project given: refused, nothing written
    assert grm(capsys, store, "--project", "alpha", "remember this for the project: my editor is vim")[0] == 0
    code, out, _ = grm(capsys, store, "list", json_out=True)
    assert json.loads(out)["facts"] == []
    code, out, _ = grm(capsys, store, "--project", "alpha", "list", json_out=True)
    assert [f["scope"] for f in json.loads(out)["facts"]] == ["project alpha"]


def test_cull_is_not_available_without_the_runtime(tmp_path, capsys):
    code, out, _ = grm(capsys, tmp_path / "store", "cull graft g-1 into sections")
    assert code == 1 and "not available" in out
