"""How routed grafts are placed, as RuntimeConfig and the CLI choose it (grm/runtime/answer.mount).

Expectations:
1. `reread="always"` reads every routed graft's text: the answer names each "read": "text" and
   counts none of their tokens as from memory; `never` mounts each ("read": "mounted"); the
   answer is the same both ways on the CPU (a section graft was read right after the sinks, as
   its text is read there).
2. `reread="auto"` decides per graft from the costs measured once for this model and machine,
   stored in the cache folder: each graft's choice is what those costs say; through a chat
   template every routed chat turn is read as text, sections still by their costs.
3. `blend` recomputes part of two or more grafts mounted side by side: fewer tokens come from
   memory than without it.
4. The answer returned begins with the lead the question was answered after, streamed too; a
   question no lead rule covers is returned as generated.
The CLI's flags for these: tests/cli/test_mount_flags.py.
"""

from __future__ import annotations

import json

import pytest

from grm.grafts.reread import RISK
from grm.runtime.lead import answer_lead
from grm.runtime.model_lead import restated

from tests.conftest import lorem

FACTS = ("The vault code of Quintar is 7781.", "The harbor master of Velmora is Ines Carrow.",
         "The orchard of Lusk grows amber pears.")


def ingest(rt, tmp_path) -> None:
    for i, fact in enumerate(FACTS):
        (tmp_path / f"d{i}.txt").write_text(lorem(2, seed=i) + "\n\n" + fact + "\n", encoding="utf-8")
    rt.ingest(sorted(tmp_path.glob("d*.txt")), layout="sections", progress=False)


QUESTION = "What is the vault code of Quintar in the harbor of Velmora?"


def test_reread_always_reads_text_never_mounts_and_both_answer_alike(make_runtime, tmp_path):
    never = make_runtime(section_tokens=64, reread="never")
    ingest(never, tmp_path)
    mounted = never.ask(QUESTION, mode="grafts", max_new_tokens=4)
    never.close()
    always = make_runtime(section_tokens=64, reread="always", store=tmp_path / "store")
    read = always.ask(QUESTION, mode="grafts", max_new_tokens=4)
    assert len(mounted.mounted) >= 2 and [m["id"] for m in read.mounted] == [m["id"] for m in mounted.mounted]
    assert {m["read"] for m in mounted.mounted} == {"mounted"} and {m["read"] for m in read.mounted} == {"text"}
    sinks = always.exact.sinks().tokens
    assert read.tokens_from_memory == sinks < mounted.tokens_from_memory
    assert read.prompt_tokens == mounted.prompt_tokens
    assert read.answer == mounted.answer


def test_reread_auto_follows_the_costs_measured_once(make_runtime, tmp_path):
    rt = make_runtime(section_tokens=64, cache_dir=tmp_path / "cache")
    ingest(rt, tmp_path)
    a = rt.ask(QUESTION, mode="grafts", max_new_tokens=2)
    files = list((tmp_path / "cache" / "calibration").glob("*.json"))
    assert len(files) == 1 and json.loads(files[0].read_text())["identity"] == rt.lm.identity
    costs = rt.mount_costs()
    for m in a.mounted:
        tokens = m["span"][1] - m["span"][0]
        assert m["read"] == ("text" if costs.reread(tokens, len(a.mounted), RISK) else "mounted")


def test_blend_recomputes_part_of_grafts_side_by_side(make_runtime, tmp_path):
    plain = make_runtime(section_tokens=64, reread="never")
    ingest(plain, tmp_path)
    base = plain.ask(QUESTION, mode="grafts", max_new_tokens=2)
    plain.close()
    blended = make_runtime(section_tokens=64, reread="never", blend=0.5, store=tmp_path / "store")
    b = blended.ask(QUESTION, mode="grafts", max_new_tokens=2)
    assert len(b.mounted) >= 2 and b.prompt_tokens == base.prompt_tokens
    assert b.tokens_from_memory < base.tokens_from_memory and b.tokens_computed > base.tokens_computed


