"""The chat ceiling: does memory answer as well as the same turns read in context?

A 51-turn script per split: 16 needles (turns 1-16: codes with letters and dashes, dates,
multi-word places, names, numbers), 19 turns of small talk, then one probe per needle (turns
36-51, each 35 turns after its needle), `--clear-context` (anything older than the turn comes back
only through memory). Needles were written for this benchmark and NOT filtered by what the model
recalls: the ceiling says what it can. Per probe, three answers (a probe counts if its answer
contains the needle's answer, case-insensitive):
- memory: the chat's own answer (routed grafts mounted from stored K/V);
- needle in context: sinks + "User: <needle>\\nAssistant: <its reply as generated>\\n\\n" + the probe
  read as text (the ceiling the issue names);
- mounted, re-read: the very grafts memory mounted for the probe, in the same order, read as text
  instead of mounted (separates the loss of mounting from the loss of routing).
Clean grafts (issue 13 item 2) are measured by running the same script with each harvest mode of
grm/runtime/chat.py (`live`: sliced from the live cache; `standalone`: the turn read alone after
the sinks; `user`: the user's words alone). Splits: `tune` (what choices were made on) and
`held-out` (other needles, other small talk, nothing chosen on it).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import run_cli, write_results  # noqa: E402

DATA = Path(__file__).resolve().parent / "data"
HARVESTS = ("live", "standalone", "user")
FILLER_TURNS = 19
# (needle, probe, answer that must appear)
NEEDLES = {
    "tune": [
        ("My locker code is HX-4471.", "What is my locker code?", "HX-4471"),
        ("My flight to Oslo leaves on 14 March 2027.", "When does my flight to Oslo leave?", "14 March"),
        ("My sister lives in Santa Cruz de Tenerife.", "Where does my sister live?", "Santa Cruz de Tenerife"),
        ("My new manager is called Ingrid Halvorsen.", "What is my new manager called?", "Ingrid Halvorsen"),
        ("The wifi password at the cabin is maple-tern-52.", "What is the wifi password at the cabin?",
         "maple-tern-52"),
        ("My dentist appointment is on 3 September.", "When is my dentist appointment?", "3 September"),
        ("I keep the spare key under the blue flower pot.", "Where do I keep the spare key?", "blue flower pot"),
        ("My daughter's piano teacher is Mr. Okonkwo.", "Who is my daughter's piano teacher?", "Okonkwo"),
        ("My gym membership number is 88-203-7.", "What is my gym membership number?", "88-203-7"),
        ("We are meeting the architects in Conference Room Saturn.", "Where are we meeting the architects?",
         "Saturn"),
        ("My passport expires on 22 November 2029.", "When does my passport expire?", "22 November 2029"),
        ("My cat is called Pepper.", "What is my cat called?", "Pepper"),
        ("The project codename is BLUE-FALCON-9.", "What is the project codename?", "BLUE-FALCON-9"),
        ("My grandmother was born in Port Elizabeth.", "Where was my grandmother born?", "Port Elizabeth"),
        ("My accountant is named Priya Raman.", "Who is my accountant?", "Priya Raman"),
        ("My bike lock combination is 8305.", "What is my bike lock combination?", "8305"),
    ],
    "held-out": [
        ("My library card number is LC-20931.", "What is my library card number?", "LC-20931"),
        ("The school play is on 9 June.", "When is the school play?", "9 June"),
        ("My brother moved to San Luis Obispo.", "Where did my brother move to?", "San Luis Obispo"),
        ("My landlord is called Tomasz Wierzbicki.", "What is my landlord called?", "Wierzbicki"),
        ("The alarm code for the office is 7-3-9-1.", "What is the alarm code for the office?", "7-3-9-1"),
        ("Our wedding anniversary is on 17 August.", "When is our wedding anniversary?", "17 August"),
        ("I left my umbrella at the Green Lantern cafe.", "Where did I leave my umbrella?", "Green Lantern"),
        ("My physiotherapist is Dr. Adebayo.", "Who is my physiotherapist?", "Adebayo"),
        ("My parcel tracking number is QX-558-ZT.", "What is my parcel tracking number?", "QX-558-ZT"),
        ("The team offsite is in Lake Placid.", "Where is the team offsite?", "Lake Placid"),
        ("My car insurance renews on 1 February 2028.", "When does my car insurance renew?", "1 February 2028"),
        ("My dog is called Biscuit.", "What is my dog called?", "Biscuit"),
        ("The server room door code is DELTA-6620.", "What is the server room door code?", "DELTA-6620"),
        ("My aunt runs a bakery in Fort William.", "Where does my aunt run a bakery?", "Fort William"),
        ("My son's football coach is Marta Lindqvist.", "Who is my son's football coach?", "Lindqvist"),
        ("My hotel room number is 1418.", "What is my hotel room number?", "1418"),
    ],
}


def small_talk() -> list[str]:
    """The turn-50 script's small talk (its lines 9-42), no needles in it."""
    lines = [ln.strip() for ln in (DATA / "chat_turn50.txt").read_text().splitlines() if ln.strip()]
    return lines[8:42]


