"""Plain questions: how much does the question's form cost, and which packaged model asks better?

Each invented fact (recall.py's kind: an invented name, a 4-digit number) is inserted in the middle
of a real news article of 220-360 words, and the article is read in context (sinks + article), so
only the question's form and the model vary. Every fact is asked two ways:
- repeat: the fact's own words ("What is the access code for the X vault?");
- paraphrase: other words ("What number opens the X vault?"; recall.py's questions for the tune
  templates),
each in three forms: plain ("Question: q\\nAnswer:"), primed (the benchmark's hand-written lead:
"...\\nAnswer: The number that opens the X vault is") and derived (grm/runtime/lead.py's rules,
fitted to the article read as the pipeline fits them to what it mounts, grm/runtime/question.fit_lead:
since session 12 a label asked is led by the label, "Room", where the text says it before a value;
a question no rule covers is asked plain, counted under `derived`, and its coverage reported).
Splits: `tune`: recall.py's 5 templates, which the lead rules were written against; `held-out`:
5 other templates written afterwards, nothing changed after seeing them. Scoring: the number
appears in the answer (`NEW_TOKENS` new tokens after the prompt, greedy: 32 since session 9, enough for a
plain answer to restate the question before its number; 12 before, which cut plain answers short).
"""

from __future__ import annotations

import argparse
import random
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import news_corpus, run_cli, sealed, write_results  # noqa: E402
from recall import SYLLABLES  # noqa: E402

