"""Memory semantics on SmolLM2-135M: the supersession gate and the folding gate.

- supersession: "My locker code is 1234." at turn 1, small talk, `correct memory: locker code
  1234 => 5678` at turn 7, 20 turns of small talk, then "What is my locker code?" with the live
  context cleared every turn. Pass: the answer holds 5678 (and not 1234), and `why do you
  remember: locker code` names turn 1, the correction's turn and the command.
- folding: the first 40 lines of bench/data/chat_turn50.txt (8 needles, 32 small talk), then the 8
  probes, `--clear-context`, folding on (windows of FOLD_WINDOW turns, eras of ERA_FANOUT digests,
  the newest 4 turns never folded). One fold is made to fail the fidelity gate on purpose: the
  digester drops every fact of the window holding ABORT_MARK (a lossy summary), so coverage falls
  below 0.70 and the fold aborts (persisted, not retried). Reported: digests, eras, aborts,
  recall with folding vs the same script without it, and per probe which graft kinds were mounted
  and whether a retired turn came back through descent.
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
NEEDLE_ANSWERS = ["4721", "7", "Pepper", "Okafor", "8305", "Halvorsen", "1418", "Lisbon"]
FOLD_WINDOW = 4
ERA_FANOUT = 4
ABORT_MARK = "My hotel room number"
SMALL_TALK = [ln.strip() for ln in (DATA / "chat_turn50.txt").read_text().splitlines() if ln.strip()][8:42]


def supersession(model, threads: int, store: Path) -> dict:
    from grm.runtime import Runtime

    lines = (["My locker code is 1234."] + SMALL_TALK[:5] + ["correct memory: locker code 1234 => 5678"]
             + SMALL_TALK[5:25] + ["What is my locker code?", "why do you remember: locker code"])
    from chat_ceiling import read_in_context, turn_text

    correction_turn = lines.index("correct memory: locker code 1234 => 5678") + 1
    with Runtime.open(store=store, model=model, threads=threads, max_new_tokens=24) as rt:
        chat = rt.chat(clear_context=True)
        replies = [chat.send(line) for line in lines]
        session = chat.session
        probe, why = replies[-2], replies[-1]
        # the ceilings: the two turns about the locker code (as the run answered them) read in order,
        # then the probe; and the very grafts memory mounted for the probe, same order, read as text
        turns = [turn_text(rt, lines[t - 1], replies[t - 1].answer) for t in (1, correction_turn)]
        ceiling = read_in_context(rt, turns, lines[-2], 24)
        mounted = [m["id"] for m in probe.mounted]
        reread = read_in_context(rt, [list(rt.grafts.get(g).ids) for g in reversed(mounted)], lines[-2], 24)
    return {"turns": len(lines), "probe_turn": probe.turn, "answer": probe.answer, "ceiling": ceiling,
            "ceiling_answers_5678": "5678" in ceiling and "1234" not in ceiling, "reread": reread,
            "reread_answers_5678": "5678" in reread and "1234" not in reread,
            "answers_5678": "5678" in probe.answer and "1234" not in probe.answer,
            "mounted": probe.why, "why": why.answer,
            "why_names_both_turns": f"{session}#1" in why.answer and f"{session}#{correction_turn}" in why.answer,
            "why_names_the_correction": "correct memory" in why.answer}


def folding_run(model, threads: int, store: Path, fold: bool) -> dict:
    from chat_ceiling import read_in_context

    from grm.runtime import Runtime
    from grm.runtime.chat import TURN_END, TURN_PROMPT

    lines = [ln.strip() for ln in (DATA / "chat_turn50.txt").read_text().splitlines() if ln.strip()]
    talk, probes = lines[:40], lines[42:50]
    with Runtime.open(store=store, model=model, threads=threads, max_new_tokens=24) as rt:
        chat = rt.chat(clear_context=True, fold=fold, policy={"fold_window": FOLD_WINDOW, "era_fanout": ERA_FANOUT})
        folder = chat.glue.policy.folder

        def lossy_for_one_window(sources):
            """The default extractive digest, except for the window holding ABORT_MARK, whose
            'summary' keeps none of its facts: the fidelity gate must abort that fold."""
            if any(ABORT_MARK in s.text for s in sources):
                return "A pleasant conversation about everyday things."
            facts = {}
            for s in sources:
                facts.update(folder.facts_of(s.text, s.id, s.created))
            return folder.digest_text(sources, facts)

        chat.digester = lossy_for_one_window
        said = [chat.send(line) for line in talk]
        needles = {g.record.meta["turn"]: g.id for g in rt.grafts.grafts(kind="evidence", include_retired=True)
                   if g.record.meta.get("session") == chat.session and g.record.meta.get("turn", 99) <= 8}
        retired_before = set(folder.retired())
        evidence_ids = {g.id for g in rt.grafts.grafts(kind="evidence", include_retired=True)}
        rows = []
        for i, (q, want) in enumerate(zip(probes, NEEDLE_ANSWERS)):
            r = chat.send(q)
            kinds = [rt.grafts.get(m["id"]).kind for m in r.mounted]
            needle = needles.get(i + 1)
            # the ceiling: the needle turn (user text + the reply it got) read in context, then the probe
            turn = TURN_PROMPT.format(text=talk[i]) + " " + said[i].answer.strip() + TURN_END
            ceiling = read_in_context(rt, [turn], q, 24)
            rows.append({"question": q, "answer": r.answer, "recalled": want.lower() in r.answer.lower(),
                         "ceiling": ceiling, "ceiling_recalled": want.lower() in ceiling.lower(),
                         "mounted_kinds": kinds, "needle_turn_mounted": needle in [m["id"] for m in r.mounted],
                         "needle_turn_retired": needle in retired_before,
                         "via_descent": needle in retired_before and needle in [m["id"] for m in r.mounted]})
        nodes = folder.nodes()
        return {"fold": fold, "recalled": sum(r["recalled"] for r in rows), "probes": rows,
                "ceiling": sum(r["ceiling_recalled"] for r in rows),
                "digests": sum(n.type == "digest" for n in nodes), "eras": sum(n.type == "era" for n in nodes),
                "aborts": len(folder.aborts()), "abort_detail": folder.aborts(),
                "retired_turns": len(retired_before & evidence_ids),
                "retired_digests": sum(n.type == "digest" and n.retired for n in nodes), "digest_grafts": len(rt.grafts.grafts(kind="digest"))}


def _table(res: dict) -> list[str]:
    s, f, nf = res["supersession"], res["folding"], res["no_folding"]
    descent = [p for p in f["probes"] if p["via_descent"]]
    out = ["SmolLM2-135M fp32, greedy, every chat run with the live context cleared every turn.", "",
           "## Supersession gate", "",
           f"Probe at turn {s['probe_turn']} (20 turns after the correction): answer {s['answer']!r} -> "
           f"{'PASS' if s['answers_5678'] else 'FAIL'} (holds 5678, not 1234). `why do you remember` names both "
           f"turns: {s['why_names_both_turns']}; names the correction: {s['why_names_the_correction']}.",
           f"In-context ceiling (turn 1 and the correction turn, as answered, read in order, then the probe): "
           f"{s['ceiling']!r} -> {'holds 5678 only' if s['ceiling_answers_5678'] else 'not 5678 alone'}; the "
           f"grafts memory mounted, same order, read as text: {s['reread']!r} -> "
           f"{'holds 5678 only' if s['reread_answers_5678'] else 'not 5678 alone'}.", "",
           "```", s["why"], "```", "",
           "## Folding gate", "",
           f"40 turns, windows of {FOLD_WINDOW}, eras of {ERA_FANOUT}: {f['digests']} digests, {f['eras']} eras, "
           f"{f['aborts']} fold(s) aborted by the fidelity gate (constructed: a lossy digest of the window with "
           f"{ABORT_MARK!r}; its 4 turns stay unfolded and routable), {f['retired_turns']} turns and "
           f"{f['retired_digests']} digests (under eras) retired before the probes.", "",
           "| probe | with folding | mounted kinds | needle turn retired / mounted | without folding | "
           "needle turn in context (ceiling) |",
           "|---|---|---|---|---|---|"]
    for p, q in zip(f["probes"], nf["probes"]):
        out.append(f"| {p['question']} | {'yes' if p['recalled'] else 'no'} ({p['answer'][:30]!r}) | "
                   f"{', '.join(p['mounted_kinds']) or '-'} | {p['needle_turn_retired']} / {p['needle_turn_mounted']} | "
                   f"{'yes' if q['recalled'] else 'no'} | {'yes' if q['ceiling_recalled'] else 'no'} |")
    out += ["", f"Recall: with folding {f['recalled']}/8, without {nf['recalled']}/8, in-context ceiling "
            f"{nf['ceiling']}/8 (the needle turn as the run answered it, read as text before the probe). "
            "Retired needle turns mounted "
            f"again through descent: {len(descent)} ({', '.join(p['question'] for p in descent) or 'none'})."]
    return out


def main(args: argparse.Namespace) -> int:
    import torch

    threads = args.threads or 2
    torch.set_num_threads(threads)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        sup = supersession(args.model, threads, tmp / "sup")
        print("supersession done", file=sys.stderr)
        fold = folding_run(args.model, threads, tmp / "fold", True)
        print("folding done", file=sys.stderr)
        nofold = folding_run(args.model, threads, tmp / "nofold", False)
    res = {"supersession": sup, "folding": fold, "no_folding": nofold, "seconds": time.perf_counter() - t0}
    write_results("memory", res, _table(res), f"grm bench memory --threads {threads}", quick=args.quick)
    print("\n".join(_table(res)))
    return 0


if __name__ == "__main__":
    run_cli(main)