def script(split: str) -> list[str]:
    talk = small_talk()
    filler = talk[:FILLER_TURNS] if split == "tune" else talk[-FILLER_TURNS:]
    needles = NEEDLES[split]
    return [n for n, _, _ in needles] + filler + [q for _, q, _ in needles]


def read_in_context(rt, texts_or_ids: list, probe: str, max_new: int) -> str:
    """sinks + each item read as text (a str is tokenized, a list is token ids) + the probe turn."""
    from grm.kv import cache_from_kv
    from grm.kv.forward import prefill
    from grm.runtime.chat import TURN_PROMPT, TURN_STOPS
    from grm.runtime.generate import greedy

    tok, model = rt.lm.tokenizer, rt.lm.model
    sinks = rt.exact.sinks()
    cache, seat = cache_from_kv(sinks), sinks.tokens
    for item in texts_or_ids:
        ids = tok.encode(item) if isinstance(item, str) else list(item)
        prefill(model, cache, ids, seat)
        seat += len(ids)
    q = tok.encode(TURN_PROMPT.format(text=probe))
    logits = prefill(model, cache, q, seat)
    text, _, _ = greedy(model, tok, cache, logits, seat + len(q), max_new, time.perf_counter(), TURN_STOPS)
    return text


def run_split(model: str | None, threads: int, store: Path, split: str, harvest: str, max_new: int) -> dict:
    from grm.runtime import Runtime
    from grm.runtime.chat import TURN_END, TURN_PROMPT

    lines = script(split)
    needles = NEEDLES[split]
    n = len(needles)
    t0 = time.perf_counter()
    with Runtime.open(store=store, model=model, threads=threads, max_new_tokens=max_new) as rt:
        chat = rt.chat(clear_context=True)
        chat.harvest = harvest  # before the first turn: every turn of the run is harvested this way
        replies = [chat.send(line) for line in lines]
        chat_s = time.perf_counter() - t0
        fact_turns = {}  # fact graft -> the turns that are its evidence
        for g in rt.grafts.grafts(kind="fact", include_retired=True):
            fact = chat.glue.policy.fact(g.record.meta.get("fact", ""))
            if fact is not None:
                fact_turns[g.id] = {int(e.id.rsplit("#", 1)[1]) for e in fact.evidence if "#" in e.id}
        probes = []
        for i, ((needle, question, want), r) in enumerate(zip(needles, replies[-n:])):
            needle_reply = replies[i]
            turn_text = TURN_PROMPT.format(text=needle) + " " + needle_reply.answer.strip() + TURN_END
            ceiling = read_in_context(rt, [turn_text], question, max_new)
            mounted_ids = [m["id"] for m in r.mounted]
            reread = read_in_context(rt, [list(rt.grafts.get(g).ids) for g in reversed(mounted_ids)], question,
                                     max_new)
            needle_mounted = needle_reply.harvested in mounted_ids or any(
                i + 1 in fact_turns.get(g, ()) for g in mounted_ids)
            hit = lambda a: want.lower() in a.lower()  # noqa: E731
            probes.append({"turn": r.turn, "needle_turn": i + 1, "question": question, "want": want,
                           "needle_reply": needle_reply.answer, "memory": r.answer, "memory_ok": hit(r.answer),
                           "ceiling": ceiling, "ceiling_ok": hit(ceiling), "reread": reread, "reread_ok": hit(reread),
                           "needle_mounted": needle_mounted, "mounted": len(mounted_ids),
                           "mounted_kinds": [m.get("kind") for m in r.mounted],
                           "tokens_from_memory": r.tokens_from_memory, "tokens_computed": r.tokens_computed})
    return {"split": split, "harvest": harvest, "turns": len(lines), "probes": probes,
            "memory": sum(p["memory_ok"] for p in probes), "ceiling": sum(p["ceiling_ok"] for p in probes),
            "reread": sum(p["reread_ok"] for p in probes), "needle_mounted": sum(p["needle_mounted"] for p in probes),
            "chat_s": chat_s, "seconds": time.perf_counter() - t0}


