"""A model asked through its chat template (tiny-random-llama-chat: ChatML pieces, byte tokens).

1. The sinks are the template's head: documents, sections and chat turns are stored as user
   content after the runtime's system message (RuntimeConfig.system: GRM's memory message by
   default, the template's own with "model", or a text) and the user turn's opening; K/V stored
   under one system message is not served under another.
2. A question over memory ends the user's message and the generation prompt follows it; the
   answer's lead (if any) begins the assistant's reply.
3. Exact mode: a plain prompt is the user's message; a prompt already rendered with the template
   (the server's chats) is read after the sinks without its head, stored, and a repeat is served
   from memory with the same answer as the cold read; one with a system message of its own is read
   whole without memory, and says so.
4. A chat turn is read as the user's message and the generation prompt.
"""

from __future__ import annotations

import pytest

from grm.models.tokenizer import CHATML as TEMPLATE_DEFAULT
from grm.runtime.config import MEMORY_SYSTEM
from tests.conftest import lorem

DOC = lorem(6, seed=3)
CHATML = TEMPLATE_DEFAULT.with_system(MEMORY_SYSTEM)  # the template as the runtime asks through it


@pytest.fixture()
def rt(make_runtime, tmp_path):
    rt = make_runtime(model="tiny-random-llama-chat", block_tokens=64, abstain_floor=0)  # random weights: no floor
    (tmp_path / "doc.txt").write_text(DOC)
    rt.ingest([tmp_path / "doc.txt"], progress=False)
    return rt


def _read(rt, ready) -> str:
    return "".join(rt.lm.tokenizer.decode(ids) for ids in ready.read)


def test_the_sinks_are_the_templates_head(rt):
    tok = rt.lm.tokenizer
    assert tok.template == CHATML
    assert tok.decode(list(tok.sink_ids)) == CHATML.head  # BOS tokens decode to nothing
    assert rt.exact.sinks().tokens == len(tok.sink_ids)


def test_the_system_message_is_the_runtimes_choice(make_runtime, tmp_path):
    own = make_runtime(model="tiny-random-llama-chat", store=tmp_path / "a", system="model")
    text = make_runtime(model="tiny-random-llama-chat", store=tmp_path / "b", system="Be brief.")
    plain = make_runtime(model="tiny-random-llama", store=tmp_path / "c", system="Be brief.")
    assert own.lm.tokenizer.template == TEMPLATE_DEFAULT
    assert text.lm.tokenizer.template.head == TEMPLATE_DEFAULT.start + "Be brief." + TEMPLATE_DEFAULT.system_end
    assert plain.lm.tokenizer.template is None  # no template: the plain format, no system message
    with pytest.raises(Exception, match="system message must not be empty"):
        make_runtime(model="tiny-random-llama-chat", store=tmp_path / "d", system=" ")


def test_what_is_stored_under_one_system_message_is_not_served_under_another(make_runtime, tmp_path):
    prompt = DOC + "\n\nWhat is the first word?"
    first = make_runtime(model="tiny-random-llama-chat", store=tmp_path / "s", block_tokens=64)
    first.ask(prompt, mode="exact", store_prompt=True, max_new_tokens=2)
    assert first.ask(prompt, mode="exact", max_new_tokens=2).tokens_from_memory > len(first.lm.tokenizer.sink_ids)
    first.close()
    other = make_runtime(model="tiny-random-llama-chat", store=tmp_path / "s", block_tokens=64, system="model")
    assert other.ask(prompt, mode="exact", max_new_tokens=2).tokens_from_memory <= len(other.lm.tokenizer.sink_ids)


@pytest.mark.parametrize("mode", ["exact-section", "grafts", "none"])
def test_a_question_over_memory_ends_the_users_message(rt, mode):
    ready = rt._plan("What is the station near the harbor?", mode, 4, False, True)
    assert not ready.abstained
    assert _read(rt, ready).endswith("\n\nWhat is the station near the harbor?" + CHATML.user_end + (ready.lead or ""))


