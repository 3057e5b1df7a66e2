"""The chat ceiling: does memory answer as well as the same turns read in context?

A 51-turn script per split: 16 needles (turns 1-16: codes with letters and dashes, dates,
multi-word places, names, numbers), 19 turns of small talk, then one probe per needle (turns
36-51, each 35 turns after its needle), `--clear-context` (anything older than the turn comes back
only through memory). Needles were written for this benchmark and NOT filtered by what the model
recalls: the ceiling says what it can. Per probe, three answers (a probe counts if its answer
contains the needle's answer, case-insensitive):
- memory: the chat's own answer (routed grafts mounted from stored K/V);
- needle in context: sinks + "User: <needle>\\nAssistant: <its reply>\\n\\n" + the probe read as text
  (the ceiling the issue names); the reply is the model's own to the needle read alone in context
  (since session 16: before, the memory chat's reply, which could restate another memory);
- mounted, re-read: the very grafts memory mounted for the probe, in the same order, read as text
  instead of mounted (separates the loss of mounting from the loss of routing).
`--turns 200`: the same 16 needles at turns 1-16, 168 filler turns of real news sentences (the gensim
Lee corpus, which nobody at GRM wrote: articles 0-149 for `tune`, 150-299 for `held-out`, sentences of
8-30 words drawn with a fixed seed, none holding a needle's answer), probes at 185-200 (184 turns
after each needle), the chat's default harvest. Its ceilings: the needle turn alone in context (as
above), all 16 needle turns in order + the probe, and the whole transcript before the probes when it
fits the model's window, else its last turns that do (what a chat without memory keeps).
Clean grafts (issue 13 item 2) are measured by running the same script with each harvest mode of
grm/runtime/chat.py (`live`: sliced from the live cache; `standalone`: the turn read alone after
the sinks; `user`: the user's words alone). Splits: `tune` (what choices were made on) and
`held-out` (other needles, other small talk, nothing chosen on it).
"""

from __future__ import annotations

import argparse
import random
import re
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import news_corpus, run_cli, write_results  # noqa: E402
from grm.models.registry import DEFAULT_MODEL  # noqa: E402

DATA = Path(__file__).resolve().parent / "data"
HARVESTS = ("live", "standalone", "user")
FILLER_TURNS = 19
FILLER_SEED = 20261201
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


def news_filler(split: str, n: int) -> list[str]:
    """n news sentences (8-30 words) from this split's half of the Lee corpus, none holding a needle's
    answer, drawn with a fixed seed: filler nobody at GRM wrote."""
    articles = news_corpus()
    half = len(articles) // 2
    pool = articles[:half] if split == "tune" else articles[half:]
    banned = [w.lower() for _, _, w in NEEDLES[split]]
    sentences = [s for a in pool for s in re.split(r"(?<=[.!?])\s+(?=[A-Z\"])", a.strip())
                 if 8 <= len(s.split()) <= 30 and not any(b in s.lower() for b in banned)]
    return random.Random(f"{FILLER_SEED}:{split}").sample(sentences, n)


def script(split: str, turns: int = 51) -> list[str]:
    needles = NEEDLES[split]
    if turns == 51:
        talk = small_talk()
        filler = talk[:FILLER_TURNS] if split == "tune" else talk[-FILLER_TURNS:]
    else:
        filler = news_filler(split, turns - 2 * len(needles))
    return [n for n, _, _ in needles] + filler + [q for _, q, _ in needles]


def turn_text(rt, user: str, answer: str) -> str:
    """An exchange as the in-context ceiling reads it (through the model's chat template if any)."""
    from grm.runtime.chat import exchange_text

    return exchange_text(user, answer, rt.lm.tokenizer.template)


def window_answers(rt, turns: list[str], probes: list[str], max_new: int) -> tuple[list[str], dict]:
    """sinks + the transcript (or its last turns that fit the window with the longest probe) read
    once as text, then each probe read after it alone (the cache cropped back after each)."""
    from grm.kv import cache_from_kv
    from grm.kv.cache import crop
    from grm.kv.forward import prefill
    from grm.runtime.question import with_lead
    from grm.runtime.chat import TURN_STOPS, turn_read
    from grm.runtime.generate import greedy

    tok, model = rt.lm.tokenizer, rt.lm.model
    sinks = rt.exact.sinks()
    texts = list(reversed(turns))  # newest first
    read = [turn_read(p, rt.config.lead != "off", texts, tok.template) for p in probes]  # as the memory chat reads
    qs = [tok.encode(prompt) for prompt, _ in read]
    room = rt.ctx.dialect.max_positions - sinks.tokens - max(map(len, qs)) - max_new
    runs = [tok.encode(t) for t in turns]
    first = len(runs)
    while first > 0 and sum(map(len, runs[first - 1:])) <= room:
        first -= 1
    ids = [i for r in runs[first:] for i in r]
    cache, seat = cache_from_kv(sinks), sinks.tokens
    t0 = time.perf_counter()
    prefill(model, cache, ids, seat)
    seat += len(ids)
    read_s = time.perf_counter() - t0
    out = []
    for q, (_, lead) in zip(qs, read):
        logits = prefill(model, cache, q, seat)
        text, _, _ = greedy(model, tok, cache, logits, seat + len(q), max_new, time.perf_counter(), TURN_STOPS)
        crop(cache, seat)
        out.append(with_lead(lead, text))
    info = {"transcript_tokens": sum(map(len, runs)), "window_room": room, "first_turn_read": first + 1,
            "turns_read": len(runs) - first, "tokens_read": len(ids), "read_s": read_s}
    return out, info


