"""The memory chat on the tiny llama (mechanics; recall itself is measured on SmolLM2 in bench/).

Expectations:
1. Every turn is harvested as an evidence graft, durably: a new runtime on the store routes to it.
2. Memory commands are executed by the policy plane, not sent to the model; a correction hides
   the superseded fact's graft and the stale turn from routing, and `why` names both turns.
3. Under a device budget of 0 bytes nothing stays resident after a turn, and page-ins are counted.
4. Without --clear-context the last turns stay live (seats grow by them); with it they do not.
5. A turn demoted to the archive with its exact K/V dropped is still recalled, reported lossy.
6. Folding writes digest grafts whose source turns retire from routing; descent brings a source
   back for a query that matches it.
8. A question a lead rule covers, asked while memory mounts something, is answered after its lead
   ("Your locker code is ...", the answer begins with it); with nothing routed, or `lead="off"`,
   the turn is read plain. A fact's graft reads as the user saying it and the assistant saying it
   back in the second person.
7. The CLI prints one JSON object per non-blank script line; a bad line is reported and skipped;
   a non-UTF-8 script is refused with exit 2.
"""

from __future__ import annotations

import json

import pytest

from grm.cli import main
from grm.errors import UserInputError


def test_turns_are_harvested_and_remembered_across_processes(make_runtime, tmp_path):
    rt = make_runtime(max_new_tokens=4)
    chat = rt.chat(clear_context=True)
    r1 = chat.send("The vault code of Quintar is 7781.")
    assert r1.harvested and r1.turn == 1 and r1.mounted == [] and r1.command is None
    g = rt.grafts.get(r1.harvested)
    assert g.kind == "evidence" and "Quintar" in g.text and g.record.meta["turn"] == 1
    r2 = chat.send("hello")
    assert set(r2.to_json()) >= {"answer", "mounted", "seats_resident", "device_bytes", "page_ins", "timings"}
    rt.close()
    rt2 = make_runtime(max_new_tokens=4, store=tmp_path / "store")
    r = rt2.chat(clear_context=True).send("What is the vault code of Quintar?")
    assert r1.harvested in [m["id"] for m in r.mounted]
    assert r.tokens_from_memory > len(rt2.exact.sink_ids)


def test_each_harvest_mode_stores_the_turn_and_the_alone_modes_read_it_after_the_sinks(make_runtime):
    """`live` slices the turn out of the live cache at its own seats; `standalone` (the turn) and
    `user` (the user's words) store what reading them alone right after the sinks gives."""
    import torch

    from grm.kv.forward import read_after_sinks
    from grm.runtime.chat import ChatSession

    rt = make_runtime(max_new_tokens=4)
    sinks = rt.exact.sinks()
    for mode in ("live", "standalone", "user"):
        said = ChatSession(rt.ctx, rt.policy_glue(), clear_context=True, harvest=mode).send(
            "The vault code of Quintar is 7781.")
        g = rt.grafts.get(said.harvested)
        assert g.kind == "evidence" and "Quintar" in g.text and g.record.meta["harvest"] == mode
        if mode == "user":
            assert g.text == "User: The vault code of Quintar is 7781.\n\n"
        if mode != "live":
            assert g.record.meta["seat"] == sinks.tokens
            kv, loaded = read_after_sinks(rt.lm.model, sinks, g.record.meta["ids"]), rt.grafts.load(g.id)
            assert torch.equal(loaded.keys, kv.keys) and torch.equal(loaded.values, kv.values)


