"""Chat templates cut into the pieces GRM lays memory between (grm/models/template.py).

1. A ChatML template (Qwen2.5's and SmolLM2's form) derives start / default system / system_end /
   user_end / reply_end, and rendering any conversation is those pieces around the contents.
2. A template that moves the system text into the first user turn (Gemma's form), or none at all,
   derives nothing: the model is asked in the plain format.
3. An HF tokenizer asked through its template reads the template's head as its sinks.
"""

from __future__ import annotations

import pytest

from grm.models.template import derive
from grm.models.tokenizer import CHATML, HFTokenizer

QWEN_LIKE = (
    "{% for m in messages %}{% if loop.first and m['role'] != 'system' %}<|im_start|>system\nYou are Q."
    "<|im_end|>\n{% endif %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
GEMMA_LIKE = (
    "{{ bos_token }}{% set sys = '' %}{% for m in messages %}{% if m['role'] == 'system' %}{% set sys = m['content'] + '\n\n' %}"
    "{% else %}<start_of_turn>{{ 'model' if m['role'] == 'assistant' else 'user' }}\n"
    "{{ (sys if loop.index == 2 else '') + m['content'] }}<end_of_turn>\n{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}"
)


def _hf_tokenizer(template: str | None):
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {chr(b): b for b in range(33, 127)}
    vocab.update({"[UNK]": 200, "<|im_start|>": 201, "<|im_end|>": 202, "<|endoftext|>": 203})
    core = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    core.pre_tokenizer = pre_tokenizers.Split("", "isolated")
    tok = PreTrainedTokenizerFast(tokenizer_object=core, unk_token="[UNK]", eos_token="<|im_end|>",
                                  additional_special_tokens=["<|im_start|>", "<|endoftext|>"])
    tok.chat_template = template
    return tok


def test_a_chatml_template_is_cut_into_its_pieces():
    t = derive(_hf_tokenizer(QWEN_LIKE))
    assert t is not None
    assert (t.start, t.system, t.system_end) == ("<|im_start|>system\n", "You are Q.", "<|im_end|>\n<|im_start|>user\n")
    assert (t.user_end, t.reply_end) == ("<|im_end|>\n<|im_start|>assistant\n", "<|im_end|>\n<|im_start|>user\n")
    hf = _hf_tokenizer(QWEN_LIKE)
    msgs = [{"role": "user", "content": "A"}, {"role": "assistant", "content": "B"}, {"role": "user", "content": "C"}]
    assert hf.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True) == (
        t.head + t.exchange("A", "B") + t.user_turn("C"))


@pytest.mark.parametrize("template", [None, GEMMA_LIKE])
def test_a_template_without_a_system_turn_of_its_own_is_not_used(template):
    assert derive(_hf_tokenizer(template)) is None


def test_a_templated_tokenizer_reads_the_head_as_its_sinks():
    hf = _hf_tokenizer(QWEN_LIKE)
    tok = HFTokenizer(hf, chat=True)
    assert tok.template is not None
    assert list(tok.sink_ids) == tok.encode(tok.template.head) and len(tok.sink_ids) >= 4
    plain = HFTokenizer(hf, chat=False)
    assert plain.template is None and len(plain.sink_ids) >= 4


def test_chatml_pieces_render_as_chatml():
    from grm.serve.prompts import chatml

    msgs = [{"role": "system", "content": CHATML.system}, {"role": "user", "content": "hi"}]
    assert chatml(msgs) == CHATML.head + CHATML.user_turn("hi")


def test_a_system_message_of_the_runtimes_own_is_read_in_the_sinks():
    tok = HFTokenizer(_hf_tokenizer(QWEN_LIKE), chat=True)
    default = tok.template
    tok.use_system("Answer from memory.")
    assert tok.template == default.with_system("Answer from memory.") != default
    assert list(tok.sink_ids) == tok.encode(default.start + "Answer from memory." + default.system_end)


@pytest.mark.parametrize("hf", [False, True])
def test_a_served_chat_without_a_system_message_gets_the_runtimes(hf):
    """grm.serve.prompts.render_chat: the runtime's system message where the chat has none, so
    the prompt starts with the sinks' bytes; a chat's own system message is left as it is."""
    from grm.models.tokenizer import ByteTokenizer
    from grm.serve.prompts import render_chat

    tok = HFTokenizer(_hf_tokenizer(QWEN_LIKE), chat=True) if hf else ByteTokenizer(CHATML)
    tok.use_system("Answer from memory.")
    t = tok.template
    assert render_chat(tok, [{"role": "user", "content": "hi"}]) == t.head + t.user_turn("hi")
    own = render_chat(tok, [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}])
    assert own == t.start + "Be brief." + t.system_end + t.user_turn("hi")
