"""`grm stats` and `grm fsck` (grm/cli/stats.py): one tenant's view as a table, and every field of
the fsck report with exit codes per DESIGN.md (0 clean, 1 damage, 2 cannot run)."""

from __future__ import annotations

import json

from grm.cli.stats import fsck_status
from grm.store import Store, StoreConfig
from tests.cli.conftest import TINY, one_error_line


def _two_tenants(grm, store) -> None:
    for tenant, fact in (("alice", "my locker code is 1234"), ("bob", "my bike is red")):
        code, _, err = grm("memory", "--store", store, "--tenant", tenant, f"remember permanently: {fact}")
        assert code == 0, err


def test_stats_shows_only_the_asked_tenant(grm, tmp_path):
    store = tmp_path / "s"
    _two_tenants(grm, store)
    code, out, err = grm("stats", "--store", store, "--tenant", "bob", "--json")
    st = json.loads(out)
    assert code == 0 and st["tenant"] == "bob" and st["kinds"] and "alice" not in out
    assert st["records"] == sum(k["records"] for k in st["kinds"].values())
    code, out, _ = grm("stats", "--store", store, "--tenant", "alice", "--json")
    assert json.loads(out)["records"] == st["records"] and "bob" not in out  # same facts, same count
    code, out, _ = grm("stats", "--store", store, "--tenant", "carol", "--json")
    assert code == 0 and json.loads(out)["records"] == 0 and json.loads(out)["kinds"] == {}


def test_stats_prints_a_readable_table_not_python_dicts(grm, tmp_path):
    store = tmp_path / "s"
    _two_tenants(grm, store)
    code, out, _ = grm("stats", "--store", store, "--tenant", "bob")
    assert code == 0 and "{" not in out and "'" not in out and "alice" not in out
    lines = out.splitlines()
    assert lines[0].split() == ["store", str(store), "(local)"]
    header = next(ln for ln in lines if ln.split()[:1] == ["kind"])
    assert header.split() == ["kind", "records", "active", "superseded", "damaged", "payload", "bytes"]
    assert any(ln.split()[:1] == ["fact"] for ln in lines)


def test_stats_figures_say_what_they_count_and_add_up(grm, tmp_path):
    """Issue 30: the store-wide footprint is shown as the sum of its parts and says it is every
    tenant's; the tenant's table says other tenants are not in it and ends with its total; no bare
    "durable 0"."""
    store = tmp_path / "s"
    _two_tenants(grm, store)
    code, out, _ = grm("stats", "--store", store, "--tenant", "bob")
    code, js, _ = grm("stats", "--store", store, "--tenant", "bob", "--json")
    st, t = json.loads(js), json.loads(js)["tiers"]
    assert code == 0 and "durable" not in out.replace("durability", "")
    foot = next(ln for ln in out.splitlines() if ln.startswith("footprint"))
    assert "every tenant" in foot and "= K/V spans" in out and "log" in out and "rows" in out
    assert t["footprint_bytes"] >= t["kept_bytes"] + t["log_bytes"] + t["row_bytes"]
    tenant = next(ln for ln in out.splitlines() if ln.startswith("tenant"))
    assert "bob" in tenant and "other tenants are not shown" in tenant
    total = next(ln for ln in out.splitlines() if ln.split()[:1] == ["all"]).split()
    assert int(total[1]) == st["records"] == sum(k["records"] for k in st["kinds"].values())


def test_stats_on_a_missing_store_exits_2(grm, tmp_path):
    code, _, err = grm("stats", "--store", tmp_path / "nope")
    assert code == 2 and "no GRM store" in one_error_line(err) and not (tmp_path / "nope").exists()