def test_a_turns_words_are_read_after_the_sinks_once_for_its_route_and_its_graft(make_runtime):
    """harvest="user": the read that stores "User: <words>" also gives the turn's routing key (the
    words' part of it), so nothing reads the words alone after the sinks a second time, and routing
    ranks with that key (the one QueryKeys keeps for the words; GraftMemory.read_said)."""
    import torch

    from grm.route.dense import query_key, routing_key
    from tests.conftest import forward_reads

    rt = make_runtime(max_new_tokens=2)
    chat = rt.chat(clear_context=True)
    chat.send("The vault code of Quintar is 7781.")
    seat, tok = rt.exact.sinks().tokens, rt.lm.tokenizer
    text = "What is the vault code of Quintar?"
    with forward_reads(rt) as calls:
        r = chat.send(text)
    alone = [ids for at, ids in calls if at == seat]
    assert alone == [tok.encode(f"User: {text}\n\n")]  # one read after the sinks: the stored graft's
    config = rt.grafts.config.channels.dense
    stored = rt.grafts.load(r.harvested)
    ids = tok.encode(f"User: {text}\n\n")
    label, blank = tok.encode("User:"), tok.encode("\n\n")
    assert ids[:len(label)] == label and ids[-len(blank):] == blank  # the words' part: between them
    label, end = len(label), len(ids) - len(blank)
    kept = rt.exact.query_keys.get(rt.lm.model, rt.exact.sinks(), tok.encode(text), rt.dialect, config)
    assert torch.equal(kept, routing_key(stored.slice(label, end), rt.dialect, seat + label, config))
    assert not torch.equal(kept, query_key(rt.lm.model, rt.exact.sinks(), tok.encode(text), rt.dialect, config))


def test_a_turn_demoted_to_the_archive_is_recalled_and_reported_lossy(make_runtime, tmp_path):
    from grm.archive.codebook_store import save_codebooks
    from grm.archive.tier import ArchiveConfig
    from grm.archive.train import TrainConfig, train_codebooks
    from tests.conftest import lorem

    rt = make_runtime(max_new_tokens=3)
    chat = rt.chat(clear_context=True)
    said = chat.send("The vault code of Quintar is 7781. " + lorem(1, 9))
    assert not chat.send("What is the vault code of Quintar?").lossy  # exact while not demoted
    books = train_codebooks(rt.lm, rt.dialect, lorem(20, seed=7), TrainConfig(k=32, iters=5))
    save_codebooks(rt.store, books)
    report = rt.archive.demote(rt.config.tenant, books, kinds=("graft",), config=ArchiveConfig(drop_exact=True))
    assert said.harvested in report.demoted
    facts = [g.id for g in rt.grafts.grafts(kind="fact")]
    assert facts and all("stays exact" in report.skipped[f] for f in facts)  # a sweep never archives facts
    rt.close()
    rt2 = make_runtime(max_new_tokens=3, store=tmp_path / "store")
    r = rt2.chat(clear_context=True).send("What is the vault code of Quintar?")
    assert said.harvested in [m["id"] for m in r.mounted] and r.lossy
    assert rt2.stats()["archive"]["archive_hits"] >= 1


def test_bad_turns(make_runtime):
    chat = make_runtime(max_new_tokens=2).chat()
    for bad in ("", "   \n"):
        with pytest.raises(UserInputError):
            chat.send(bad)
    with pytest.raises(UserInputError):
        chat.send("x" * 20_000)


def test_rules_off_reads_no_fact_from_a_plain_turn_and_keeps_the_commands(make_runtime):
    rt = make_runtime(max_new_tokens=2, rules="off")
    assert (rt.config.rules, rt.config.lead, rt.config.abstain_floor) == ("off", "off", 0.0)
    chat = rt.chat(clear_context=True)
    chat.send("My locker code is 1234.")
    assert chat.glue.policy.facts() == []  # no rule read the turn: it is memory as evidence only
    assert chat.send("remember: my bike lock code is 9090").changed
    assert [f.value for f in chat.glue.policy.facts()] == ["9090"]
    r = chat.send("What is my locker code?")  # no floor: what is routed is read, never abstained
    assert not r.abstained and r.mounted
    assert make_runtime(max_new_tokens=2, rules="on", store=rt.config.store.parent / "on").config.rules == "on"
    # a family's own option, given, still applies
    led = make_runtime(max_new_tokens=2, rules="off", lead="rules", abstain_floor=0.3,
                       store=rt.config.store.parent / "l")
    assert (led.config.lead, led.config.abstain_floor) == ("rules", 0.3)
    for bad in ({"rules": "maybe"}, {"later": -1}):
        with pytest.raises(UserInputError):
            make_runtime(store=rt.config.store.parent / "bad", **bad)


