"""The server over the default real model (SmolLM2-135M-Instruct): its own chat template, a
right answer through the openai client, and a conversation whose history loads from memory."""

from __future__ import annotations

import pytest

from tests.serve.conftest import start

pytestmark = pytest.mark.model
MODEL = "smollm2-135m"


@pytest.fixture(scope="module")
def real_server(tmp_path_factory):
    bg, srv = start(tmp_path_factory.mktemp("serve-smollm2"), model=MODEL)
    yield srv
    bg.stop()


def test_chat_template_answer_stream_and_history_reuse(real_server):
    from grm.serve.prompts import render_chat

    messages = [{"role": "user", "content": "What is the capital of France?"}]
    prompt = render_chat(real_server.engine.tokenizer(), messages)
    assert prompt.startswith("<|im_start|>") and prompt.endswith("<|im_start|>assistant\n")
    c = real_server.client()
    first = c.chat.completions.create(model=MODEL, messages=messages, max_tokens=24, temperature=0)
    answer = first.choices[0].message.content
    assert "Paris" in answer
    streamed = c.chat.completions.create(model=MODEL, messages=messages, max_tokens=24, temperature=0, stream=True)
    assert "".join(ch.choices[0].delta.content or "" for ch in streamed if ch.choices) == answer
    messages += [{"role": "assistant", "content": answer}, {"role": "user", "content": "And of Italy?"}]
    second = c.chat.completions.create(model=MODEL, messages=messages, max_tokens=24, temperature=0)
    assert second.usage.prompt_tokens_details.cached_tokens >= first.usage.prompt_tokens - 1
    assert "Rome" in second.choices[0].message.content