def _table(runs: list[dict], model: str) -> list[str]:
    out = [f"{model}, fp32, greedy, `--clear-context`, 51 turns per split (16 needles at turns 1-16, 19 small-talk "
           "turns, probes at 36-51: 35 turns after each needle). Needles not filtered by what the model recalls. "
           "See bench/chat_ceiling.py.", "",
           "| split | harvest | memory | needle turn in context (ceiling) | mounted grafts re-read as text | "
           "needle mounted | chat wall |", "|---|---|---|---|---|---|---|"]
    for r in runs:
        out.append(f"| {r['split']} | {r['harvest']} | {r['memory']}/16 | {r['ceiling']}/16 | {r['reread']}/16 | "
                   f"{r['needle_mounted']}/16 | {r['chat_s']:.0f} s |")
    for r in runs:
        out += ["", f"### {r['split']}, harvest {r['harvest']}", "",
                "| probe | want | memory | ceiling | re-read | mounted |", "|---|---|---|---|---|---|"]
        for p in r["probes"]:
            mark = lambda ok, a: f"{'Y' if ok else 'n'} {a[:48]!r}"  # noqa: E731
            out.append(f"| {p['question']} | {p['want']} | {mark(p['memory_ok'], p['memory'])} | "
                       f"{mark(p['ceiling_ok'], p['ceiling'])} | {mark(p['reread_ok'], p['reread'])} | "
                       f"{'Y' if p['needle_mounted'] else 'n'} {p['mounted']} |")
    return out


def main(args: argparse.Namespace) -> int:
    import torch

    threads = args.threads or 2
    torch.set_num_threads(threads)
    splits = ("tune",) if args.quick else tuple(NEEDLES)
    harvests = ("live",) if args.quick else HARVESTS
    runs = []
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as d:
        for split in splits:
            for harvest in harvests:
                runs.append(run_split(args.model, threads, Path(d) / f"{split}-{harvest}", split, harvest, 32))
                r = runs[-1]
                print(f"{split} {harvest}: memory {r['memory']}/16 ceiling {r['ceiling']}/16 reread {r['reread']}/16 "
                      f"mounted {r['needle_mounted']}/16 ({r['seconds']:.0f} s)", file=sys.stderr, flush=True)
    model = args.model or "smollm2-135m"
    res = {"model": model, "runs": runs, "seconds": time.perf_counter() - t0}
    cmd = f"python bench/chat_ceiling.py --threads {threads}" + (f" --model {args.model}" if args.model else "")
    write_results("chat_ceiling" + (f"-{args.model}" if args.model else ""), res, _table(runs, model), cmd,
                  quick=args.quick)
    print("\n".join(_table(runs, model)))
    return 0


if __name__ == "__main__":
    run_cli(main)