SEED = 20261201
PER_TEMPLATE = 4
MODELS = ("smollm2-135m", "gemma3-270m")
NEW_TOKENS = 32  # every form gets the same budget after its prompt (a plain answer restates the question first)
FORMS = ("plain", "primed", "derived", "model")  # model: the rules' lead, else the model's (grm/runtime/model_lead.py)
# statement, (repeat question, its lead), (paraphrase question, its lead)
TEMPLATES = {
    "tune": [
        ("The access code for the {n} vault is {x}.",
         ("What is the access code for the {n} vault?", "The access code for the {n} vault is"),
         ("What number opens the {n} vault?", "The number that opens the {n} vault is")),
        ("Last year the port of {n} recorded {x} ship arrivals.",
         ("How many ship arrivals did the port of {n} record last year?", "Last year the port of {n} recorded"),
         ("How many ships arrived at the port of {n} last year?",
          "The number of ships that arrived at the port of {n} last year was")),
        ("The {n} Bridge is {x} metres long.",
         ("How long is the {n} Bridge?", "The {n} Bridge is"),
         ("How long, in metres, is the {n} Bridge?", "The length of the {n} Bridge, in metres, is")),
        ("The {n} festival sold {x} tickets this season.",
         ("How many tickets did the {n} festival sell this season?",
          "The number of tickets the {n} festival sold this season was"),
         ("How many people bought tickets for the {n} festival this season?",
          "The number of people who bought tickets for the {n} festival this season was")),
        ("Engineers say the {n} dam holds {x} million litres.",
         ("How many million litres does the {n} dam hold?", "The {n} dam holds, in millions of litres,"),
         ("What volume of water, in million litres, can the {n} dam store?",
          "The {n} dam can store, in million litres,")),
    ],
    "held-out": [
        ("The {n} library owns {x} rare maps.",
         ("How many rare maps does the {n} library own?", "The {n} library owns"),
         ("How large is the {n} library's collection of rare maps?",
          "The {n} library's collection of rare maps numbers")),
        ("The {n} observatory was founded in {x}.",
         ("When was the {n} observatory founded?", "The {n} observatory was founded in"),
         ("In what year did the {n} observatory open?", "The {n} observatory opened in")),
        ("The {n} ferry carries {x} passengers a week.",
         ("How many passengers does the {n} ferry carry a week?", "The {n} ferry carries"),
         ("How many people travel on the {n} ferry each week?",
          "The number of people who travel on the {n} ferry each week is")),
        ("The {n} clinic's phone extension is {x}.",
         ("What is the {n} clinic's phone extension?", "The {n} clinic's phone extension is"),
         ("Which extension should I dial to reach the {n} clinic?", "The extension to dial for the {n} clinic is")),
        ("The {n} marathon had {x} finishers this year.",
         ("How many finishers did the {n} marathon have this year?", "The {n} marathon had"),
         ("How many runners completed the {n} marathon this year?",
          "The number of runners who completed the {n} marathon this year was")),
    ],
    # FRESH: written on 2026-12-01 04:27 UTC, after grm/runtime/model_lead.py's examples and before any
    # run on it; the model lead's examples were written after seeing the held-out questions' forms
    # ("Which ...", "In what year ...", "How large ..."), so only this split is blind to them.
    "fresh": [
        ("The {n} museum has {x} paintings on display.",
         ("How many paintings does the {n} museum have on display?", "The {n} museum has"),
         ("What is the number of paintings shown at the {n} museum?",
          "The number of paintings shown at the {n} museum is")),
        ("The {n} tunnel is {x} metres deep.",
         ("How deep is the {n} tunnel?", "The {n} tunnel is"),
         ("To what depth, in metres, does the {n} tunnel reach?", "The {n} tunnel reaches a depth, in metres, of")),
        ("The {n} express leaves from platform {x}.",
         ("From which platform does the {n} express leave?", "The {n} express leaves from platform"),
         ("Where should I board the {n} express?", "You should board the {n} express at platform")),
        ("The {n} orchard harvested {x} crates of apples.",
         ("How many crates of apples did the {n} orchard harvest?", "The {n} orchard harvested"),
         ("What was the size of the apple harvest at the {n} orchard, in crates?",
          "The apple harvest at the {n} orchard, in crates, was")),
        ("The {n} stadium seats {x} spectators.",
         ("How many spectators does the {n} stadium seat?", "The {n} stadium seats"),
         ("What is the seating capacity of the {n} stadium?", "The seating capacity of the {n} stadium is")),
    ],
    # BLIND: written on 2026-12-01 06:05 UTC and committed (acd2c6b) before the lead rules were next
    # changed (7a47f20), but by the same person minutes before writing those rules, who had these
    # forms in mind ("Which N should I ...", "What year did ...", "By how many ..."; one of them was
    # also tried while debugging): it shows the rules work on the sentences, not that they generalize.
    "blind": [
        ("The {n} aquarium keeps {x} fish in its main tank.",
         ("How many fish does the {n} aquarium keep in its main tank?", "The {n} aquarium keeps"),
         ("How many fish live in the main tank of the {n} aquarium?",
          "The number of fish that live in the main tank of the {n} aquarium is")),
        ("The {n} hostel's front door code is {x}.",
         ("What is the {n} hostel's front door code?", "The {n} hostel's front door code is"),
         ("Which code opens the front door of the {n} hostel?", "The code that opens the front door of the {n} hostel is")),
        ("The {n} glacier has retreated {x} metres since 1950.",
         ("How far has the {n} glacier retreated since 1950?", "The {n} glacier has retreated"),
         ("By how many metres has the {n} glacier shrunk since 1950?", "Since 1950 the {n} glacier has shrunk by")),
        ("The {n} choir was formed in {x}.",
         ("When was the {n} choir formed?", "The {n} choir was formed in"),
         ("What year did the {n} choir start singing together?", "The {n} choir started singing together in")),
        ("Route {x} is the bus line to the {n} hospital.",
         ("Which bus line goes to the {n} hospital?", "The bus line to the {n} hospital is route"),
         ("What bus should I take to get to the {n} hospital?", "To get to the {n} hospital you should take bus")),
    ],
    # SEALED: written 2026-12-01 06:16 UTC by a helper who had not seen the lead rules (grm/runtime/lead.py)
    # and was not shown to their author before the first run on it.
    "sealed": [
        ("The {n} lighthouse was first lit in {x}.",
         ("When was the {n} lighthouse first lit?", "The {n} lighthouse was first lit in"),
         ("Since what year has the {n} lighthouse been guiding ships?", "The {n} lighthouse has been guiding ships since")),
        ("The {n} bakery charges {x} yen for a sourdough loaf.",
         ("How much does the {n} bakery charge for a sourdough loaf?", "For a sourdough loaf the {n} bakery charges"),
         ("What's the price of bread at the {n} bakery?", "The price of bread at the {n} bakery is")),
        ("The {n} pottery studio is at {x} Elm Avenue.",
         ("What number on Elm Avenue is the {n} pottery studio at?", "The {n} pottery studio is at"),
         ("Where can I find the {n} pottery studio?", "You can find the {n} pottery studio at")),
        ("Last month the {n} recycling plant processed {x} tonnes of plastic.",
         ("How many tonnes of plastic did the {n} recycling plant process last month?",
          "Last month the {n} recycling plant processed"),
         ("What weight of waste did the {n} recycling plant handle in the previous month?",
          "In the previous month the {n} recycling plant handled")),
        ("The {n} community radio station broadcasts on {x} kHz.",
         ("On what frequency does the {n} community radio station broadcast?",
          "The {n} community radio station broadcasts on"),
         ("Which dial setting should I pick to listen to {n} community radio?",
          "To listen to {n} community radio you should set the dial to")),
    ],
}
TEMPLATES.update(sealed("questions"))  # bench/data/sealed/questions-NAME.json: blind splits kept out of this file