def read_in_context(rt, texts_or_ids: list, probe: str, max_new: int) -> str:
    """sinks + each item read as text (a str is tokenized, a list is token ids) + the probe turn."""
    from grm.kv import cache_from_kv
    from grm.kv.forward import prefill
    from grm.runtime.question import with_lead
    from grm.runtime.chat import TURN_STOPS, turn_read
    from grm.runtime.generate import greedy

    tok, model = rt.lm.tokenizer, rt.lm.model
    sinks = rt.exact.sinks()
    cache, seat = cache_from_kv(sinks), sinks.tokens
    for item in texts_or_ids:
        ids = tok.encode(item) if isinstance(item, str) else list(item)
        prefill(model, cache, ids, seat)
        seat += len(ids)
    said = [item for item in reversed(texts_or_ids) if isinstance(item, str)]  # newest first
    prompt, lead = turn_read(probe, rt.config.lead != "off", said, tok.template)  # as the memory chat reads
    q = tok.encode(prompt)
    logits = prefill(model, cache, q, seat)
    text, _, _ = greedy(model, tok, cache, logits, seat + len(q), max_new, time.perf_counter(), TURN_STOPS)
    return with_lead(lead, text)


def run_split(model: str | None, threads: int, store: Path, split: str, harvest: str | None, max_new: int,
              turns: int = 51, rules: str | None = None, replace: str | None = None,
              reread: str | None = None) -> dict:
    from grm.runtime import Runtime

    lines = script(split, turns)
    needles = NEEDLES[split]
    n = len(needles)
    t0 = time.perf_counter()
    with Runtime.open(store=store, model=model, threads=threads, max_new_tokens=max_new,
                      **({"rules": rules} if rules else {}), **({"replace": replace == "on"} if replace else {}),
                      **({"reread": reread} if reread else {})) as rt:
        chat = rt.chat(clear_context=True)
        if harvest is not None:
            chat.harvest = harvest  # before the first turn: every turn of the run is harvested this way
        harvest = chat.harvest
        replies = []
        for i, line in enumerate(lines):
            replies.append(chat.send(line))
            if turns > 51 and (i + 1) % 20 == 0:
                print(f"  turn {i + 1}/{len(lines)} {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
        chat_s = time.perf_counter() - t0
        turn_s = [r.timings.get("total_s", 0.0) for r in replies]
        fact_turns = {}  # fact graft -> the turns that are its evidence
        for g in rt.grafts.grafts(kind="fact", include_retired=True):
            fact = chat.glue.policy.fact(g.record.meta.get("fact", ""))
            if fact is not None:
                fact_turns[g.id] = {int(e.id.rsplit("#", 1)[1]) for e in fact.evidence if "#" in e.id}
        # the ceiling's needle turn carries the model's own reply to it read in context, not the memory
        # chat's (a reply that restated another memory would otherwise stand in the ceiling's context)
        own = [read_in_context(rt, [], needle, max_new) for needle, _, _ in needles]
        needle_texts = [turn_text(rt, needle, own[i]) for i, (needle, _, _) in enumerate(needles)]
        long = {}
        if turns != 51:
            questions = [q for _, q, _ in needles]
            long["all_needles"] = [read_in_context(rt, needle_texts, q, max_new) for q in questions]
            before = [turn_text(rt, line, r.answer) for line, r in zip(lines[:-n], replies[:-n])]
            long["window"], window = window_answers(rt, before, questions, max_new)
        probes = []
        for i, ((needle, question, want), r) in enumerate(zip(needles, replies[-n:])):
            needle_reply = replies[i]
            ceiling = read_in_context(rt, [needle_texts[i]], question, max_new)
            mounted_ids = [m["id"] for m in r.mounted]
            reread = read_in_context(rt, [list(rt.grafts.get(g).ids) for g in reversed(mounted_ids)], question,
                                     max_new)
            needle_mounted = needle_reply.harvested in mounted_ids or any(
                i + 1 in fact_turns.get(g, ()) for g in mounted_ids)
            hit = lambda a: want.lower() in a.lower()  # noqa: E731
            probes.append({"turn": r.turn, "needle_turn": i + 1, "question": question, "want": want,
                           "needle_reply": needle_reply.answer, "needle_reply_in_context": own[i],
                           "memory": r.answer, "memory_ok": hit(r.answer),
                           "ceiling": ceiling, "ceiling_ok": hit(ceiling), "reread": reread, "reread_ok": hit(reread),
                           "needle_mounted": needle_mounted, "mounted": len(mounted_ids),
                           "mounted_kinds": [m.get("kind") for m in r.mounted],
                           "tokens_from_memory": r.tokens_from_memory, "tokens_computed": r.tokens_computed})
            for key, answers in long.items():
                probes[-1][key], probes[-1][f"{key}_ok"] = answers[i], hit(answers[i])
    res = {"split": split, "harvest": harvest, "turns": len(lines), "probes": probes,
           "memory": sum(p["memory_ok"] for p in probes), "ceiling": sum(p["ceiling_ok"] for p in probes),
           "reread": sum(p["reread_ok"] for p in probes), "needle_mounted": sum(p["needle_mounted"] for p in probes),
           "chat_s": chat_s, "turn_s": {"mean": sum(turn_s) / len(turn_s), "median": sorted(turn_s)[len(turn_s) // 2],
                                        "first_20_mean": sum(turn_s[:20]) / 20, "last_20_mean": sum(turn_s[-20:]) / 20},
           "seconds": time.perf_counter() - t0}
    if long:
        res.update({key: sum(p[f"{key}_ok"] for p in probes) for key in long}, window_read=window)
    return res


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
        out += _probe_rows(r["probes"], ("memory", "ceiling", "reread"), 48)
    return out


def _probe_rows(probes: list[dict], columns: tuple[str, ...], width: int) -> list[str]:
    """One row per probe: question, wanted answer, each column's answer (Y/n + its start), mounted."""
    mark = lambda p, c: f"{'Y' if p[c + '_ok'] else 'n'} {p[c][:width]!r}"  # noqa: E731
    return [f"| {p['question']} | {p['want']} | " + " | ".join(mark(p, c) for c in columns)
            + f" | {'Y' if p['needle_mounted'] else 'n'} {p['mounted']} |" for p in probes]


def _long_table(runs: list[dict], model: str) -> list[str]:
    turns = runs[0]["turns"]
    w = runs[0]["window_read"]
    out = [f"{model}, fp32, greedy, `--clear-context`, the chat's default harvest, {turns} turns per split: 16 needles "
           f"at turns 1-16, {turns - 32} filler turns of Lee news sentences (nobody at GRM wrote them), probes at "
           f"{turns - 15}-{turns} ({turns - 16} turns after each needle). Needles not filtered by what the model "
           "recalls. See bench/chat_ceiling.py.", "",
           "Ceilings, each read as text after the sinks, then the probe turn: the needle turn alone (User + the reply "
           "as generated); all 16 needle turns in order; " + (
               f"the transcript before the probes (turns 1-{turns - 16}, {w['transcript_tokens']} tokens) does not "
               f"fit the model's window with a probe ({w['window_room']} tokens of room), so `window` reads its last "
               f"turns that fit: turns {w['first_turn_read']}-{turns - 16} ({w['tokens_read']} tokens), what a chat "
               "without memory keeps." if w["first_turn_read"] > 1 else
               f"`window`: the whole transcript before the probes (turns 1-{turns - 16}, {w['tokens_read']} tokens)."),
           "",
           "| split | memory | needle turn in context | 16 needle turns in context | window | mounted re-read "
           "| needle mounted | chat wall | per turn: mean / median / first 20 / last 20 |",
           "|---|---|---|---|---|---|---|---|---|"]
    for r in runs:
        t = r["turn_s"]
        out.append(f"| {r['split']} | {r['memory']}/16 | {r['ceiling']}/16 | {r['all_needles']}/16 | {r['window']}/16 | "
                   f"{r['reread']}/16 | {r['needle_mounted']}/16 | {r['chat_s']:.0f} s | {t['mean']:.2f} / "
                   f"{t['median']:.2f} / {t['first_20_mean']:.2f} / {t['last_20_mean']:.2f} s |")
    for r in runs:
        out += ["", f"### {r['split']}", "", "| probe | want | memory | needle turn | 16 needle turns | window | mounted |",
                "|---|---|---|---|---|---|---|"]
        out += _probe_rows(r["probes"], ("memory", "ceiling", "all_needles", "window"), 40)
    return out


def main_long(args: argparse.Namespace, threads: int) -> int:
    splits = (args.split,) if args.split else tuple(NEEDLES)
    runs = []
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as d:
        for split in splits:
            runs.append(run_split(args.model, threads, Path(d) / split, split, None, 32, args.turns, args.rules,
                                  args.replace, args.reread))
            r = runs[-1]
            print(f"{split}: memory {r['memory']}/16 ceiling {r['ceiling']}/16 all-needles {r['all_needles']}/16 "
                  f"window {r['window']}/16 ({r['seconds']:.0f} s)", file=sys.stderr, flush=True)
    model = args.model or DEFAULT_MODEL
    name = f"chat_ceiling-{args.turns}" + (f"-{args.split}" if args.split else "") + (f"-{args.model}" if args.model else "")
    cmd = f"python bench/chat_ceiling.py --threads {threads} --turns {args.turns}" + (
        f" --split {args.split}" if args.split else "") + (f" --model {args.model}" if args.model else "")
    if args.rules:
        name, cmd = f"{name}-rules-{args.rules}", f"{cmd} --rules {args.rules}"
    if args.replace:
        name, cmd = f"{name}-replace-{args.replace}", f"{cmd} --replace {args.replace}"
    if args.reread:
        name, cmd = f"{name}-reread-{args.reread}", f"{cmd} --reread {args.reread}"
    table = _long_table(runs, model)
    write_results(name, {"model": model, "runs": runs, "seconds": time.perf_counter() - t0}, table, cmd)
    print("\n".join(table))
    return 0


def main(args: argparse.Namespace) -> int:
    import torch

    threads = args.threads or 2
    torch.set_num_threads(threads)
    if getattr(args, "turns", 51) != 51:  # `grm bench chat_ceiling` with no flag of its own: only the common ones
        return main_long(args, threads)
    splits = ("tune",) if args.quick else ((args.split,) if getattr(args, "split", None) else tuple(NEEDLES))
    harvests = ("live",) if args.quick else (getattr(args, "harvests", None) or HARVESTS)
    runs = []
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as d:
        for split in splits:
            for harvest in harvests:
                runs.append(run_split(args.model, threads, Path(d) / f"{split}-{harvest}", split, harvest, 32,
                                      rules=getattr(args, "rules", None), replace=getattr(args, "replace", None),
                                      reread=getattr(args, "reread", None)))
                r = runs[-1]
                print(f"{split} {harvest}: memory {r['memory']}/16 ceiling {r['ceiling']}/16 reread {r['reread']}/16 "
                      f"mounted {r['needle_mounted']}/16 ({r['seconds']:.0f} s)", file=sys.stderr, flush=True)
    model = args.model or DEFAULT_MODEL
    res = {"model": model, "runs": runs, "seconds": time.perf_counter() - t0}
    cmd = f"python bench/chat_ceiling.py --threads {threads}" + (f" --model {args.model}" if args.model else "")
    if getattr(args, "harvests", None):
        cmd += f" --harvests {','.join(harvests)}"
    if getattr(args, "split", None):
        cmd += f" --split {args.split}"
    name = "chat_ceiling" + (f"-{args.model}" if args.model else "") + (f"-{args.split}" if getattr(args, "split", None) else "")
    if getattr(args, "harvests", None):  # a subset: kept apart from the full comparison of harvest modes
        name += "-" + "-".join(harvests)
    if getattr(args, "rules", None):
        name, cmd = f"{name}-rules-{args.rules}", f"{cmd} --rules {args.rules}"
    if getattr(args, "replace", None):
        name, cmd = f"{name}-replace-{args.replace}", f"{cmd} --replace {args.replace}"
    if getattr(args, "reread", None):
        name, cmd = f"{name}-reread-{args.reread}", f"{cmd} --reread {args.reread}"
    write_results(name, res, _table(runs, model), cmd,
                  quick=args.quick)
    print("\n".join(_table(runs, model)))
    return 0


def _flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--turns", type=int, default=51, help="51 (small talk) or more (news filler), e.g. 200")
    p.add_argument("--harvests", type=lambda t: tuple(t.split(",")), default=None,
                   help=f"51 turns: only these harvest modes, comma-separated (of {', '.join(HARVESTS)}; default all)")
    p.add_argument("--split", choices=tuple(NEEDLES), default=None, help="one split only (default both)")
    p.add_argument("--rules", choices=("auto", "on", "off"), default=None,
                   help="the English layer, one switch (RuntimeConfig.rules; default: the runtime's)")
    p.add_argument("--replace", choices=("on", "off"), default=None,
                   help="a routed turn with a later turn linked in meaning is left out, that turn mounted instead "
                        "(RuntimeConfig.replace; default: the runtime's)")
    p.add_argument("--reread", choices=("auto", "never", "always"), default=None,
                   help="read routed grafts as text instead of mounting them (RuntimeConfig.reread; default: the "
                        "runtime's)")


if __name__ == "__main__":
    run_cli(main, _flags)
