"""Truth wins ties and abstention through the runtime, on the tiny llama (mechanics only: what is
routed, mounted, harvested and reported; answer quality is bench/fidelity.py's, on SmolLM2).

Expectations:
1. After `correct memory:`, a turn holding the old value (not evidence of the fact) is never
   routed for the question; the live fact's graft is.
2. A chat question about the user that memory holds nothing on is answered with the configured
   line, `abstained`, and not harvested; an answerable one is answered and harvested.
3. `ask` in grafts and exact-section modes abstains the same way (`"abstained": true` in JSON);
   exact mode (a prompt given) never abstains; abstain_floor=0 turns abstention off.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from conftest import lorem  # noqa: E402


def test_a_turn_holding_a_corrected_value_is_not_routed(make_runtime):
    rt = make_runtime(max_new_tokens=3)
    chat = rt.chat(clear_context=True)
    chat.send("My locker code is 1234.")
    asked = chat.send("I keep forgetting that locker code 1234 somehow.")  # holds the old value, no fact
    before = chat.send("Which locker code do I keep forgetting?")
    assert asked.harvested in [m["id"] for m in before.mounted]  # routable while 1234 is true
    assert chat.send("correct memory: locker code 1234 => 5678").changed
    after = chat.send("Which locker code do I keep forgetting?")
    ids = [m["id"] for m in after.mounted]
    assert asked.harvested not in ids
    live = [f for f in chat.glue.policy.facts() if f.value == "5678"]
    assert live and live[0].graft in [m["id"] for m in chat.send("What is my locker code?").mounted]


def test_chat_abstains_on_a_question_memory_holds_nothing_on(make_runtime):
    rt = make_runtime(max_new_tokens=3, abstain_line="Nothing in memory on that.")
    chat = rt.chat(clear_context=True)
    chat.send("My locker code is 4721.")
    chat.send("My cat is Pepper.")
    n = len(rt.grafts.grafts(kind="evidence"))
    r = chat.send("What is my shoe size?")
    assert r.abstained and r.answer == "Nothing in memory on that." and r.harvested is None
    assert r.to_json()["abstained"] is True and len(rt.grafts.grafts(kind="evidence")) == n
    ok = chat.send("What is my locker code?")
    assert not ok.abstained and ok.harvested and ok.mounted
    small_talk = chat.send("How do I keep houseplants alive?")  # not about the user's memory
    assert not small_talk.abstained and small_talk.harvested


def test_ask_abstains_in_grafts_and_section_modes_never_in_exact(make_runtime, tmp_path):
    rt = make_runtime(max_new_tokens=3, section_tokens=96)
    (tmp_path / "d.txt").write_text(lorem(4, seed=3), encoding="utf-8")
    rt.ingest([tmp_path / "d.txt"], progress=False)
    q = "Which harbor keeps the purple giraffe umbrella?"  # shares "harbor" with the text, nothing else
    for mode in ("grafts", "exact-section"):
        a = rt.ask(q, mode=mode)
        assert a.abstained and a.to_json()["abstained"] is True and a.answer == rt.config.abstain_line
        assert a.mode == mode and a.tokens_computed == 0 and a.mounted
    streamed = []
    rt.ask(q, mode="grafts", on_token=streamed.append)
    assert streamed == [rt.config.abstain_line]
    answered = rt.ask("Which harbor station?", mode="grafts")
    assert not answered.abstained and answered.tokens_computed > 0
    exact = rt.ask(q, mode="exact")
    assert not exact.abstained and exact.mode == "exact"


def test_abstain_floor_zero_turns_abstention_off(make_runtime, tmp_path):
    rt = make_runtime(max_new_tokens=3, abstain_floor=0.0)
    (tmp_path / "d.txt").write_text(lorem(4, seed=3), encoding="utf-8")
    rt.ingest([tmp_path / "d.txt"], progress=False)
    a = rt.ask("Which harbor keeps the purple giraffe umbrella?", mode="grafts")
    assert not a.abstained and a.tokens_computed > 0


def test_a_live_fact_is_mounted_beside_turns_that_asked_the_same_question(make_runtime):
    rt = make_runtime(max_new_tokens=3)
    chat = rt.chat(clear_context=True)
    chat.send("My locker code is 4721.")
    for _ in range(3):  # each asking turn matches the question better than the fact does
        chat.send("What is my locker code? Tell me what my locker code is, my locker code please?")
    r = chat.send("What is my locker code?")
    fact = next(f for f in chat.glue.policy.facts() if f.value == "4721")
    assert fact.graft in [m["id"] for m in r.mounted] and not r.abstained
