"""The OpenAI endpoints through the official `openai` client against a running server.

Expectations:
1. /v1/models lists the loaded model; chat and text completions answer, streaming and not, and
   the streamed pieces add up to the non-streamed answer (greedy decoding is deterministic).
2. usage.prompt_tokens_details.cached_tokens = tokens served from stored K/V; the `grm` object
   says the same; `"grm": {"memory": false}` loads and stores nothing.
3. A conversation resent with its history plus a new message loads the earlier turns from memory.
4. max_tokens and stop are honoured.
5. A chat with memory routed reads each text once per request: the latest message after the
   grafts (not again without them), the previous turn's unstored rest as the history it stores.
6. A pasted document (stored as a document, not as the exchange's graft) is not read a second
   time whole for the message's routing key: its last part is, once.
"""

from __future__ import annotations

import httpx2 as httpx
import pytest

from grm.runtime.answer import prompt_blocks
from grm.serve.prompts import render_chat
from tests.conftest import forward_reads, lorem
from tests.serve.conftest import MODEL


def chat(client, messages, **kw):
    return client.chat.completions.create(model=MODEL, messages=messages, temperature=0, **kw)


def test_models_lists_the_loaded_model(server):
    models = server.client().models.list()
    assert [m.id for m in models.data] == [MODEL]


def test_chat_completion_answers_with_usage_and_grm_object(server):
    r = chat(server.client(), [{"role": "user", "content": "Say something about harbors."}], max_tokens=6)
    assert r.object == "chat.completion" and r.model == MODEL
    msg = r.choices[0].message
    assert msg.role == "assistant" and isinstance(msg.content, str)
    assert r.choices[0].finish_reason in ("stop", "length")
    assert 0 < r.usage.completion_tokens <= 6
    extra = r.model_extra["grm"]
    assert r.usage.prompt_tokens_details.cached_tokens == extra["tokens_from_memory"]
    assert extra["tokens_from_memory"] + extra["tokens_computed"] == r.usage.prompt_tokens
    for field in ("mounted", "lossy", "abstained", "mode"):
        assert field in extra


def test_chat_stream_adds_up_to_the_non_streamed_answer(server):
    messages = [{"role": "system", "content": "You are terse."},
                {"role": "user", "content": "Name a river in the north."}]
    full = chat(server.client(), messages, max_tokens=12).choices[0].message.content
    chunks = list(chat(server.client(), messages, max_tokens=12, stream=True,
                       stream_options={"include_usage": True}))
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == full
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finishes in (["stop"], ["length"])
    assert chunks[-1].choices == [] and chunks[-1].usage.prompt_tokens > 0


def test_completion_stream_and_not_agree(server):
    c = server.client()
    full = c.completions.create(model=MODEL, prompt="The orchard in winter", max_tokens=10, temperature=0)
    assert full.object == "text_completion"
    pieces = list(c.completions.create(model=MODEL, prompt="The orchard in winter", max_tokens=10, stream=True))
    assert "".join(p.choices[0].text for p in pieces) == full.choices[0].text
    assert pieces[-1].choices[0].finish_reason == full.choices[0].finish_reason
    assert pieces[-1].model_extra["grm"]["mode"] == "exact"


def test_max_tokens_limits_the_answer(server):
    r = server.client().completions.create(model=MODEL, prompt="Count: one two", max_tokens=3, temperature=0)
    assert r.usage.completion_tokens <= 3
    long = server.client().completions.create(model=MODEL, prompt="Count: one two", max_tokens=24, temperature=0)
    assert len(r.choices[0].text) <= len(long.choices[0].text)


def test_stop_string_cuts_the_answer(server):
    c = server.client()
    prompt = "Station log, morning entry:"
    full = c.completions.create(model=MODEL, prompt=prompt, max_tokens=24, temperature=0).choices[0].text
    clean = [i for i in range(1, len(full) - 1) if full[i] != "\ufffd" and full[i] not in full[:i]]
    if not clean:
        pytest.skip("the random model's answer has no usable stop character")
    stop = full[clean[0]]
    cut = c.completions.create(model=MODEL, prompt=prompt, max_tokens=24, temperature=0, stop=[stop])
    assert cut.choices[0].text in (full[:clean[0]], full[:clean[0]].strip())


def test_conversation_history_hits_memory_on_the_next_turn(server):
    c = server.client()
    history = [{"role": "system", "content": "You are the harbor station's assistant. " * 8},
               {"role": "user", "content": "Who keeps the north light?"}]
    first = chat(c, history, max_tokens=8)
    history += [{"role": "assistant", "content": first.choices[0].message.content},
                {"role": "user", "content": "And the south one?"}]
    second = chat(c, history, max_tokens=8)
    reused = second.usage.prompt_tokens_details.cached_tokens
    # everything the first turn read (its prompt) is loaded, not recomputed, on the second turn
    assert reused >= first.usage.prompt_tokens - 1, (reused, first.usage.prompt_tokens)
    assert second.model_extra["grm"]["tokens_computed"] < second.usage.prompt_tokens - first.usage.prompt_tokens + 64


def test_memory_off_loads_and_stores_nothing(server):
    c = server.client()
    messages = [{"role": "user", "content": "A question asked only without memory, twice."}]
    for _ in range(2):
        r = chat(c, messages, max_tokens=4, extra_body={"grm": {"memory": False}})
        assert r.usage.prompt_tokens_details.cached_tokens == 0
        assert r.model_extra["grm"]["memory"] is False
    on = chat(c, messages, max_tokens=4)  # nothing was stored by the two requests above
    assert on.usage.prompt_tokens_details.cached_tokens < on.usage.prompt_tokens // 2