def test_commands_and_supersession_hide_stale_memory(make_runtime):
    rt = make_runtime(max_new_tokens=3)
    chat = rt.chat(clear_context=True)
    stated = chat.send("My locker code is 1234.")
    chat.send("Nice weather today.")
    fix = chat.send("correct memory: locker code 1234 => 5678")
    assert fix.command == "correct memory" and fix.changed and fix.harvested is None and "5678" in fix.answer
    facts = chat.glue.policy.facts()
    assert [f.value for f in facts if "locker" in f.subject.lower() or "locker" in f.statement.lower()] == ["5678"]
    live = next(f for f in facts if "5678" in f.statement)
    excluded = chat.glue.exclusions()
    assert stated.harvested in excluded  # the turn that said 1234 is stale evidence now
    old = [f for f in chat.glue.policy.ledger.nodes() if "1234" in f.statement][0]
    assert old.graft in excluded and live.graft not in excluded
    r = chat.send("What is my locker code?")
    mounted = [m["id"] for m in r.mounted]
    assert live.graft in mounted and stated.harvested not in mounted and old.graft not in mounted
    asked = [m["id"] for m in rt.ask("What is my locker code?", mode="grafts", max_new_tokens=2).mounted]
    assert live.graft in asked and stated.harvested not in asked and old.graft not in asked  # ask obeys it too
    why = chat.send("why do you remember: locker code")
    assert f"{chat.session}#1" in why.answer and f"{chat.session}#3" in why.answer and "correct memory" in why.answer
    assert chat.send("forget: zzzz").changed is False
    bad = chat.send("correct memory: no arrow here")
    assert bad.command == "malformed" and not bad.changed


def test_budget_smaller_than_any_graft_pages_everything_out(make_runtime):
    rt = make_runtime(max_new_tokens=2, device_budget=0)
    chat = rt.chat(clear_context=True)
    chat.send("The orchard of Velmora has 7781 apple trees.")
    r = chat.send("How many apple trees grow in the orchard of Velmora?")
    assert r.mounted and r.device_bytes == 0 and r.page_outs >= 1 and r.page_ins >= 1
    assert r.peak_device_bytes > 0
    again = chat.send("Velmora orchard apple trees?")
    assert again.page_ins >= 1 and again.device_bytes == 0


def test_live_window_without_clear_context(make_runtime):
    rt = make_runtime(max_new_tokens=2)
    live = rt.chat(window_turns=2)
    seats = [live.send(t).seats_resident for t in ("one", "two", "three", "four")]
    assert seats[1] > seats[0] and seats[2] > seats[1] and seats[3] <= seats[2] + 8  # window of 2 turns
    cleared = rt.chat(clear_context=True)
    assert cleared.send("five").seats_resident < seats[3]


def test_folding_retires_turns_and_descent_brings_them_back(make_runtime):
    rt = make_runtime(max_new_tokens=2)
    chat = rt.chat(clear_context=True, fold=True)
    chat.send("My bike lock combination is 8305.")
    for i in range(9):
        chat.send(f"Small talk number {i} about the weather.")
    digests = rt.grafts.grafts(kind="digest")
    assert digests, "ten turns with a window of 5 and 4 kept recent fold at least once"
    retired = chat.glue.policy.folder.retired()
    first = [g for g in rt.grafts.grafts(kind="evidence") if g.record.meta.get("turn") == 1][0]
    assert first.id in retired and first.id in chat.glue.exclusions()
    digest = next(g for g in digests if first.id in g.record.meta["sources"])
    from grm.grafts import Routed

    routed = [Routed(digest, 1.0, 1.0, (), 0.0)]
    back = chat.glue.descend(routed, "bike lock combination", chat.glue.exclusions())
    assert [r.graft.id for r in back] == [first.id]  # descent: the digest expands to its source turn
    r = chat.send("What is my bike lock combination?")
    assert r.mounted  # the fact graft, or the turn again through its digest


def test_cli_chat_script(tmp_path, capsys):
    script = tmp_path / "s.txt"
    script.write_text("hello there\n\n   \n" + "y" * 20_000 + "\nremember permanently: my cat is Pepper\nbye\n")
    common = ["--store", str(tmp_path / "st"), "--model", "tiny-random-llama", "--threads", "2"]
    assert main(["chat", "--script", str(script), "--json", "--clear-context", "--max-new-tokens", "2"] + common) == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert len(lines) == 4
    assert "error" in lines[1] and lines[2]["command"] == "remember permanently" and lines[3]["harvested"]
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"\xff\xfe hello")
    assert main(["chat", "--script", str(bad), "--json"] + common) == 2
    assert "not UTF-8" in capsys.readouterr().err
    assert main(["grafts", "show", "zzzz"] + common) == 2
    assert main(["grafts", "list", "--json"] + common) == 0
    listed = json.loads(capsys.readouterr().out)["grafts"]
    assert any(g["kind"] == "fact" for g in listed) and any(g["kind"] == "evidence" for g in listed)