def test_a_plain_prompt_in_exact_mode_is_the_users_message(rt):
    ready = rt._plan(DOC + "\n\nWhat is the first word?", "exact", 4, False, True)
    assert ready.mode == "exact" and ready.prefix.blocks  # the document's blocks, after the head
    assert _read(rt, ready).endswith("What is the first word?" + CHATML.user_end)


def test_a_rendered_chat_is_read_after_the_head_and_served_again_from_memory(rt):
    rendered = CHATML.head + CHATML.user_turn("Say something about the harbor.")
    cold = rt.ask(rendered, mode="exact", chat=True, memory=False, max_new_tokens=6)
    first = rt.ask(rendered, mode="exact", chat=True, store_prompt=True, max_new_tokens=6)
    again = rt.ask(rendered, mode="exact", chat=True, store_prompt=True, max_new_tokens=6)
    assert first.prompt_tokens == again.prompt_tokens == cold.prompt_tokens
    assert first.tokens_from_memory == len(rt.lm.tokenizer.sink_ids)  # the head, nothing else yet
    assert again.tokens_from_memory == again.prompt_tokens - 1  # all but the last token re-read
    assert first.answer == again.answer == cold.answer


def test_a_chat_with_its_own_system_message_is_read_without_memory(rt):
    rendered = CHATML.start + "Be brief." + CHATML.system_end + CHATML.user_turn("hi")
    ans = rt.ask(rendered, mode="exact", chat=True, store_prompt=True, max_new_tokens=3)
    assert ans.tokens_from_memory == 0 and "system message of its own" in ans.fallback
    assert ans.prompt_tokens == len(rt.lm.tokenizer.encode(rendered))


def test_a_chat_turn_is_the_users_message(rt):
    from grm.runtime.chat import turn_read

    assert turn_read("Hello there", template=CHATML) == ("Hello there" + CHATML.user_end, None)
    session = rt.chat(clear_context=True)
    reply = session.send("My locker code is 3318.")
    assert reply.harvested and reply.tokens_from_memory >= len(rt.lm.tokenizer.sink_ids)


def test_lead_auto_is_off_through_a_template_and_the_rules_then_the_model_without(make_runtime, tmp_path):
    """RuntimeConfig.lead "auto" (the default) resolves when the model is known: an instruct model
    asked through its chat template reads the question plain; a model without one is led."""
    chat = make_runtime(model="tiny-random-llama-chat", store=tmp_path / "a")
    plain = make_runtime(model="tiny-random-llama", store=tmp_path / "b")
    assert (chat.config.lead, plain.config.lead) == ("off", "model")
    # the English layer likewise (RuntimeConfig.rules "auto"): off through a template, floor and all
    assert (chat.config.rules, chat.config.abstain_floor) == ("off", 0.0)
    assert plain.config.rules == "on" and plain.config.abstain_floor > 0
    assert make_runtime(model="tiny-random-llama-chat", store=tmp_path / "c", lead="rules").config.lead == "rules"


def test_a_served_first_message_gets_the_memory_routed_for_it(rt):
    """The server's chat (exact mode with `recall`): through a template, the first user message
    starts right after the sinks (the template's head); memory routed for it is mounted before it,
    as for a later message."""
    user = "What is the station near the harbor?"
    prompt = CHATML.head + user + CHATML.user_end
    ans = rt.ask(prompt, mode="exact", chat=True, store_prompt=True, recall=user, max_new_tokens=2)
    assert any(m.get("source") not in ("prompt", None) for m in ans.mounted), ans.mounted
    again = rt.ask(prompt, mode="exact", chat=True, store_prompt=True, recall=user, max_new_tokens=2)
    assert again.tokens_from_memory > ans.tokens_from_memory - 2  # the stored prompt hits next time
