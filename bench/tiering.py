"""Tiering: a store filled past its byte budget with the recall benchmark's corpus plus chat turns.

The recall benchmark's corpus (bench/recall.py: invented facts at depths 1%..99% of the Lee news
corpus) is cut into PARTS documents and ingested one by one with default flags (layout `both`),
with chat exchanges stored between them (as the server stores them: evidence grafts, and the
facts the user states), the tiering policy (grm/archive/policy.py) run after each write as a
long-lived process runs it. Reported:
- bytes per tier (exact / archive / text) and the footprint after every write and every policy
  run, against the budget, and the store folder's bytes on disk (du);
- recall of every fact, asked as a plain question with default flags (`ask`, mode auto), at three
  stages: all exact (no budget), after demotion (budget BUDGET_DEMOTE x the exact footprint) and
  after eviction (budget BUDGET_EVICT x), each by the tier the fact's section was in then; the
  same questions in grafts mode with one graft (the path that mounts an archived section), and the
  in-context ceiling (the fact's section read as text, the same plain question);
- that no fact graft was moved.
Each stage opens a fresh runtime (a new process would), so nothing is served from RAM caches.
Results go to tiering.* for SmolLM2-135M and tiering-MODEL.* for any other model.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import run_cli, write_results  # noqa: E402
from grm.models.registry import DEFAULT_MODEL  # noqa: E402
from recall import SEED, SECTION_TOKENS, ask_gold, build_corpus, make_facts  # noqa: E402

PARTS = 4
BUDGET_DEMOTE = 0.35  # of the all-exact footprint: the older documents' sections go to the archive
# after demotion: the floor (what never moves: documents, facts, codebooks, rows, log) over the low-water
# mark, plus this share of the archive bytes: most archived spans (the coldest) go to text
EVICT_KEEP = 0.25
# Automatic codebooks, cheaper than the policy's defaults (k=256, 15 rounds, 20k vectors: about an hour for
# SmolLM2's 90 heads on this shared 2-core machine): stated in the results.
POLICY = dict(k=64, iters=8, max_train=4000, train_tokens=8192, min_train_tokens=4096)
CHAT = [("My locker number is 4821.", "Noted."), ("Our team meets in room 316 on Tuesdays.", "Got it."),
        ("The backup server is called Halvard.", "OK."), ("My badge code is 7730.", "Noted.")]
MAX_NEW = 12  # new tokens per answer (`--max-new`): the figures of record used 12; Qwen answers in a sentence


def du(path: Path) -> int:
    out = subprocess.run(["du", "-sb", str(path)], capture_output=True, text=True, check=False).stdout.split()
    return int(out[0]) if out else 0


def snapshot(rt, label: str, budget: int | None, store: Path, t0: float) -> dict:
    from grm.store.tiering import inventory

    inv = inventory(rt.store)
    row = {"at": label, "t_s": round(time.perf_counter() - t0, 1), "budget": budget, "footprint": inv.footprint,
           "disk_bytes": du(store), **{f"{t}_bytes": v["bytes"] for t, v in inv.by_tier().items()},
           **{f"{t}_spans": v["spans"] for t, v in inv.by_tier().items()}, "kept_bytes": inv.kept_bytes}
    print(f"  {label:<34} footprint {row['footprint'] / 1e6:8.1f} MB  exact {row['exact_bytes'] / 1e6:8.1f}  "
          f"archive {row['archive_bytes'] / 1e6:6.1f}  text spans {row['text_spans']:4d}  disk {row['disk_bytes'] / 1e6:8.1f}",
          file=sys.stderr, flush=True)
    return row


def plain(question: str) -> str:
    return question.split("\nAnswer:")[0]


def gold_section(rt, statement: str):
    from grm.store.kinds import BLOCK

    for r in rt.store.records(rt.config.tenant, BLOCK):
        if r.state == "active" and r.parent == rt.exact.sink_fp and statement in (r.text or ""):
            return r
    return None


def ask_all(rt, facts: list[dict], stage: str, with_ceiling: bool, max_new: int = MAX_NEW) -> list[dict]:
    from grm.store.tiering import inventory

    tiers = {(s.tenant, s.key): s.tier for s in inventory(rt.store).spans}
    out = []
    for fact in facts:
        q = plain(fact["question"])
        gold = gold_section(rt, fact["statement"])
        row = {"stage": stage, "answer_expected": fact["answer"], "question": q,
               "gold_tier": tiers.get((rt.config.tenant, gold.key)) if gold else None}
        for mode in ("auto", "grafts"):
            rt.exact._sinks = None
            a = rt.ask(q, mode=mode, max_new_tokens=max_new)
            row[mode] = {"answer": a.answer, "correct": fact["answer"] in a.answer, "mode": a.mode,
                         "lossy": bool(a.lossy), "from_memory": a.tokens_from_memory, "ttft_s": round(a.ttft_s, 4)}
        if with_ceiling and gold is not None:
            g = ask_gold(rt, gold.text, q, max_new)
            row["ceiling"] = {"answer": g["answer"], "correct": fact["answer"] in g["answer"]}
        out.append(row)
        print(f"    [{stage}] {fact['answer']} tier={row['gold_tier']} auto={row['auto']['answer'][:30]!r} "
              f"grafts={row['grafts']['answer'][:30]!r}", file=sys.stderr, flush=True)
    return out


def main(args: argparse.Namespace) -> int:
    from grm.archive.policy import PolicyConfig, TieringPolicy
    from grm.runtime import Runtime
    from grm.store.kinds import GRAFT
    from grm.store.tiering import TierConfig, inventory, save_budget

    quick = getattr(args, "quick", False)
    n_facts, articles = (6, 8) if quick else (args.facts, args.articles)
    threads = args.threads or 2
    max_new = getattr(args, "max_new", MAX_NEW)
    facts = make_facts(n_facts, __import__("random").Random(SEED))
    corpus, _ = build_corpus(facts, articles=articles)
    work = Path(tempfile.mkdtemp(prefix="grm-bench-tiering-"))
    store = work / "store"
    paras = corpus.split("\n\n")
    size = -(-len(paras) // PARTS)
    docs = []
    for i in range(PARTS):
        p = work / f"part{i + 1}.txt"
        p.write_text("\n\n".join(paras[i * size:(i + 1) * size]), encoding="utf-8")
        docs.append(p)
    opts = dict(store=store, model=args.model, threads=threads, section_tokens=SECTION_TOKENS, graft_k=1)
    t0 = time.perf_counter()
    timeline: list[dict] = []
    answers: list[dict] = []
    # stage 1: fill the store, all exact (no budget yet)
    with Runtime.open(**opts) as rt:
        tokens = len(rt.lm.tokenizer.encode(corpus))
        for i, doc in enumerate(docs):
            rt.ingest([doc], progress=False)
            user, reply = CHAT[i % len(CHAT)]
            rt.remember_exchange(user, reply, "bench", i + 1)
            timeline.append(snapshot(rt, f"ingest part {i + 1} + chat turn", None, store, t0))
        full = inventory(rt.store).footprint
        answers += ask_all(rt, facts, "exact", with_ceiling=True, max_new=max_new)
    budgets = {"after demotion": int(full * BUDGET_DEMOTE), "after eviction": 0}
    runs = []
    for stage in budgets:
        with Runtime.open(**opts) as rt:
            if stage == "after eviction":
                inv = inventory(rt.store)
                floor = inv.kept_bytes + inv.log_bytes + inv.row_bytes
                budgets[stage] = int(floor / TierConfig(1).low_water + EVICT_KEEP * inv.by_tier()["archive"]["bytes"])
            budget = budgets[stage]
            save_budget(rt.store, budget)  # as `grm tier --apply --store-budget SIZE` does
            policy = TieringPolicy(rt.store, rt.lm, rt.dialect, TierConfig(budget),
                                   PolicyConfig(**POLICY), archive=rt.archive)
            t = time.perf_counter()
            rep = policy.run()
            runs.append({"stage": stage, "seconds": round(time.perf_counter() - t, 1),
                         **{k: v for k, v in rep.to_json().items() if k not in ("moves", "tiers")}})
            timeline.append(snapshot(rt, f"tier run, budget {budget / 1e6:.0f} MB", budget, store, t0))
            fact_rows = [r for r in rt.store.records(rt.config.tenant, GRAFT) if r.meta.get("kind") == "fact"]
            runs[-1]["fact_grafts"] = len(fact_rows)
            runs[-1]["fact_grafts_moved"] = sum(1 for r in fact_rows if r.meta.get("tier") or r.payload is None)
        with Runtime.open(**opts) as rt:
            answers += ask_all(rt, facts, stage, with_ceiling=False, max_new=max_new)
    # a long-lived process: one more document and chat turn written under the last budget, policy after each write
    with Runtime.open(**opts) as rt:
        policy = TieringPolicy(rt.store, rt.lm, rt.dialect, None, PolicyConfig(**POLICY),
                               archive=rt.archive)
        rt.ingest([docs[0]], progress=False)  # idempotent: nothing new; then a new one
        extra = work / "late.txt"
        extra.write_text("\n\n".join(paras[:size // 2]).replace("the", "a"), encoding="utf-8")
        rt.ingest([extra], progress=False)
        timeline.append(snapshot(rt, "late write (before the run)", policy.tier_config.budget, store, t0))
        policy.run()
        timeline.append(snapshot(rt, "late write, tier run", policy.tier_config.budget, store, t0))
    shutil.rmtree(work, ignore_errors=True)

    def score(stage: str, mode: str, tier: str | None = None) -> str:
        rows = [a for a in answers if a["stage"] == stage and (tier is None or a["gold_tier"] == tier)]
        return f"{sum(a[mode]['correct'] for a in rows)}/{len(rows)}" if rows else "-"

    stages = ["exact", *budgets]
    ceiling = f"{sum(a['ceiling']['correct'] for a in answers if 'ceiling' in a)}/{n_facts}"
    table = [f"# Tiering: {args.model or DEFAULT_MODEL}, {tokens} corpus tokens in {PARTS} documents + "
             f"{PARTS} chat turns, {n_facts} facts", "",
             "Bytes per tier over time (footprint = payload bytes the rows name + log + rows, grm/store/tiering.py; "
             "kept = documents, facts, sinks, codebooks; disk = du of the folder):", "",
             "| after | budget MB | footprint MB | exact MB | archive MB | text spans | kept MB | disk MB | under budget |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in timeline:
        b = r["budget"]
        table.append(f"| {r['at']} | {b / 1e6:.1f} | {r['footprint'] / 1e6:.1f} | {r['exact_bytes'] / 1e6:.1f} | "
                     f"{r['archive_bytes'] / 1e6:.2f} | {r['text_spans']} | {r['kept_bytes'] / 1e6:.2f} | "
                     f"{r['disk_bytes'] / 1e6:.1f} | {'-' if b is None else 'yes' if r['footprint'] <= b else 'NO'} |"
                     if b is not None else
                     f"| {r['at']} | - | {r['footprint'] / 1e6:.1f} | {r['exact_bytes'] / 1e6:.1f} | "
                     f"{r['archive_bytes'] / 1e6:.2f} | {r['text_spans']} | {r['kept_bytes'] / 1e6:.2f} | "
                     f"{r['disk_bytes'] / 1e6:.1f} | - |")
    table += ["", f"Recall, plain questions ({max_new} new tokens), side by side (in-context ceiling: {ceiling}); in brackets: "
              "the questions whose section was in that tier at that stage:", "",
              "| stage | default flags (auto) | grafts, 1 graft | by tier, default | by tier, grafts |", "|---|---|---|---|---|"]
    for s in stages:
        by = lambda mode: ", ".join(f"{t} {score(s, mode, t)}" for t in ("exact", "archive", "text")  # noqa: E731
                                    if score(s, mode, t) != "-")
        table.append(f"| {s} | {score(s, 'auto')} | {score(s, 'grafts')} | {by('auto')} | {by('grafts')} |")
    table += ["", f"Policy runs (automatic codebooks: {POLICY}; eviction budget: the floor over the low-water "
              f"mark + {EVICT_KEEP} x the archive bytes):", "", "| stage | budget MB | s | demoted | evicted | dropped | codebooks trained | "
              "fact grafts moved / kept | after MB |", "|---|---|---|---|---|---|---|---|---|"]
    for r in runs:
        table.append(f"| {r['stage']} | {r['budget'] / 1e6:.1f} | {r['seconds']} | {r['demote']} | {r['evict']} | "
                     f"{r['drop']} | {r['trained_codebooks'] or '-'} | {r['fact_grafts_moved']} / {r['fact_grafts']} | {r['after_bytes'] / 1e6:.1f} |")
    cmd = "python bench/tiering.py" + (f" --model {args.model}" if args.model else "") + (
        "" if quick else f" --articles {articles} --facts {n_facts}") + (f" --max-new {max_new}" if max_new != MAX_NEW else "")
    model = args.model or DEFAULT_MODEL
    name = ("tiering" if model == "smollm2-135m" else f"tiering-{model}") + (f"-max-new{max_new}" if max_new != MAX_NEW else "")
    write_results(name, {"model": model, "max_new": max_new, "corpus_tokens": tokens, "facts": n_facts,
                              "policy": POLICY, "evict_keep": EVICT_KEEP,
                              "parts": PARTS, "budgets": budgets, "full_exact_footprint": full, "timeline": timeline,
                              "runs": runs, "answers": answers, "seconds": round(time.perf_counter() - t0, 1)},
                  table, cmd, quick)
    print("\n".join(table))
    return 0


def flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--facts", type=int, default=20, help="facts inserted and asked (default 20)")
    p.add_argument("--articles", type=int, default=80, help="news articles of the corpus (default 80)")
    p.add_argument("--max-new", type=int, default=MAX_NEW,
                   help=f"new tokens per answer (default {MAX_NEW}, as recorded; a model that answers in a sentence "
                        "and reads one token per digit needs about 32)")


if __name__ == "__main__":
    run_cli(main, flags)
