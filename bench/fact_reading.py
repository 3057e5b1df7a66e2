"""How a fact is read, and how a When question's answer is begun: choices of sessions 8 and 9.

Both read text in context (memory off, sinks + the text + the question turn), SmolLM2 greedy, so
only the reading varies:
1. fact renderings: each update of bench/fidelity.py's seen splits (tune .. FRESH-5) is put through
   the policy plane (rule extractor, aligned reader); where the live fact holds the new value, its
   statement is read as a bare sentence ("My bank is Ally.", the old fact graft), as the user's
   turn, as the user saying it and the assistant saying it back (the fact graft of session 8), or
   as that followed by the user asking about it and the assistant answering with it ("What is my
   bank?" / "Your bank is Ally.": the fact graft since session 9, grm/runtime/policy_glue.py
   `fact_text`), then the question as a chat turn with its lead. Counted: the new value in the
   answer and not the old one.
2. the When lead's tail: every When/Where question of chat_ceiling's needles (needle turn in
   context) and of those updates (statement + update turns in context), asked after the rules'
   lead with "on"/"in" kept, with it dropped, fitted to the text read (its own preposition after
   the lead's words, `fit_lead`: shipped since session 9), and with no lead. Counted: the wanted
   value in the answer.
All of these splits were seen before the choices were made: this records the measurement behind
them; it is no blind figure (fidelity-fresh5-first-run.md is).
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import run_cli, write_results  # noqa: E402

SPLITS = ("tune", "held_out", "fresh", "fresh2", "fresh3", "fresh4", "fresh5")


def final_fact(statement: str, update: str, i: int):
    from grm.policy import PolicyConfig, PolicyMemory, RuleExtractor
    from grm.store import MemoryFS, Store, StoreConfig

    st = Store.open(StoreConfig(root=Path(f"/mem/fact{i}"), fs=MemoryFS()))
    mem = PolicyMemory(st, PolicyConfig(), extractor=RuleExtractor())
    mem.observe(statement, evidence_id="b#1", now=1.0)
    mem.observe(update, evidence_id="b#2", now=2.0)
    facts = mem.facts(3.0)
    st.close()
    return facts[-1] if facts else None


def renderings(rt) -> dict:
    import fidelity
    from grm.runtime.question import with_lead
    from grm.runtime.chat import TURN_STOPS, turn_read
    from grm.runtime.lead import spoken_back
    from grm.runtime.policy_glue import fact_text

    forms = {"bare statement": lambda f, st: f"{st}.\n\n", "user's turn": lambda f, st: f"User: {st}.\n\n",
             "said back (session 8)": lambda f, st: f"User: Remember: {st}.\nAssistant: {spoken_back(st)}.\n\n",
             "said back, asked and answered (shipped)": lambda f, st: fact_text(st, f.subject, f.predicate)}
    rows, i = [], 0
    for split in SPLITS:
        for s, u, q, old, new in fidelity.UPDATES[split]:
            i += 1
            fact = final_fact(s, u, i)
            if fact is None or new.casefold() not in fact.statement.casefold():
                continue
            st = fact.statement.rstrip(" .")
            asked, lead = turn_read(q)
            row = {"split": split, "statement": st, "question": q}
            for name, form in forms.items():
                a = with_lead(lead, rt.ask(form(fact, st) + asked, memory=False, chat=True,
                                           stop=TURN_STOPS).answer.strip())
                row[name] = a
                row[f"{name} ok"] = new.casefold() in a.casefold() and old.casefold() not in a.casefold()
            rows.append(row)
    return {"rows": rows, "n": len(rows), "forms": list(forms),
            "totals": {name: sum(r[f"{name} ok"] for r in rows) for name in forms}}


def when_tail(rt) -> dict:
    import chat_ceiling
    import fidelity
    from grm.runtime.question import fit_lead
    from grm.runtime.chat import TURN_PROMPT, TURN_STOPS
    from grm.runtime.lead import answer_lead

    items = [(f"User: {n}\n\n", p, w) for sp in chat_ceiling.NEEDLES for n, p, w in chat_ceiling.NEEDLES[sp]]
    items += [(f"User: {s}\n\nUser: {u}\n\n", q, new) for sp in SPLITS for s, u, q, _, new in fidelity.UPDATES[sp]]
    rows = []
    for ctx, q, want in items:
        if q.split()[0] not in ("When", "Where"):
            continue
        shipped = answer_lead(q)
        if q.startswith("When"):  # shipped without "on"; before session 8 it ended "on"
            tailed, bare = (f"{shipped} on" if shipped else None), shipped
        else:  # shipped with "in"
            tailed, bare = shipped, (re.sub(r"\s+in$", "", shipped) if shipped else None)
        fitted = fit_lead(shipped, [ctx])  # shipped since session 9: the preposition the text read says
        row = {"question": q, "lead (shipped)": fitted}
        for name, use in (("with on/in", tailed), ("without", bare), ("fitted", fitted), ("no lead", None)):
            a = rt.ask(ctx + TURN_PROMPT.format(text=q) + (f" {use}" if use else ""), memory=False, chat=True,
                       stop=TURN_STOPS).answer
            row[name] = want.casefold() in a.casefold()
        rows.append(row)
    names = ("with on/in", "without", "fitted", "no lead")
    return {"rows": rows, "n": len(rows),
            "totals": {k: sum(r[k] for r in rows) for k in names},
            "when": {k: sum(r[k] for r in rows if r["question"].startswith("When")) for k in names},
            "where": {k: sum(r[k] for r in rows if r["question"].startswith("Where")) for k in names},
            "n_when": sum(r["question"].startswith("When") for r in rows)}


def _table(res: dict) -> list[str]:
    r, t = res["renderings"], res["when_tail"]
    out = [__doc__.split("\n\n", 1)[1].strip(), "",
           f"## Fact renderings ({r['n']} updated facts holding the new value)", "",
           "| reading | new value answered |", "|---|---|"]
    out += [f"| {name} | {r['totals'][name]}/{r['n']} |" for name in r["forms"]]
    out += ["", f"## When/Where lead ({t['n']} questions, {t['n_when']} When)", "",
            "| lead | all | When | Where |", "|---|---|---|---|"]
    for k in ("with on/in", "without", "fitted", "no lead"):
        out.append(f"| {k} | {t['totals'][k]}/{t['n']} | {t['when'][k]}/{t['n_when']} | "
                   f"{t['where'][k]}/{t['n'] - t['n_when']} |")
    out += ["", f"Shipped: the fact said back, asked and answered; When questions without 'on' "
            f"({t['when']['without']} vs {t['when']['with on/in']}/{t['n_when']} with it), Where questions with "
            f"'in' unless the text read says another preposition after the lead's words (fitted "
            f"{t['where']['fitted']}, 'in' always {t['where']['with on/in']}, none {t['where']['without']} of "
            f"{t['n'] - t['n_when']}; grm/runtime/answer.py `fit_lead`)."]
    return out


def main(args: argparse.Namespace) -> int:
    import torch

    from grm.runtime import Runtime

    threads = args.threads or 2
    torch.set_num_threads(threads)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as d:
        with Runtime.open(store=Path(d) / "s", model=args.model, threads=threads, max_new_tokens=16) as rt:
            res = {"renderings": renderings(rt), "when_tail": when_tail(rt)}
    res["seconds"] = round(time.perf_counter() - t0, 1)
    write_results("fact_reading", res, _table(res), f"python bench/fact_reading.py --threads {threads}",
                  quick=args.quick)
    print("\n".join(_table(res)))
    return 0


if __name__ == "__main__":
    run_cli(main)
