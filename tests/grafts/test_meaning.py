"""The meaning channel (grm/route/meaning.py) and how graft routing uses it (RouteConfig.meaning).

The tiny models' weights are random, so their hidden states mean nothing: the routing tests stub
`meaning_vector` with chosen vectors (what a reading model gives is bench/update_reading.py's and
bench/fidelity.py's), and one test reads the real function through a tiny model.

Expectations:
1. A turn that shares no word with the question is mounted when its meaning is nearest (above
   the floor); a turn far from it, a turn that only asks, and everything with the channel off are not.
2. With `agree`, a turn routed by a word it shares by chance, whose meaning is far
   from the question's, is not mounted; one holding the question's name or number is.
3. A routed turn brings the evidence turn said after it that is nearest it in meaning, mounted
   after it; never an earlier one, one that only asks, or an excluded one.
4. Vectors are stored only for chat turns and facts with the channel on, and only for short spans;
   the index keeps in step with the store (a retired turn leaves it) and centres above
   MIN_CENTRED rows.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from grm.route import meaning
from grm.route.dense import encode_key
from grm.route.meaning import MIN_CENTRED, MeaningIndex, decode_vector, said
from grm.store.kinds import GRAFT

AXES = {"bank": 0, "weather": 1, "pet": 2, "car": 3}
SAID = {  # what each text means, as a direction: the stub model's "reading"
    "My bank is Chase.": ("bank", 1.0),
    "The weather was grey all week.": ("weather", 1.0),
    "Ally has my paycheck now.": ("bank", 0.9),
    "Where does my salary go?": ("bank", 0.95),
    "Which bank holds my money?": ("bank", 1.0),  # only asks: never mounted for its meaning
    "Our cat is called Miso.": ("pet", 1.0),
    "I drive a blue hatchback.": ("car", 1.0),
    "My car money goes to insurance first.": ("car", 1.0),  # shares "money" with a bank question
    "My car cost 1200 in money last year.": ("car", 1.0),
    "Where does my money go, the 1200?": ("bank", 0.95),
}


def stub(model, tokenizer, text):
    axis, weight = SAID.get(said(text), ("car", 0.0))
    vec = torch.full((8,), 0.05)
    vec[AXES[axis]] += weight
    vec[4 + len(said(text)) % 4] += 0.1  # a little of each text's own
    return vec


@pytest.fixture()
def rt(make_runtime, monkeypatch):
    monkeypatch.setattr(meaning, "meaning_vector", stub)  # a query's vector and a stored turn's (QueryVectors)
    return make_runtime(meaning="on", later=0)


def turn(rt, text: str, salt: str):
    return rt.grafts.read_alone(f"User: {text}\n\n", "evidence", salt=salt)


def test_a_turn_sharing_no_word_with_the_question_is_routed_by_its_meaning(rt):
    bank = turn(rt, "My bank is Chase.", "1")
    turn(rt, "The weather was grey all week.", "2")
    turn(rt, "Which bank holds my money?", "3")
    routed = rt.grafts.route("Where does my salary go?")
    assert [r.graft.id for r in routed] == [bank.id]  # no shared word: the meaning channel alone
    assert routed[0].meaning > rt.grafts.config.meaning_floor and routed[0].why()["meaning_cosine"]
    rt.grafts.config = dataclasses.replace(rt.grafts.config, meaning=0)  # --meaning off
    assert rt.grafts.route("Where does my salary go?") == []


def test_a_word_shared_by_chance_is_not_mounted_where_the_meaning_disagrees(rt):
    bank = turn(rt, "My bank is Chase.", "1")
    car = turn(rt, "My car money goes to insurance first.", "2")
    for i in range(3, 10):  # enough rows to centre on
        turn(rt, ["The weather was grey all week.", "Our cat is called Miso.", "I drive a blue hatchback."][i % 3], str(i))
    asked = "Where does my money go?"
    rt.grafts.config = dataclasses.replace(rt.grafts.config, agree=True)  # RuntimeConfig.agree (off by default)
    assert [r.graft.id for r in rt.grafts.route(asked)] == [bank.id]  # "money" alone does not mount the car turn
    rt.grafts.config = dataclasses.replace(rt.grafts.config, agree=False)
    assert {r.graft.id for r in rt.grafts.route(asked)} == {bank.id, car.id}
    rt.grafts.config = dataclasses.replace(rt.grafts.config, agree=True)
    priced = turn(rt, "My car cost 1200 in money last year.", "10")
    got = {r.graft.id for r in rt.grafts.route("Where does my money go, the 1200?")}
    assert priced.id in got and car.id not in got  # the question's number pins it down


def test_a_routed_turn_brings_the_later_turn_nearest_it_in_meaning(rt):
    stated = turn(rt, "My bank is Chase.", "1")
    turn(rt, "The weather was grey all week.", "2")
    turn(rt, "Which bank holds my money?", "3")  # only asks
    update = turn(rt, "Ally has my paycheck now.", "4")
    turn(rt, "Our cat is called Miso.", "5")
    routed = rt.grafts.route("Chase", channel="lexical")[:1]  # the word's hit (meaning picks follow it)
    assert [r.graft.id for r in routed] == [stated.id]
    got = rt.grafts.later(routed)
    assert [r.graft.id for r in got] == [update.id, stated.id]  # mounted after its statement
    assert got[0].meaning > rt.grafts.config.meaning_floor and got[0].score == routed[0].score
    assert rt.grafts.later(got[:1]) == got[:1]  # nothing said after the update means the same
    assert rt.grafts.later(routed, exclude=frozenset({update.id})) == routed


def _statement_weather_update(rt) -> tuple:
    """A statement, an unrelated turn, the statement's update in other words, another turn; the
    first two routed by their words: (statement, weather, update, routed)."""
    stated = turn(rt, "My bank is Chase.", "1")
    weather = turn(rt, "The weather was grey all week.", "2")
    update = turn(rt, "Ally has my paycheck now.", "3")
    turn(rt, "Our cat is called Miso.", "4")
    routed = [r for r in rt.grafts.route("Chase weather", channel="lexical") if r.graft.id in (stated.id, weather.id)]
    return stated, weather, update, routed


def test_pair_mounts_only_the_best_routed_turn_and_its_later_turn(rt):
    stated, weather, update, routed = _statement_weather_update(rt)
    assert {r.graft.id for r in rt.grafts.later(routed)} == {stated.id, weather.id, update.id}
    rt.grafts.config = dataclasses.replace(rt.grafts.config, pair=True)  # RuntimeConfig.pair
    got = rt.grafts.later(sorted(routed, key=lambda r: r.graft.id != stated.id))  # the statement ranked first
    assert [r.graft.id for r in got] == [update.id, stated.id]  # the weather turn beside them is not mounted


def test_replace_mounts_the_later_turn_in_the_routed_turns_place(rt):
    stated, weather, update, routed = _statement_weather_update(rt)
    rt.grafts.config = dataclasses.replace(rt.grafts.config, replace=True)  # RuntimeConfig.replace
    got = rt.grafts.later(sorted(routed, key=lambda r: r.graft.id != stated.id))
    assert [r.graft.id for r in got] == [update.id, weather.id]  # the statement left out, the others kept
    assert got[0].score == routed[0].score  # in the statement's rank
    both = [*routed, *(r for r in rt.grafts.route("Ally paycheck", channel="lexical") if r.graft.id == update.id)]
    assert [r.graft.id for r in rt.grafts.later(both)] == [update.id, weather.id]  # routed itself: mounted once
    assert rt.grafts.later([r for r in routed if r.graft.id == weather.id]) == [
        r for r in routed if r.graft.id == weather.id]  # nothing later on the weather: kept as routed


def test_a_chat_question_mounts_the_statement_and_its_update_in_other_words(rt):
    chat = rt.chat(clear_context=True)
    stated = chat.send("My bank is Chase.")
    chat.send("Our cat is called Miso.")
    update = chat.send("Ally has my paycheck now.")
    chat.send("I drive a blue hatchback.")
    asked = chat.send("Where does my salary go?")
    ids = [m["id"] for m in asked.mounted]
    assert {stated.harvested, update.harvested} <= set(ids)
    assert ids.index(update.harvested) < ids.index(stated.harvested)  # best first: the update nearest the question


def test_vectors_are_stored_for_short_turns_and_facts_with_the_channel_on(make_runtime):
    rt = make_runtime(model="tiny-random-llama-chat")  # a chat template: auto is on
    assert rt.config.meaning == "on" and rt.grafts.config.meaning > 0
    g = rt.grafts.read_alone("User: My bank is Chase.\n\n", "evidence")
    vec = decode_vector(g.record.meta.get("meaning"))
    assert vec is not None and vec.shape == (rt.lm.model.config.hidden_size,) and np.isfinite(vec).all()
    assert "meaning" not in rt.grafts.read_alone("My bank is Chase. " * 3, "document").record.meta
    long = "word " * (meaning.MAX_TOKENS + 10)
    assert meaning.meaning_vector(rt.lm.model, rt.lm.tokenizer, long) is None
    off = make_runtime(model="tiny-random-llama", store=rt.config.store.parent / "other")  # no template: auto is off
    assert off.config.meaning == "off"
    assert "meaning" not in off.grafts.read_alone("User: My bank is Chase.\n\n", "evidence").record.meta


def test_the_index_follows_the_store_and_centres_over_enough_rows(rt):
    bank = turn(rt, "My bank is Chase.", "1")
    rt.grafts.route("Where does my salary go?")  # builds the index
    assert bank.id in rt.grafts._meaning.rows
    rt.grafts.retire([bank.id], into="digest")  # no longer routable: it leaves the index
    assert rt.grafts.route("Where does my salary go?") == []
    assert bank.id not in rt.grafts._meaning.rows


def test_centring_and_labels():
    idx = MeaningIndex(lambda text: False)
    rows = np.eye(4, dtype=np.float32) + 1.0  # a shared direction every raw cosine carries
    for i, r in enumerate(rows):
        idx.put(dataclasses.make_dataclass("R", ["key", "text", "meta"])(
            f"k{i}", "", {"meaning": encode_key(torch.from_numpy(r)), "kind": "evidence", "created": i}))
    raw = idx.scores(rows[0])
    assert raw[0][0].key == "k0" and raw[1][1] > 0.5  # under MIN_CENTRED rows: raw cosines, all high
    for i in range(4, MIN_CENTRED):
        v = np.full(4, 1.0, dtype=np.float32)
        v[i % 4] += 1.0
        idx.put(dataclasses.make_dataclass("R", ["key", "text", "meta"])(
            f"k{i}", "", {"meaning": encode_key(torch.from_numpy(v)), "kind": "evidence", "created": i}))
    centred = dict((r.key, c) for r, c in idx.scores(rows[0]))
    assert centred["k0"] > 0.5 and centred["k1"] < 0.2  # the shared direction is gone
    idx.drop("k0")
    assert "k0" not in {r.key for r, _ in idx.scores(rows[0])}
    assert said("User: My bank is Chase.\nAssistant: Noted.\n\n") == "My bank is Chase. Noted."


def test_a_chat_turn_is_read_for_its_meaning_once(rt, monkeypatch):
    """Routed as a query, then stored as a turn: the same words, one read (QueryVectors by `said`)."""
    read = []

    def counted(m, t, text):
        read.append(said(text))
        return stub(m, t, text)
    monkeypatch.setattr(meaning, "meaning_vector", counted)
    monkeypatch.setattr("grm.grafts.memory.meaning_vector", counted, raising=False)  # where a turn's was read before
    chat = rt.chat(clear_context=True)
    chat.send("My bank is Chase.")
    chat.send("Ally has my paycheck now.")
    turns = [w for w in read if w in ("My bank is Chase.", "Ally has my paycheck now.")]  # not the fact said back
    assert turns == ["My bank is Chase.", "Ally has my paycheck now."]  # each routed, then stored: read once
    stored = [r for r in rt.store.records("default", GRAFT) if r.meta.get("kind") == "evidence"]
    assert len(stored) == 2 and all(decode_vector(r.meta.get("meaning")) is not None for r in stored)