def test_a_memory_question_is_answered_after_its_lead_and_facts_read_as_said_back(make_runtime, tmp_path):
    from grm.runtime.chat import TURN_PROMPT, turn_read

    rt = make_runtime(max_new_tokens=3)
    chat = rt.chat(clear_context=True)
    assert turn_read("What is my locker code?") == (TURN_PROMPT.format(text="What is my locker code?")
                                                    + " Your locker code is", "Your locker code is")
    assert turn_read("What is my locker code?", lead=False)[1] is None
    assert turn_read("My locker code is 1234.")[1] is None  # not a question
    first = chat.send("What is my locker code?")  # nothing in memory yet: read plain
    assert not first.answer.startswith("Your locker code is")
    chat.send("My locker code is 1234.")
    (fact,) = chat.glue.policy.facts()
    assert rt.grafts.get(fact.graft).text == ("User: Remember: My locker code is 1234.\nAssistant: Your locker code is "
                                              "1234.\n\nUser: What is my locker code?\nAssistant: Your locker code "
                                              "is 1234.\n\n")
    r = chat.send("What is my locker code?")
    assert r.mounted and r.answer.startswith("Your locker code is")
    off = make_runtime(max_new_tokens=3, lead="off", store=tmp_path / "off").chat(clear_context=True)
    off.send("My locker code is 1234.")
    assert not off.send("What is my locker code?").answer.startswith("Your locker code is")


@pytest.mark.parametrize("statement, subject, predicate, asked", [
    ("My bank is Ally", "My bank", "is", "What is my bank?"),
    ("Our office hours are 9 to 5.", "Our office hours", "are", "What are our office hours?"),
    ("Dr. Chen is my dentist", "Dr. Chen", "is", "What is Dr. Chen?"),
    ("Our book club meets on Thursday", "Our book club", "is", "What do you remember?"),  # said another way
    ("I buy my coffee beans from Kettle", "I", "buy my coffee beans from", "What do you remember?"),
])
def test_a_fact_graft_is_said_back_then_asked_and_answered(statement, subject, predicate, asked):
    from grm.english.person import spoken_back
    from grm.runtime.policy_glue import fact_text

    back = spoken_back(statement.rstrip("."))
    assert fact_text(statement, subject, predicate) == (f"User: Remember: {statement.rstrip('.')}.\nAssistant: "
                                                        f"{back}.\n\nUser: {asked}\nAssistant: {back}.\n\n")


@pytest.mark.parametrize("lead, read, want", [
    ("The printer is in", ["User: Remember: The printer is on floor 5.\nAssistant: The printer is on floor 5."],
     "The printer is on"),
    ("Your dentist's office is in", ["x", "Your dentist's  office is at the Mill Centre."], "Your dentist's office is at"),
    ("The printer is in", ["The printer was moved to floor 5."], "The printer is in"),  # not said so: kept
    ("The printer is", ["The printer is on floor 5."], "The printer is"),  # no preposition guessed: kept
    (None, ["The printer is on floor 5."], None),
])
def test_a_guessed_preposition_follows_the_text_read(lead, read, want):
    from grm.runtime.question import fit_lead
    from grm.runtime.chat import turn_read

    assert fit_lead(lead, read) == want
    if lead == "The printer is in":
        assert turn_read("Where is the printer?", read=read)[1] == want