def facts(split: str, rng: random.Random) -> list[dict]:
    out, names = [], set()
    for stmt, repeat, para in TEMPLATES[split]:
        for _ in range(PER_TEMPLATE):
            name = ""
            while not name or name in names:
                name = "".join(rng.choice(SYLLABLES) for _ in range(3)).capitalize()
            names.add(name)
            x = str(rng.randint(1000, 9999))
            out.append({"statement": stmt.format(n=name, x=x), "answer": x,
                        "repeat": [s.format(n=name) for s in repeat], "paraphrase": [s.format(n=name) for s in para]})
    return out


def contexts(docs: list[str], fact_list: list[dict], skip: int) -> list[str]:
    """Each fact inserted after the middle sentence of its own article of 220-360 words (about
    300-500 tokens; words, so both models read the same articles), skipping the first `skip`
    (past the last article, round to the first)."""
    pool = [d for d in docs if 220 <= len(d.split()) <= 360]
    if len(pool) < len(fact_list):
        raise RuntimeError("not enough articles of the wanted length")
    skip %= len(pool)  # the later splits wrap round to articles an earlier split read (other facts)
    arts = (pool[skip:] + pool)[:len(fact_list)]
    out = []
    for doc, f in zip(arts, fact_list):
        ends = [m.end() for m in re.finditer(r"\. (?=[A-Z])", doc)]
        at = ends[len(ends) // 2] if ends else len(doc)
        out.append(doc[:at] + f["statement"] + " " + doc[at:])
    return out


def read_article(rt, text: str):
    """(sinks + `text` read, the seat after it): reused for every question about the article."""
    from grm.kv import cache_from_kv, kv_from_cache
    from grm.kv.forward import prefill

    sinks, ids = rt.exact.sinks(), rt.lm.tokenizer.encode(text)
    cache = cache_from_kv(sinks)
    prefill(rt.lm.model, cache, ids, sinks.tokens)
    return kv_from_cache(cache, 0), sinks.tokens + len(ids)


def ask_read(rt, read, seat: int, question: str, lead: str | None) -> str:
    """The answer to `question` (begun with `lead`, if any) after the article `read`."""
    from grm.kv import cache_from_kv
    from grm.kv.forward import prefill
    from grm.runtime.question import led
    from grm.runtime.generate import greedy

    tok, lm = rt.lm.tokenizer, rt.lm.model
    q_ids = tok.encode(led(question, lead, tok.template))
    c = cache_from_kv(read)
    logits = prefill(lm, c, q_ids, seat)
    return greedy(lm, tok, c, logits, seat + len(q_ids), NEW_TOKENS, time.perf_counter())[0]


def ask_model(model: str, threads: int, store: Path, split_facts: dict[str, list[dict]], docs: list[str],
              only: tuple[str, ...] | None = None) -> dict:
    """Every split's facts asked in every form; `only`: just these splits (each split still reads
    the articles it reads in a full run)."""
    from grm.runtime import Runtime
    from grm.runtime.question import fit_lead
    from grm.runtime.lead import answer_lead
    from grm.runtime.model_lead import ModelLead

    out = {}
    with Runtime.open(store=store, model=model, threads=threads) as rt:
        writer = ModelLead(rt.lm)
        skip = 0
        for split, fs in split_facts.items():
            rows = []
            texts = contexts(docs, fs, skip)
            skip += len(fs)
            if only and split not in only:
                continue
            for f, text in zip(fs, texts):
                read, seat = read_article(rt, text)  # sinks + article, reused for every form
                row = {"answer": f["answer"]}
                for kind in ("repeat", "paraphrase"):
                    q, lead = f[kind]
                    rule = answer_lead(q)  # fitted to the article read, as the pipeline fits it to what it mounted
                    derived = fit_lead(rule, [text], q)
                    written = fit_lead(rule or writer.lead(q), [text], q)
                    row[f"{kind}_derived_lead"], row[f"{kind}_model_lead"] = derived, written
                    for form in FORMS:
                        use = {"plain": None, "primed": lead, "derived": derived, "model": written}[form]
                        ans = ask_read(rt, read, seat, q, use)
                        row[f"{kind}_{form}"] = ans
                        row[f"{kind}_{form}_ok"] = f["answer"] in ans
                rows.append(row)
            out[split] = rows
            print(f"{model} {split}: " + ", ".join(
                f"{k}/{form} {sum(r[f'{k}_{form}_ok'] for r in rows)}" for k in ("repeat", "paraphrase")
                for form in FORMS), file=sys.stderr, flush=True)
    return out


TUNED = ("What was tuned on what: the lead rules (grm/runtime/lead.py) were written against TUNE; the model "
         "lead's examples (grm/runtime/model_lead.py) after seeing HELD-OUT's paraphrase forms (not their words); "
         "FRESH was written after both and first run blind to them. Session 7 extended the rules after seeing "
         "HELD-OUT's and FRESH's failures, and with BLIND's forms in mind (its author wrote them): none of those is "
         "blind. SEALED was written by a helper who never saw the rules; its first run "
         "(questions-smollm2-135m-sealed-first-run.md, rules of 7a47f20) is the blind figure; three general fixes "
         "were then made after seeing its leads (a verb the list lacks ends the clause, more irregular "
         "participles, 'How much does S <verb>'), so later SEALED runs are tuned on it. SEALED-2 .. SEALED-5 "
         "(bench/data/sealed/questions-*.json) were each written by a helper who never saw the rules and first run "
         "once (questions-smollm2-135m-sealedN-first-run.md: SEALED-2 and -3 with 12 new tokens, SEALED-4 and -5 "
         "with 32); the rules were widened after reading SEALED-3's and SEALED-4's rows (sessions 8 and 9), so "
         "only each first run is blind. SEALED-5 was first run on the final code of session 9. SEALED-6 was first "
         "run on the rules of a0b2742 (session 11); session 12 read its rows and added the label forms (a label "
         "noun's value said after it; the label alone as the lead where the text says it before a value), so "
         "SEALED-6 is tuned from then. SEALED-7 was written blind at the start of session 12 and first run on the "
         "rules of 881df60, the final lead rules of that session (questions-smollm2-135m-sealed7-first-run.md).")


def _table(res: dict) -> list[str]:
    out = [f"Fact inserted in a 220-360 word news article read in context; {PER_TEMPLATE} facts per template; "
           f"a probe counts if the 4-digit answer appears in {NEW_TOKENS} new tokens. See bench/questions.py.", "",
           TUNED, "",
           "| model | split | question | plain | primed | derived lead (rules) | rules, else model lead | "
           "rules covered | model wrote a lead (of the rest) |",
           "|---|---|---|---|---|---|---|---|---|"]
    for model, per in res["models"].items():
        for split, rows in per.items():
            for kind in ("repeat", "paraphrase"):
                cells = [f"{sum(r[f'{kind}_{f}_ok'] for r in rows)}/{len(rows)}" for f in FORMS]
                cov = sum(r[f"{kind}_derived_lead"] is not None for r in rows)
                wrote = sum(r[f"{kind}_derived_lead"] is None and r[f"{kind}_model_lead"] is not None for r in rows)
                out.append(f"| {model} | {split} | {kind} | " + " | ".join(cells)
                           + f" | {cov}/{len(rows)} | {wrote}/{len(rows) - cov} |")
    return out


def ask_fitted(model: str, threads: int, store: Path, split_facts: dict[str, list[dict]], docs: list[str],
               only: tuple[str, ...] | None = None) -> list[dict]:
    """`--fitted`: every probe whose lead the text read changes (grm/runtime/question.fit_lead: a
    label said before a value, a preposition), asked with the rules' lead as it was and as fitted."""
    from grm.runtime import Runtime
    from grm.runtime.question import fit_lead
    from grm.runtime.lead import answer_lead

    rows, skip = [], 0
    with Runtime.open(store=store, model=model, threads=threads) as rt:
        for split, fs in split_facts.items():
            texts = contexts(docs, fs, skip)
            skip += len(fs)
            if only and split not in only:
                continue
            for f, text in zip(fs, texts):
                todo = [(k, f[k][0]) for k in ("repeat", "paraphrase")
                        if fit_lead(answer_lead(f[k][0]), [text], f[k][0]) != answer_lead(f[k][0])]
                if not todo:
                    continue
                read, seat = read_article(rt, text)
                for kind, q in todo:
                    row = {"split": split, "kind": kind, "question": q, "answer": f["answer"]}
                    for form, use in (("rules", answer_lead(q)), ("fitted", fit_lead(answer_lead(q), [text], q))):
                        ans = ask_read(rt, read, seat, q, use)
                        row.update({f"{form}_lead": use, form: ans, f"{form}_ok": f["answer"] in ans})
                    rows.append(row)
    return rows


def _fitted_table(rows: list[dict]) -> list[str]:
    out = ["Probes whose lead the article read changes (grm/runtime/question.fit_lead), in context; the label forms "
           "were written after reading SEALED-6's rows (so SEALED-6 is tuned), SEALED-7 is excluded from this run "
           "unless named.", "", "| split | probes | rules' lead | fitted lead |", "|---|---|---|---|"]
    for split in dict.fromkeys(r["split"] for r in rows):
        rs = [r for r in rows if r["split"] == split]
        out.append(f"| {split} | {len(rs)} | {sum(r['rules_ok'] for r in rs)} | {sum(r['fitted_ok'] for r in rs)} |")
    out.append(f"| all | {len(rows)} | {sum(r['rules_ok'] for r in rows)} | {sum(r['fitted_ok'] for r in rows)} |")
    out += ["", "| split | question | rules' lead | fitted lead |", "|---|---|---|---|"]
    out += [f"| {r['split']} | {r['question']} | {'Y' if r['rules_ok'] else 'n'} {r['rules_lead']!r} -> {r['rules'][:30]!r} "
            f"| {'Y' if r['fitted_ok'] else 'n'} {r['fitted_lead']!r} -> {r['fitted'][:30]!r} |" for r in rows]
    return out


def main(args: argparse.Namespace) -> int:
    import tempfile

    import torch

    threads = args.threads or 2
    torch.set_num_threads(threads)
    rng = random.Random(SEED)
    split_facts = {s: facts(s, rng) for s in TEMPLATES}
    if args.quick:
        split_facts = {s: fs[::4] for s, fs in split_facts.items()}
    docs = news_corpus()
    models = (args.model,) if args.model else MODELS
    t0 = time.perf_counter()
    if args.fitted:
        only = args.splits or tuple(s for s in TEMPLATES if s != "sealed7")
        with tempfile.TemporaryDirectory() as d:
            rows = ask_fitted(args.model or MODELS[0], threads, Path(d), split_facts, docs, only)
        res = {"rows": rows, "seconds": time.perf_counter() - t0}
        write_results("questions-fitted", res, _fitted_table(rows),
                      f"python bench/questions.py --threads {threads} --fitted", quick=args.quick)
        print("\n".join(_fitted_table(rows)))
        return 0
    res = {"models": {}}
    with tempfile.TemporaryDirectory() as d:
        for m in models:
            res["models"][m] = ask_model(m, threads, Path(d) / m, split_facts, docs, getattr(args, "splits", None))
    res["seconds"] = time.perf_counter() - t0
    name, flag = ("questions", "") if not args.model else (f"questions-{args.model}", f" --model {args.model}")
    only = getattr(args, "splits", None)
    if only:
        name, flag = f"{name}-{'-'.join(only)}", f"{flag} --splits {','.join(only)}"
    write_results(name, res, _table(res), f"python bench/questions.py --threads {threads}{flag}", quick=args.quick)
    print("\n".join(_table(res)))
    return 0


def _flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--splits", type=lambda t: tuple(t.split(",")), default=None,
                   help=f"only these splits, comma-separated (of {', '.join(TEMPLATES)}); each reads the articles "
                        "it reads in a full run")
    p.add_argument("--fitted", action="store_true",
                   help="only the probes whose lead the article read changes (a label, a preposition), asked with "
                        "the rules' lead and the fitted one (questions-fitted.md); every split but sealed7 unless "
                        "--splits names them")


if __name__ == "__main__":
    run_cli(main, _flags)
