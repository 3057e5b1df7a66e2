"""The model-backed update reader (grm/policy/model_extract.py) with a scripted model.

Expectations:
1. The model is shown the turn and the facts held nearest it; a checkable answer ("the fact as
   copied | the fact as it is now"), confirmed when asked again on that fact alone, supersedes it
   with lineage through the conflict rules.
2. An answer copying no fact shown, changing it in more than one place, with a new value the turn
   never says (an invention), or not confirmed, proposes nothing; "none" proposes nothing.
3. With the readers in turn (rules, then the model), the model is asked only when the rules read
   no update; a question is never read as an update.
4. The runtime's flag wires it (extractor="model"/"both"); a random model's answers propose nothing.
"""

from __future__ import annotations

import pytest

from grm.policy import RuleExtractor
from grm.policy.memory import AlignedReader
from grm.policy.model_extract import ModelUpdateReader, read_update


class Scripted:
    """Answers the reading prompt with `answer` and the confirming one with `confirm`."""

    def __init__(self, answer: str, confirm: str = "Yes.") -> None:
        self.answer, self.confirm, self.prompts = answer, confirm, []

    def __call__(self, prompt: str) -> str:
        self.prompts.append(prompt)
        return self.confirm if prompt.startswith("Fact:") else self.answer


def test_a_checkable_answer_supersedes_the_numbered_fact_with_lineage(make_mem):
    model = Scripted("Our Wi-Fi password is sunflower42. | Our Wi-Fi password is Bluejay!2024.\nmore")
    mem = make_mem(extractor=RuleExtractor(updates=False))
    mem.readers = (ModelUpdateReader(model),)
    mem.observe("My bank is Chase.", evidence_id="s#1", now=1.0)
    (wifi,) = mem.observe("Our Wi-Fi password is sunflower42.", evidence_id="s#2", now=2.0)
    outcomes = mem.observe("changed the wifi pw to Bluejay!2024 after the neighbor kid got on it",
                           evidence_id="s#3", now=3.0)
    # every statement once a fact is held (the first had none to change), then the confirming question
    assert len(model.prompts) == 3 and model.prompts[2].startswith('Fact: "Our Wi-Fi password is sunflower42"')
    assert "- Our Wi-Fi password is sunflower42." in model.prompts[1] and "- My bank is Chase." in model.prompts[1]
    assert "changed the wifi pw" in model.prompts[1]
    o = outcomes[-1]
    assert o.action == "superseded" and o.superseded == (wifi.fact,)
    values = sorted(f.value for f in mem.facts(4.0))
    assert values == ["Bluejay!2024", "Chase"]
    live = next(f for f in mem.facts(4.0) if f.value == "Bluejay!2024")
    assert live.statement.rstrip(".") == "Our Wi-Fi password is Bluejay!2024" and live.evidence[-1].via == "extract:model"


@pytest.mark.parametrize("answer", [
    "none", "None of them.",
    "My gym is Pulse | My gym is Ally",  # copies no fact shown
    "My bank is Chase | My bank is Barclays",  # the turn never says Barclays: invented
    "My bank is Chase | My bank is Chase",  # nothing changed
    "My bank is Chase | Your gym is Ally",  # changed in more than one place
    "My bank is Chase",  # malformed
])
def test_an_uncheckable_answer_proposes_nothing(answer, make_mem):
    mem = make_mem()
    mem.observe("My bank is Chase.", evidence_id="s#1", now=1.0)
    mem.observe("My gym is Ironworks.", evidence_id="s#2", now=2.0)
    facts = mem.facts(3.0)
    assert read_update("these days my money sits with Ally", facts, answer) is None
    good = read_update("these days my money sits with Ally", facts, "My bank is Chase. | My bank is Ally.")
    assert good is not None and (good.value, good.replaces) == ("Ally", "Chase")


def test_an_answer_not_confirmed_proposes_nothing(make_mem):
    model = Scripted("My bank is Chase | My bank is Ally", confirm="No, it does not.")
    mem = make_mem(extractor=RuleExtractor(updates=False))
    mem.readers = (ModelUpdateReader(model),)
    mem.observe("My bank is Chase.", evidence_id="s#1", now=1.0)
    mem.observe("My friend banks with Ally.", evidence_id="s#2", now=2.0)
    assert model.prompts[-1].startswith('Fact: "My bank is Chase"') and "Chase" in [f.value for f in mem.facts(3.0)]


def test_the_model_reads_only_what_the_rules_did_not(make_mem):
    model = Scripted("My bank is Chase | My bank is Ally")
    mem = make_mem()
    mem.readers = (AlignedReader(), ModelUpdateReader(model))
    mem.observe("My bank is Chase.", evidence_id="s#1", now=1.0)
    mem.observe("I switched my bank from Chase to Ally.", evidence_id="s#2", now=2.0)  # the rules read it
    mem.observe("Which bank do I use?", evidence_id="s#3", now=3.0)  # a question: no update
    assert model.prompts == [] and [f.value for f in mem.facts(4.0)] == ["Ally"]


@pytest.mark.parametrize("choice, readers", [("model", ["model"]), ("both", ["aligned", "model"]),
                                             ("rule", ["aligned"])])
def test_the_runtime_flag_wires_the_readers(make_runtime, choice, readers):
    rt = make_runtime(max_new_tokens=3, extractor=choice)
    policy = rt.policy_glue().policy
    assert [r.name for r in policy.readers] == readers and policy.extractor.updates == (choice != "model")


def test_a_random_model_proposes_nothing(make_runtime):
    rt = make_runtime(max_new_tokens=3, extractor="model")
    chat = rt.chat(clear_context=True)
    chat.send("My bank is Chase.")
    chat.send("These days my money sits with another bank, I changed it.")
    (reader,) = chat.glue.policy.readers
    assert reader.asked >= 1 and [f.value for f in chat.glue.policy.facts()] == ["Chase"]
