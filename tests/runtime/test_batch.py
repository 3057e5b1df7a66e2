"""Answers generated together (grm/runtime/batch.py) are the answers generated alone.

Expectations:
1. Requests of different lengths, limits and stop strings, some joining while others decode and
   leaving at different steps: each batched answer has the text, the token count and the finish
   reason of the same request asked alone (`Runtime.ask`), and its streamed deltas add up to its
   text. On the tiny llama and on SmolLM2-135M in fp32 (the greedy text, not bit-identical
   logits: a batched step's logits differ from a lone one's by rounding, tests/kv/test_batch.py).
2. The memory path is unchanged: a batch of prompts stored by an earlier `ask` loads them
   (tokens from memory as alone) and answers the same.
3. A model with a sliding window (the tiny gemma3) is not batched (`Runtime.batch()` is None).
4. Chunked prefill: a long prompt read with pauses (`answering(pauses=True)`), another request's
   batch stepped between every two of its forward calls, pauses before each forward call of a
   read without pauses (PREFILL_CHUNK tokens, the rest last) and gives the same K/V and logits,
   bit for bit, and the same answer as `ask`; with its prompt stored (exact mode), the same
   blocks, which a later ask loads as it loads those stored without pauses.
"""

from __future__ import annotations

import pytest
import torch

from tests.conftest import lorem

PROMPTS = ["Tell me about the sea.", "What is the capital of France?",
           "Write a haiku about winter trees and snow falling quietly on the hills.", "Name three colours.",
           "Why is the sky blue? Explain briefly.", "Count: one two three", "hello",
           "The orchard in winter is"]


def _asks(n: int, max_new: int) -> list[dict]:
    """Per request: ask's keyword arguments, limits and stop strings varied (they leave at different steps)."""
    out = []
    for i in range(n):
        kw = {"mode": "exact", "max_new_tokens": max_new - 3 * (i % 3), "chat": i % 2 == 0, "memory": False}
        if i % 4 == 3:
            kw["stop"] = ("e",)
        out.append(kw)
    return out


def _batched(rt, prompts: list[str], asks: list[dict], first: int = 3) -> tuple[list, list[str]]:
    """Answer every prompt in one batch: `first` join at once, then one more after each step."""
    batch = rt.batch()
    answers, streams, steps = [None] * len(prompts), [""] * len(prompts), {}
    rows_seen = []

    def join(i: int) -> None:
        def on_token(delta: str) -> bool:
            streams[i] += delta
            return True

        steps[i] = rt.answering(prompts[i], on_token=on_token, **asks[i])
        try:
            dec = next(steps[i])
        except StopIteration as done:
            answers[i] = done.value
            return
        if not batch.join(i, dec):
            answers[i] = rt.resume(steps[i])

    waiting = list(range(len(prompts)))
    for i in waiting[:first]:
        join(i)
    waiting = waiting[first:]
    while len(batch) or waiting:
        if waiting:
            join(waiting.pop(0))
        if len(batch):
            rows_seen.append(len(batch))
            for i in batch.step():
                answers[i] = rt.resume(steps[i])
    assert max(rows_seen) > 1  # they were generated together
    return answers, streams


def _check_same(rt, prompts: list[str], asks: list[dict]) -> None:
    alone = [rt.ask(p, **kw) for p, kw in zip(prompts, asks)]
    together, streams = _batched(rt, prompts, asks)
    for a, b, s in zip(alone, together, streams):
        assert (b.answer, b.completion_tokens, b.finish_reason) == (a.answer, a.completion_tokens, a.finish_reason)
        assert (b.prompt_tokens, b.tokens_from_memory) == (a.prompt_tokens, a.tokens_from_memory)
        assert s.strip() == b.answer.strip()
    assert len({a.finish_reason for a in alone}) > 1 or len({a.completion_tokens for a in alone}) > 1