def test_a_word_memory_never_held_is_asked_in_a_related_one_it_did(make_runtime):
    """"boss" is in no memory, "manager" is: the question routes and is grounded as "manager"
    (grm/runtime/answer.memory_query), so memory answers instead of abstaining; a word memory holds
    is kept, and one with no related word held stays as asked."""
    from grm.runtime.answer import memory_query

    rt = make_runtime(max_new_tokens=2)
    chat = rt.chat(clear_context=True)
    chat.send("My manager at work is Ottilie Brandt.")
    chat.send("The boiler was serviced in March.")
    assert memory_query(chat.ctx, "Who is my boss?") == "Who is my manager?"
    assert memory_query(chat.ctx, "When was the boiler serviced?") == "When was the boiler serviced?"
    assert memory_query(chat.ctx, "Who is my dentist?") == "Who is my dentist?"
    r = chat.send("Who is my boss?")
    assert not r.abstained and any("Ottilie" in chat.ctx.grafts.get(m["id"]).text for m in r.mounted)
    # asked as typed first; as "live" for "home" only where a word kept as typed is held too
    chat.send("We live at 12 Elm Street.")
    assert memory_query(chat.ctx, "Who insures my home?") == "Who insures my live?"
    assert chat.send("Who insures my home?").abstained  # not answered from where we live
    assert not chat.send("Where is my home?").abstained  # its one word asked as "live"


@pytest.mark.parametrize("question, read, want", [
    ("Which room of the Osrodal Hotel is reserved for the keynote speaker?",
     ["Room 6493 of the Osrodal Hotel is reserved for the keynote speaker."], "Room"),
    ("What flight number does Vexa Airlines operate to Lisbon?", ["Vexa Airlines operates flight number 1859."],
     "Flight number"),
    ("Which internal extension reaches the Plox helpdesk?", ["Dial extension 9940 for the Plox helpdesk."],
     "Internal extension"),
    ("What gate does my flight board at?", ["My flight boards at gate B12."], "Gate"),
    ("What seat number did I book?", ["I booked seat number 22A."], "Seat number"),
    # the text says no value after the label: the rules' lead stays
    ("Which bus line goes to the Plox hospital?", ["Route 7420 is the bus line to the Plox hospital."],
     "The bus line that goes to the Plox hospital is"),
    # a bare "number" is no label
    ("What number opens the Plox vault?", ["The vault's number 12 door opens with code 4827."],
     "The number that opens the Plox vault is"),
])
def test_a_label_asked_leads_with_the_label_where_the_text_read_says_it(question, read, want):
    """"Which room ...?" is led by "Room" where a text read says "Room 6493" (grm/runtime/question.fit_lead)."""
    from grm.runtime.question import fit_lead
    from grm.runtime.chat import turn_read
    from grm.runtime.lead import answer_lead

    assert fit_lead(answer_lead(question), read, question) == want
    assert turn_read(question, read=iter(read))[1] == want
    assert fit_lead(answer_lead(question), [], question) == answer_lead(question)  # nothing read: the rules' lead


def test_kept_exclusions_are_the_pass_over_memory_through_a_chat_a_retire_a_delete_and_a_restart(make_runtime, tmp_path):
    """The exclusions a routed question reads (kept in step with the store by LSN: the policy's
    fact index and the graft router's dense-key index) equal the pass over every fact and graft
    they replaced (bench/routing_scale.py `scan_exclusions`) after each kind of change."""
    import time

    from bench.routing_scale import scan_exclusions
    from grm.store.kinds import GRAFT

    rt = make_runtime(max_new_tokens=2, store=tmp_path / "kept")
    chat = rt.chat(clear_context=True, fold=True)

    def same() -> frozenset[str]:
        now = time.time()
        got = chat.glue.exclusions(now)
        assert got == scan_exclusions(chat.glue.policy, rt.grafts.grafts, now)
        return got

    said = chat.send("My locker code is 1234.")
    same()
    chat.send("correct memory: locker code 1234 => 5678")
    assert said.harvested in same()
    for i in range(8):
        chat.send(f"Small talk number {i} about the weather.")
        same()
    evidence = [g for g in rt.grafts.grafts(kind="evidence")]
    rt.grafts.retire([evidence[-1].id], into="test")
    same()
    rt.store.delete(rt.config.tenant, GRAFT, evidence[-2].id)
    got = same()
    rt.close()
    again = make_runtime(max_new_tokens=2, store=tmp_path / "kept")
    glue = again.policy_glue()
    now = time.time()
    assert glue.exclusions(now) == got == scan_exclusions(glue.policy, again.grafts.grafts, now)