def test_fsck_prints_every_field_and_exits_1_while_damage_stays(grm, tmp_path):
    doc = tmp_path / "d.txt"
    doc.write_text("The harbor boat is called Marigold.\n\nIt sails on Tuesdays.\n")
    store = tmp_path / "s"
    assert grm("ingest", doc, "--store", store, "--model", TINY)[0] == 0
    code, out, _ = grm("fsck", "--store", store, "--json")
    report = json.loads(out)
    assert code == 0 and report["damaged"] == [] and report["records"] > 0
    for field in ("records", "damaged", "orphans", "repaired", "already_damaged", "catalog_ok"):
        assert field in report, field
    code, text, _ = grm("fsck", "--store", store)
    assert code == 0 and set(report) == {ln.split(":")[0] for ln in text.splitlines()}  # same fields as text

    with Store.open(StoreConfig(root=store)) as s:
        rec = next(r for r in s.records("default") if r.payload is not None)
        path = s.payload_path(rec)
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    code, out, _ = grm("fsck", "--store", store, "--json")
    assert code == 1 and len(json.loads(out)["damaged"]) == 1
    code, out, _ = grm("fsck", "--store", store, "--repair", "--json")
    assert code == 1 and json.loads(out)["repaired"]  # marked damaged is not healed
    code, out, _ = grm("fsck", "--store", store, "--json")
    after = json.loads(out)
    assert code == 1 and after["damaged"] + after["already_damaged"], after  # still visible


def test_fsck_status_rule():
    clean = {"records": 3, "damaged": [], "orphans": ["payloads/x"], "repaired": ["removed x"],
             "already_damaged": [], "catalog_ok": True}
    assert fsck_status(clean, repaired=False) == 0  # orphans and repairs are information
    assert fsck_status(clean | {"already_damaged": ["t/block/k"]}, repaired=True) == 1
    assert fsck_status(clean | {"lost": ["t/block/k"]}, repaired=False) == 1  # a field added later counts too
    assert fsck_status(clean | {"catalog_ok": False}, repaired=False) == 1
    assert fsck_status(clean | {"catalog_ok": False}, repaired=True) == 0  # --repair rebuilt it


def test_stats_and_fsck_read_beside_a_live_writer(grm, tmp_path):
    store = tmp_path / "s"
    _two_tenants(grm, store)
    with Store.open(StoreConfig(root=store)) as writer:  # holds the store's write lock, like a running chat
        writer.put("bob", "fact", "k-extra", meta={"x": 1})
        code, out, err = grm("stats", "--store", store, "--tenant", "bob", "--json")
        assert code == 0, err
        code, out, err = grm("fsck", "--store", store, "--json")
        assert code == 0 and json.loads(out)["damaged"] == [], err
        code, _, err = grm("fsck", "--store", store, "--repair")  # repairing writes: it must wait its turn
        assert code == 2 and one_error_line(err)


def test_memory_reading_commands_work_beside_a_live_writer(grm, tmp_path):
    store = tmp_path / "s"
    _two_tenants(grm, store)
    with Store.open(StoreConfig(root=store)):
        for words in (["list"], ["reviews"], ["folds"], ["show memory about: locker"],
                      ["why do you remember: locker code"]):
            code, out, err = grm("memory", "--store", store, "--tenant", "alice", *words)
            assert code in (0, 1) and "error" not in err, (words, err)
        code, out, err = grm("memory", "--store", store, "--tenant", "alice", "list")
        assert "locker code is 1234" in out
        code, _, err = grm("memory", "--store", store, "--tenant", "alice", "remember permanently: x is 2")
        assert code == 2 and "in use" in one_error_line(err)  # a write waits for the writer


FAKE = "\u001b[2J\u001b[31mfake: all records damaged\u009b0m\u202e"


def test_names_from_the_store_reach_the_terminal_without_control_characters(grm, tmp_path):
    """Issue 31: a document named to clear the screen and print a fake report is shown escaped by
    `grm documents list` (table and JSON), `grm stats --json` and `grm memory list`; the JSON still
    reads back the name."""
    store = tmp_path / "s"
    doc = tmp_path / f"{FAKE}.txt"
    doc.write_text("The harbor opened in 1911. " * 8)
    assert grm("ingest", "--store", store, "--model", TINY, doc)[0] == 0
    assert grm("memory", "--store", store, f"remember permanently: my code is {FAKE}")[0] == 0
    for argv in (["documents", "list"], ["documents", "list", "--json"], ["stats", "--json"], ["memory", "list"],
                 ["memory", "list", "--json"]):
        code, out, err = grm(*argv, "--store", store)
        assert code == 0, err
        for raw in ("\u001b", "\u009b", "\u202e"):
            assert raw not in out and raw not in err, (argv, raw)
        if "--json" in argv:
            assert any(FAKE in s for s in _strings(json.loads(out))), argv
        else:
            assert "\\x1b[31m" in out, argv


def _strings(value) -> list[str]:
    """Every key and string inside a JSON value."""
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (k, *_strings(v))]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return [value] if isinstance(value, str) else []