def test_batched_answers_are_the_answers_alone_on_the_tiny_model(make_runtime):
    rt = make_runtime()
    _check_same(rt, PROMPTS, _asks(len(PROMPTS), 14))


def test_a_batch_loads_stored_prompts_as_alone(make_runtime):
    rt = make_runtime()
    doc = "The harbor master keeps the tide tables and the keys of the boat house. " * 6
    prompts = [doc + f"\nQuestion {i}: who keeps the keys?\nAnswer:" for i in range(4)]
    asks = [{"mode": "exact", "max_new_tokens": 8, "store_prompt": True} for _ in prompts]
    for p, kw in zip(prompts, asks):  # stores the prompts' blocks
        rt.ask(p, **kw)
    alone = [rt.ask(p, **kw) for p, kw in zip(prompts, asks)]
    assert all(a.tokens_from_memory > 0 for a in alone)
    together, _ = _batched(rt, prompts, asks, first=2)
    assert [(b.answer, b.tokens_from_memory) for b in together] == [(a.answer, a.tokens_from_memory) for a in alone]


def test_a_sliding_window_model_is_not_batched(make_runtime, tmp_path):
    assert make_runtime("tiny-random-gemma3").batch() is None
    assert make_runtime("tiny-random-llama", store=tmp_path / "other").batch() is not None


def test_a_model_in_bf16_on_a_cpu_is_not_batched(make_runtime, tmp_path):
    # a CPU's matmul rounds a row differently beside other rows; at bf16's precision SmolLM2's
    # batched greedy answers drifted from the same requests alone (session 27, a CPU with fast bf16)
    assert make_runtime("tiny-random-llama", dtype="bfloat16").batch() is None
    assert make_runtime("tiny-random-llama", store=tmp_path / "other", dtype="float32").batch() is not None


@pytest.mark.model
def test_batched_answers_are_the_answers_alone_on_smollm2(make_runtime):
    rt = make_runtime("smollm2-135m", dtype="float32")
    asks = _asks(len(PROMPTS), 24)
    _check_same(rt, PROMPTS, asks)


def _read_pausing(rt, batch, prompt: str, **kw) -> tuple:
    """`prompt` read with pauses, `batch` stepped at every pause: (its steps, Decoding, pause sizes,
    steps of the batch between two of its forward calls)."""
    from grm.runtime.answer import Pause

    steps = rt.answering(prompt, pauses=True, **kw)
    pauses, stepped = [], 0
    item = next(steps)
    while isinstance(item, Pause):
        pauses.append(item.tokens)
        if len(batch) and len(pauses) > 1:  # another request decodes between two forward calls
            batch.step()
            stepped += 1
        item = next(steps)
    return steps, item, pauses, stepped


def _same_read(a, b) -> bool:
    from grm.kv import kv_from_cache

    ka, kb = kv_from_cache(a.cache), kv_from_cache(b.cache)
    return (torch.equal(ka.keys, kb.keys) and torch.equal(ka.values, kb.values) and torch.equal(a.logits, b.logits)
            and a.prompt_tokens == b.prompt_tokens)


