"""`grm documents list | show | delete` (grm/cli/documents.py over grm/runtime/documents.py), and the
ingest summary counting what its bar counts.

1. `list` shows each document of the tenant with its tokens, records by kind and payload bytes;
   another tenant sees none of them.
2. `show NAME` lists every row the document stored; NAME may be the name as ingested, an id prefix
   or the end of the name after a '/'.
3. `delete NAME` removes the document, its blocks no other document uses, their grafts, in one go;
   the other document keeps its shared first block and still answers from memory; `grm gc` then
   removes the payload files (the store shrinks on disk).
4. An unknown or ambiguous document is one line on stderr and exit 2.
"""

from __future__ import annotations

import json

from tests.cli.conftest import TINY, one_error_line

HEAD = "Shared opening paragraph about the harbor. " * 20 + "\n\n"
ONE = HEAD + "The first document ends with apples. " * 30
TWO = HEAD + "The second document ends with pears. " * 30


def _disk(path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def _kinds(grm, store) -> dict:
    code, out, _ = grm("stats", "--store", store, "--json")
    return {k: v["records"] for k, v in json.loads(out)["kinds"].items()}


def _ingest(grm, tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "one.txt").write_text(ONE, encoding="utf-8")
    (docs / "two.txt").write_text(TWO, encoding="utf-8")
    store = tmp_path / "s"
    code, out, err = grm("ingest", docs, "--store", store, "--model", TINY, "--threads", 1, "--json",
                         "--block-tokens", 128, "--section-tokens", 128, "--layout", "both")
    assert code == 0, err
    return docs, store, json.loads(out)


def test_list_show_delete_and_gc_free_the_bytes(grm, tmp_path):
    docs, store, ingested = _ingest(grm, tmp_path)
    code, out, err = grm("documents", "list", "--store", store, "--json")
    listed = json.loads(out)["documents"]
    assert code == 0 and [d["name"] for d in listed] == [str(docs / "one.txt"), str(docs / "two.txt")]
    for d in listed:  # 1.
        assert d["layout"] == "both" and d["bytes"] == len(ONE) and d["tokens"] >= len(ONE)  # byte-level tokenizer
        assert d["records"]["document"] == 1 and d["records"]["block"] > 2 and d["records"]["graft"] > 1
        assert d["stored_bytes"] > 100 * d["tokens"]  # K/V: hundreds of bytes per token
    assert sum(d["records"]["block"] for d in listed) == ingested["blocks"]  # what ingest said it stored or found
    assert ingested["blocks"] > _kinds(grm, store)["block"]  # the shared head, counted in each document
    code, out, _ = grm("documents", "list", "--store", store, "--tenant", "bob", "--json")
    assert code == 0 and json.loads(out)["documents"] == []
    code, text, _ = grm("documents", "list", "--store", store)
    assert code == 0 and "one.txt" in text and "tokens" in text and "{" not in text

    one = listed[0]
    for name in (str(docs / "one.txt"), one["id"][:8], "one.txt"):  # 2.
        code, out, err = grm("documents", "show", name, "--store", store, "--json")
        shown = json.loads(out)
        assert code == 0 and shown["id"] == one["id"], (name, err)
    assert {r["kind"] for r in shown["rows"]} == {"document", "block", "graft"}
    assert len(shown["rows"]) == sum(one["records"].values())

    before, disk = _kinds(grm, store), _disk(store)
    code, out, err = grm("documents", "delete", "one.txt", "--store", store, "--json")  # 3.
    gone = json.loads(out)
    assert code == 0 and gone["deleted"] and gone["kept_shared_blocks"] >= 1, err
    assert gone["blocks"] == one["records"]["block"] - gone["kept_shared_blocks"] and gone["grafts"] >= 1
    after = _kinds(grm, store)
    assert after["document"] == before["document"] - 1 and after["block"] == before["block"] - gone["blocks"]
    assert after["graft"] == before["graft"] - gone["grafts"]
    code, out, _ = grm("documents", "list", "--store", store, "--json")
    assert [d["name"] for d in json.loads(out)["documents"]] == [str(docs / "two.txt")]
    assert json.loads(out)["documents"][0]["records"] == listed[1]["records"]  # the other one whole
    code, out, err = grm("gc", "--store", store, "--json")
    assert code == 0 and json.loads(out)["bytes_freed"] >= gone["freed_bytes"] > 0, err
    assert _disk(store) < disk - gone["freed_bytes"] // 2
    code, out, err = grm("ask", "--store", store, "--model", TINY, "--threads", 1, "--mode", "exact", "--json",
                         "--max-new-tokens", 1, "--block-tokens", 128, TWO + "\n\nQuestion: what?")
    answer = json.loads(out)
    assert code == 0 and answer["tokens_from_memory"] >= len(TWO), err  # still whole from memory
    code, out, _ = grm("fsck", "--store", store, "--json")
    assert code == 0 and json.loads(out)["damaged"] == []


def test_an_unknown_or_ambiguous_document_is_one_line_and_exit_2(grm, tmp_path):
    docs, store, _ = _ingest(grm, tmp_path)
    for action in ("show", "delete"):
        code, _, err = grm("documents", action, "three.txt", "--store", store)
        assert code == 2 and "no document 'three.txt'" in one_error_line(err)
    code, _, err = grm("documents", "show", ".txt", "--store", store)
    assert code == 2 and "no document" in one_error_line(err)
    code, _, err = grm("documents", "show", "one.txt", "--store", store, "--tenant", "bob")
    assert code == 2 and "tenant 'bob'" in one_error_line(err)  # another tenant's is not there
    code, _, err = grm("documents", "list", "--store", tmp_path / "nope")
    assert code == 2 and "no GRM store" in one_error_line(err) and not (tmp_path / "nope").exists()


def test_the_ingest_summary_counts_what_its_bar_counts(grm, tmp_path, make_runtime):
    """The bar's total and the summary's `blocks` are the same thing: distinct blocks stored or found
    (layout both: a section the chain also stored counts once); `computed` is how many of them were
    computed now, so a fresh store computes every one and a second ingest none."""
    rt = make_runtime(block_tokens=128, section_tokens=128)
    steps: list[int] = []
    res = rt.ingest_text(ONE, "one.txt", progress=steps.append)
    assert sum(steps) == res.blocks == rt.plan_ingest(ONE) == res.computed
    assert res.blocks == len({r.key for r in rt.store.records("default", "block")})
    steps.clear()
    again = rt.ingest_text(TWO, "two.txt", progress=steps.append)
    assert sum(steps) == again.blocks == rt.plan_ingest(TWO) and 0 < again.computed < again.blocks  # the head: found
    steps.clear()
    assert rt.ingest_text(TWO, "two.txt", progress=steps.append).computed == 0 and sum(steps) == again.blocks