def test_memory_command_in_a_chat_message_is_executed_not_answered(server):
    c = server.client("alice")
    r = chat(c, [{"role": "user", "content": "remember permanently: the ferry leaves at 7"}], max_tokens=8)
    assert "ferry" in r.choices[0].message.content
    assert r.model_extra["grm"]["command"]["changed"] is True
    found = httpx.get(server.url + "/v1/memories", params={"query": "ferry"}, headers=server.headers("alice")).json()
    assert [m["memory"] for m in found["results"]] == ["the ferry leaves at 7"]


def test_a_chat_with_memory_reads_each_text_once_per_request(fresh_server):
    """Issue 30: two served turns with a fact routed for each latest message.
    1. Turn 1, `[sinks | history | fact | last part]`: the last part (the message and the assistant
       marker) is read in one forward call, after the fact, and nothing else is read after the
       history (no second read without the fact); `grm.model_reads` counts every call.
    2. Turn 2's history (turn 1's prompt and reply, the next user marker) is served from the store
       as far as turn 1 stored it (its history); the rest is read once, in the chain blocks it is
       stored as, then the new last part once, after the fact.
    3. Each latest message is read alone after the sinks once, labelled as its graft stores it: the
       read gives its routing key and its graft (GraftMemory.read_said); never bare for its key."""
    srv = fresh_server(runtime={"reread": "never"})  # grafts mounted, never re-read as text
    rt, c = srv.engine.rt, srv.client()
    tok, budget, sinks = rt.lm.tokenizer, rt.config.block_tokens, len(rt.lm.tokenizer.sink_ids)
    chat(c, [{"role": "user", "content": "remember permanently: my locker code is 4471"}], max_tokens=8)

    def turn(messages: list[dict]) -> tuple:
        """(the answer's `grm` object, its answer, the prompt, where its last part starts, its reads)"""
        prompt = render_chat(tok, messages)
        split = prompt.rfind("\n", 0, prompt.rfind(messages[-1]["content"])) + 1
        with forward_reads(rt) as calls:
            r = chat(c, messages, max_tokens=6)
        extra = r.model_extra["grm"]
        assert "fact" in [m.get("kind") for m in extra["mounted"]], extra["mounted"]
        assert extra["model_reads"]["tokens"] == sum(len(ids) for _, ids in calls)
        said = messages[-1]["content"]
        read = [ids for _, ids in calls]
        assert read.count(tok.encode(f"User: {said}\n\n")) == 1 and tok.encode(said) not in read
        return extra, r.choices[0].message.content, prompt, split, calls

    def seats(start: int, text: str) -> list[tuple[int, list[int]]]:
        """Where `text`'s chain blocks are read from seat `start`, one forward call each."""
        out = []
        for block in prompt_blocks(text, tok, budget):
            out.append((start, list(block.ids)))
            start += len(block.ids)
        return out

    q1 = "What is my locker code?"
    first, a1, p1, split1, calls = turn([{"role": "user", "content": q1}])
    end1 = sinks + sum(len(ids) for _, ids in seats(0, p1[:split1]))  # the seat after turn 1's history
    fact1 = sum(m["span"][1] - m["span"][0] for m in first["mounted"] if m.get("kind"))
    assert [x for x in calls if x[0] >= end1] == [(end1 + fact1, tok.encode(p1[split1:]))]

    messages = [{"role": "user", "content": q1}, {"role": "assistant", "content": a1},
                {"role": "user", "content": "Thanks. Where is the locker?"}]
    second, _a2, p2, split2, calls = turn(messages)
    assert p2.startswith(p1)
    fact2 = sum(m["span"][1] - m["span"][0] for m in second["mounted"] if m.get("kind"))
    assert second["tokens_from_memory"] == end1 + fact2  # turn 1's history hit, and the fact mounted
    history = seats(end1, p2[split1:split2])  # turn 1's last part, its reply, the next user marker
    end2 = history[-1][0] + len(history[-1][1])
    assert [x for x in calls if x[0] >= end1] == [*history, (end2 + fact2, tok.encode(p2[split2:]))]


def test_a_pasted_document_is_keyed_by_its_last_part_not_read_whole_again(fresh_server):
    """A served message that pastes a document and asks about it is read for its routing key
    before it is answered. The document is stored as a document (sections), never as the
    exchange's graft, so that read serves the key alone: it reads the message's last part
    (`key_tail`, from a line start: the question), once, and not the whole paste a second time
    (on Qwen2.5-Coder-1.5B in bf16, 14.4 s of a 2.7k-token message's first request in a new
    server, whose answer otherwise came from memory in 0.4 s)."""
    from grm.grafts.memory import KEY_TAIL_CHARS, key_tail
    from grm.kv.forward import calls as spans

    srv = fresh_server()
    rt, c = srv.engine.rt, srv.client()
    tok = rt.lm.tokenizer
    said = lorem(12, seed=3) + "\nWhich harbor does the morning boat leave from?"
    assert rt.policy_glue().policy.pasted(said) and len(said) > 2 * KEY_TAIL_CHARS
    tail = key_tail(said)
    assert said.endswith(tail) and len(tail) <= KEY_TAIL_CHARS and said[-len(tail) - 1] == "\n"
    with forward_reads(rt) as calls:
        chat(c, [{"role": "user", "content": said}], max_tokens=2)
    read = [ids for _, ids in calls]
    labelled, whole = tok.encode(f"User: {tail}\n\n"), tok.encode(f"User: {said}\n\n")
    assert read.count([labelled[a:b] for a, b in spans(len(labelled))][0]) == 1  # the last part, once
    assert whole[:spans(len(whole))[0][1]] not in read  # the labelled message is not read from its start
