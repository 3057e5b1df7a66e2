"""The model-backed update extractor (grm/policy/model_extract.py) with a scripted model.

Expectations:
1. A sentence the rules read an update in never asks the model.
2. An update-sounding sentence the rules miss asks the model once; a checkable answer becomes an
   update that supersedes the fact with lineage through the conflict rules.
3. An answer whose values are not in the sentence (an invention), or malformed, proposes nothing.
4. The runtime's flag wires it (extractor="model"); a random model's answers propose nothing.
"""

from __future__ import annotations

import pytest

from grm.policy.model_extract import ModelUpdateExtractor, read_change


class Scripted:
    def __init__(self, answer: str) -> None:
        self.answer, self.prompts = answer, []

    def __call__(self, prompt: str) -> str:
        self.prompts.append(prompt)
        return self.answer


def test_rules_first_the_model_only_for_what_they_miss(make_mem):
    model = Scripted(" my bank | Chase | Ally")
    mem = make_mem(extractor=ModelUpdateExtractor(model))
    mem.observe("My bank is Chase.", evidence_id="s#1", now=1.0)
    mem.observe("I switched my bank from Chase to Ally.", evidence_id="s#2", now=2.0)
    assert model.prompts == [] and [f.value for f in mem.facts(3.0)] == ["Ally"]


def test_a_checkable_model_answer_supersedes_with_lineage(make_mem):
    model = Scripted(" my bank | Chase | Ally\nSentence: ...")
    mem = make_mem(extractor=ModelUpdateExtractor(model))
    (old,) = mem.observe("My bank is Chase.", evidence_id="s#1", now=1.0)
    (o,) = mem.observe("These days my money sits with Ally rather than Chase, I changed it.", evidence_id="s#2",
                       now=2.0)
    assert len(model.prompts) == 1 and "rather than Chase" in model.prompts[0]
    assert o.action == "superseded" and o.superseded == (old.fact,)
    (live,) = mem.facts(3.0)
    assert live.value == "Ally" and live.evidence[-1].via == "extract:model"


@pytest.mark.parametrize("answer", [
    "my bank | Chase | Barclays",  # the new value is not in the sentence: invented
    "my bank | HSBC | Ally",  # nor the old one
    "Ally", "my bank || Ally", "weather | - | Ally",  # malformed, or a subject the sentence never names
])
def test_an_uncheckable_answer_proposes_nothing(answer):
    sentence = "These days my bank is Ally rather than Chase, I changed it."
    assert read_change(sentence, answer) is None


def test_the_runtime_flag_wires_it_and_a_random_model_proposes_nothing(make_runtime):
    rt = make_runtime(max_new_tokens=3, extractor="model")
    ex = rt.policy_glue().policy.extractor
    assert isinstance(ex, ModelUpdateExtractor)
    chat = rt.chat(clear_context=True)
    chat.send("My bank is Chase.")
    chat.send("These days my money sits with another bank, I changed it.")
    assert ex.asked == 1 and [f.value for f in chat.glue.policy.facts()] == ["Chase"]
