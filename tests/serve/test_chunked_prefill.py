"""Chunked prefill: a long prompt joining the batch does not stall the answers already decoding
(grm/serve/engine.py `_read`, ServeConfig.prefill_chunk).

Events are the model's forward calls as the worker makes them (a hook on the model): a prompt
read ("read", tokens) or a decoding step of the batch ("step", rows). Expectations:
1. With chunked prefill (512 tokens, the default), two long prompts joining a running stream are
   read a forward call at a time, and the stream, alone in the batch, takes decoding steps (gets
   tokens) between their first prompt call and the first step they take part in; read whole
   (--prefill-chunk 0) no step comes between. Every answer, its finish and the model reads
   reported for each request are the same both ways.
2. A joiner cancelled while its prompt is read stops reading at its next forward call (499, no
   text streamed); the stream in the batch finishes with the answer it gets alone.
3. A forward call of a joiner's prompt that fails fails that request alone: the stream finishes
   with its answer alone, and the server answers the next request.
4. --prefill-chunk below 0 is refused; `grm serve --help` names the default, the ServeConfig default.
"""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.conftest import lorem
from tests.serve.conftest import start
from tests.serve.test_batch import _hold

LONG = 100  # a forward call of more tokens than this reads a joiner's prompt (the stream's is shorter)
STREAM = "A short question about the weather today?"


@contextmanager
def _server(tmp: Path, **fields):
    tmp.mkdir()
    bg, srv = start(tmp, **fields)
    try:
        yield srv
    finally:
        bg.stop()


@contextmanager
def _calls(srv, on_call=None):
    """The model's forward calls as the worker makes them: ("read", tokens) for a prompt call of
    more than LONG tokens, ("step", rows) for a decoding step (one token per row); `on_call(event,
    events)` is called on the worker thread before each call is made."""
    events: list[tuple[str, int]] = []

    def hook(module, args, kwargs):
        ids = kwargs.get("input_ids", args[0] if args else None)
        if ids is None:
            return
        rows, n = ids.shape
        event = ("step", rows) if n == 1 else ("read", n) if n > LONG else None
        if event is not None:
            if on_call is not None:
                on_call(event, events)
            events.append(event)

    handle = srv.engine.rt.lm.model.register_forward_pre_hook(hook, with_kwargs=True)
    try:
        yield events
    finally:
        handle.remove()


def _request(prompt: str, max_tokens: int):
    from grm.serve.generation import GenRequest

    return GenRequest(prompt, max_tokens, memory=False)


def _queued(srv, requests: list, jobs: list | None = None) -> tuple[list, list[list[str]]]:
    """Queue `requests` (GenRequests of alice, in this order) while the worker is held, then let it
    go; the jobs (also in `jobs`, before the worker goes on) and the text each streamed."""
    jobs = [] if jobs is None else jobs
    streamed: list[list[str]] = [[] for _ in requests]
    gate = _hold(srv)
    jobs += [srv.engine.complete("alice", req, streamed[i].append) for i, req in enumerate(requests)]
    gate.set()
    return jobs, streamed


def _result(job) -> tuple:
    r = job.future.result(120)
    return r.text, r.finish_reason, r.completion_tokens, r.grm["model_reads"]


def _chunks(events: list[tuple[str, int]], rows: int) -> tuple[list[list[int]], list[int]]:
    """From the joiners' first prompt call to the first decoding step of `rows` rows (every joiner
    in the batch): the prompt calls made between two decoding steps (each chunk a list of their
    tokens), and the rows of the steps between."""
    first = next(i for i, e in enumerate(events) if e[0] == "read")
    chunks: list[list[int]] = [[]]
    steps: list[int] = []
    for kind, n in events[first:]:
        if kind == "read":
            chunks[-1].append(n)
        elif n == rows:
            return chunks, steps
        else:
            chunks.append([])
            steps.append(n)
    raise AssertionError(f"no step of {rows} rows")


def test_a_long_prompt_joins_while_the_stream_decodes_with_the_answers_read_whole(tmp_path):
    requests = [_request(STREAM, 40), _request(lorem(6, seed=1), 6), _request(lorem(6, seed=2), 5)]
    out, chunks, steps = {}, {}, {}
    for chunk in (512, 0):
        with _server(tmp_path / f"chunk{chunk}", batch=4, prefill_chunk=chunk) as srv, _calls(srv) as events:
            jobs, _ = _queued(srv, requests)
            out[chunk] = [_result(job) for job in jobs]
            chunks[chunk], steps[chunk] = _chunks(events, rows=3)
    # chunked: a decoding step between every two chunks of at most 512 tokens (whole calls); the
    # stream, alone in the batch, got tokens before either joiner's first token
    assert len(chunks[512]) >= 4 and all(0 < sum(c) <= 512 for c in chunks[512])
    assert steps[512][:2] == [1, 1]
    # read whole: both prompts, every call of them, before the stream's next token
    assert len(chunks[0]) == 1 and steps[0] == []
    assert sorted(n for c in chunks[512] for n in c) == sorted(chunks[0][0])  # the same calls
    assert out[512] == out[0]
    assert out[512][0][2] > 10 and all(r[0] for r in out[512])


def test_a_joiner_cancelled_while_its_prompt_is_read_stops_reading(tmp_path):
    from grm.serve.errors import ApiError

    with _server(tmp_path / "srv", batch=4) as srv:
        joiner: list = []

        def cancel_at_the_first_read(event, events):
            if event[0] == "read" and not any(e[0] == "read" for e in events):
                joiner[1].cancel()  # the client went away while its prompt is read

        with _calls(srv, cancel_at_the_first_read) as events:
            jobs, streamed = _queued(srv, [_request(STREAM, 30), _request(lorem(8, seed=4), 8)], joiner)
            stream = _result(jobs[0])
            with pytest.raises(ApiError) as err:
                jobs[1].future.result(120)
        assert err.value.status == 499 and streamed[1] == []
        assert [e for e in events if e[0] == "read"] == [("read", 512)]  # one call read, then it stopped
        alone, _ = _queued(srv, [_request(STREAM, 30)])
        assert stream == _result(alone[0])


def test_a_failed_forward_call_of_a_joining_prompt_fails_that_request_alone(tmp_path):
    with _server(tmp_path / "srv", batch=4) as srv:
        def fail_the_second_read(event, events):
            if event[0] == "read" and sum(1 for e in events if e[0] == "read") == 1:
                raise RuntimeError("the second chunk failed")

        with _calls(srv, fail_the_second_read):
            jobs, _ = _queued(srv, [_request(STREAM, 30), _request(lorem(8, seed=5), 8)])
            stream = _result(jobs[0])
            with pytest.raises(RuntimeError, match="the second chunk failed"):
                jobs[1].future.result(120)
        alone, _ = _queued(srv, [_request(STREAM, 30)])
        assert stream == _result(alone[0])
        again, _ = _queued(srv, [_request(lorem(8, seed=5), 8)])  # the server goes on
        assert _result(again[0])[0]


def test_prefill_chunk_below_0_is_refused_and_help_names_the_default():
    from grm.cli import build_parser
    from grm.errors import UserInputError
    from grm.serve.config import ServeConfig

    with pytest.raises(UserInputError, match="--prefill-chunk"):
        ServeConfig(no_auth=True, prefill_chunk=-1)
    assert ServeConfig(no_auth=True).prefill_chunk == 512
    serve = build_parser()._subparsers._group_actions[0].choices["serve"]
    assert "(default 512)" in next(a.help for a in serve._actions if "--prefill-chunk" in a.option_strings)