@pytest.mark.parametrize("memory", [False, True])
def test_a_prompt_read_with_pauses_is_the_prompt_read_whole(make_runtime, tmp_path, memory):
    from grm.kv.forward import PREFILL_CHUNK
    from grm.runtime.execute import Decoding

    rt = make_runtime()
    prompt = lorem(12, seed=3)
    kw = {"mode": "exact", "max_new_tokens": 12, "chat": True, "memory": memory, "store_prompt": memory}
    n = len(rt.lm.tokenizer.encode(prompt))
    batch = rt.batch()
    running = rt.answering("A long answer about the sea, please.", mode="exact", max_new_tokens=200, chat=True,
                           memory=False)
    assert batch.join("running", next(running))
    steps, dec, pauses, stepped = _read_pausing(rt, batch, prompt, **kw)
    assert isinstance(dec, Decoding)
    if not memory:  # one run, read as prefill reads it: full calls, the rest last
        assert set(pauses[:-1]) == {PREFILL_CHUNK} and 0 < pauses[-1] <= PREFILL_CHUNK
    assert len(pauses) >= 3 and stepped == len(pauses) - 1 and sum(pauses) >= n
    whole_rt = make_runtime(store=tmp_path / "whole")  # the same prompt read without pauses (nothing stored yet)
    whole_steps = whole_rt.answering(prompt, **kw)
    whole = next(whole_steps)
    assert _same_read(dec, whole)
    dec.alone(rt.lm.model)
    paused = rt.resume(steps)
    whole.alone(whole_rt.lm.model)
    alone = whole_rt.resume(whole_steps)
    assert (paused.answer, paused.completion_tokens, paused.tokens_from_memory) == \
        (alone.answer, alone.completion_tokens, alone.tokens_from_memory)
    if memory:  # the blocks stored while pausing are the ones a read without pauses stores
        again, again_whole = rt.ask(prompt, **kw), whole_rt.ask(prompt, **kw)
        assert again.tokens_from_memory == again_whole.tokens_from_memory > paused.tokens_from_memory
        assert again.answer == again_whole.answer == alone.answer
        stored = {r.key: rt.store.read_payload(r) for r in rt.store.records("default", "block")}
        stored_whole = {r.key: whole_rt.store.read_payload(r) for r in whole_rt.store.records("default", "block")}
        assert stored == stored_whole and len(stored) >= 2


def test_a_recall_history_is_read_with_pauses_as_it_is_read_whole(make_runtime, tmp_path):
    """The server's chat with memory (`recall`): the history not yet stored is read before the
    routed grafts are mounted after it, and that read pauses too (the batch steps between its
    forward calls), with the same K/V, answer and stored blocks as a read that does not pause."""
    from grm.runtime.execute import Decoding

    def runtime(store):
        rt = make_runtime(store=store, block_tokens=48, reread="never")
        rt.chat().send("remember permanently: my locker code is 4471")
        return rt

    rt, whole_rt = runtime(tmp_path / "paused"), runtime(tmp_path / "whole")
    history = f"System: be brief.\nUser: {lorem(3, seed=5)}\nAssistant: fine.\n"
    prompt = history + "User: What is my locker code?\nAssistant:"
    kw = {"mode": "exact", "max_new_tokens": 6, "chat": True, "store_prompt": True, "recall": "What is my locker code?"}
    batch = rt.batch()
    running = rt.answering("A long answer about the sea, please.", mode="exact", max_new_tokens=200, chat=True,
                           memory=False)
    assert batch.join("running", next(running))
    steps, dec, pauses, stepped = _read_pausing(rt, batch, prompt, **kw)
    assert isinstance(dec, Decoding) and "fact" in [m.get("kind") for m in dec.ready.mounted]
    history_blocks = len(dec.ready.prefix.blocks) if dec.ready.prefix else 0
    assert len(pauses) >= 3 and stepped == len(pauses) - 1  # the history's calls and the message's
    assert history_blocks == 0 and sum(pauses) > len(rt.lm.tokenizer.encode(history))  # nothing of it was stored
    whole_steps = whole_rt.answering(prompt, **kw)
    whole = next(whole_steps)
    assert _same_read(dec, whole)
    dec.alone(rt.lm.model)
    whole.alone(whole_rt.lm.model)
    paused, alone = rt.resume(steps), whole_rt.resume(whole_steps)
    assert (paused.answer, paused.tokens_from_memory) == (alone.answer, alone.tokens_from_memory)
    stored = {r.key: rt.store.read_payload(r) for r in rt.store.records("default", "block")}
    assert stored == {r.key: whole_rt.store.read_payload(r) for r in whole_rt.store.records("default", "block")}
    assert len(stored) >= 2  # the history's chain blocks, stored as they were read