def test_the_answer_begins_with_its_lead_streamed_too(make_runtime, tmp_path):
    rt = make_runtime(section_tokens=64)
    ingest(rt, tmp_path)
    q = "What is the vault code of Quintar?"
    lead = answer_lead(q)
    assert lead == "The vault code of Quintar is"
    streamed: list[str] = []
    a = rt.ask(q, mode="grafts", max_new_tokens=3, on_token=streamed.append)
    assert a.answer.startswith(lead + " ") or a.answer.startswith(lead) and a.answer[len(lead)] in ",.;:!?'"
    assert "".join(streamed) == a.answer
    plain = rt.ask("Quintar vault code, please", mode="grafts", max_new_tokens=3)
    assert answer_lead("Quintar vault code, please") is None and not plain.answer.startswith(lead)


def test_lead_off_reads_the_question_plain_and_model_asks_the_model_only_where_no_rule_applies(make_runtime,
                                                                                                tmp_path):
    off = make_runtime(section_tokens=64, lead="off")
    ingest(off, tmp_path)
    q = "What is the vault code of Quintar?"
    assert not off.ask(q, mode="grafts", max_new_tokens=3).answer.startswith("The vault code of Quintar is")
    off.close()
    model = make_runtime(section_tokens=64, lead="model", store=tmp_path / "store")
    asked: list[str] = []
    model.ctx.model_lead = lambda question: asked.append(question) or "The code that opens the Quintar vault is"
    covered = model.ask(q, mode="grafts", max_new_tokens=3)
    assert asked == [] and covered.answer.startswith("The vault code of Quintar is")
    uncovered = model.ask("Whose code opens the Quintar vault?", mode="grafts", max_new_tokens=3)
    assert asked == ["Whose code opens the Quintar vault?"]
    assert uncovered.answer.startswith("The code that opens the Quintar vault is")


@pytest.mark.parametrize("written, question, lead", [
    ("The Tarrozel observatory opened in 2018", "In what year did the Tarrozel observatory open?",
     "The Tarrozel observatory opened in"),  # the model starts answering: cut before the answer
    ("The bridge was opened in 1999.", "When was the bridge opened?", "The bridge was opened in"),
    ("The treaty signed in which city was", "In which city was the treaty signed?", None),  # a wh-word stays
    ("Paris.", "In which city was the treaty signed?", None),  # no restatement at all
    ("The dog that won the show is", "Whose dog won the show?", "The dog that won the show is"),
])
def test_a_model_lead_is_kept_only_as_far_as_it_restates_the_question(written, question, lead):
    assert restated(written, question) == lead


def test_reread_auto_reads_a_templated_chats_turns_as_text_and_sections_by_their_cost(make_runtime, tmp_path):
    """Through a chat template, `auto` reads every routed chat turn as text (what a turn costs to
    mount aside); a model without one decides a turn by the measured costs, and a document section
    is decided by the costs either way."""
    for model in ("tiny-random-llama-chat", "tiny-random-llama"):
        rt = make_runtime(model=model, store=tmp_path / model, abstain_floor=0, cache_dir=tmp_path / "cache")
        session = rt.chat(clear_context=True)
        session.send("My locker code at the Quintar gym is 3318.")
        reply = session.send("What is my locker code at the Quintar gym?")
        turns = [m for m in reply.mounted if m["kind"] == "evidence"]
        assert turns, reply.mounted
        costs = rt.mount_costs()
        for m in turns:
            by_cost = costs.reread(m["span"][1] - m["span"][0], len(reply.mounted), RISK)
            assert m["read"] == ("text" if model.endswith("-chat") or by_cost else "mounted")
        (tmp_path / model / "docs").mkdir()
        ingest(rt, tmp_path / model / "docs")
        a = rt.ask(QUESTION, mode="grafts", max_new_tokens=2)
        sections = [m for m in a.mounted if m["kind"] not in ("evidence", "fact")]
        assert sections
        for m in sections:
            assert m["read"] == ("text" if costs.reread(m["span"][1] - m["span"][0], len(a.mounted), RISK)
                                 else "mounted")
