"""Composition repair: 2, 4 and 8 document grafts mounted side by side, repaired four ways.

Articles of 300-480 tokens from the gensim news corpus, an invented fact inserted in the middle of
each (recall.py's facts: name, 4-digit number, question in paraphrase with its hand-written lead),
ingested as one section each (document grafts: each read alone after the sinks). For n in 2, 4,
8 the first n articles are mounted together and each of their n facts is asked, in three orders:
document, reversed, and routed (the question's best graft last, as `ask --mode grafts` places
them). Methods:
- in context: the same n texts read in context in the same order (the ceiling);
- none: the stored K/V spliced side by side;
- first 16: arena `repair=16` (each graft's first 16 tokens recomputed in context, EPIC's idea);
- blend 15%: grm/grafts/blend.py (the 15% of tokens whose layer-1 K/V deviate most from a joint
  read, recomputed across all layers);
and, per method, the tokens the arena recomputed (its cost beside reading everything).
A probe counts if the fact's number appears in the answer (12 new tokens, greedy).
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
from recall import make_facts  # noqa: E402

SEED = 20261202
SIZES = (2, 4, 8)
METHODS = ("in context", "none", "first 16", "blend 15%")


def documents(tok, n: int) -> list[dict]:
    facts = make_facts(n, random.Random(SEED))
    arts = [a for a in news_corpus() if 300 <= len(tok.encode(a)) <= 460][:n]
    out = []
    for doc, f in zip(arts, facts):
        ends = [m.end() for m in re.finditer(r"\. (?=[A-Z])", doc)]
        at = ends[len(ends) // 2] if ends else len(doc)
        out.append({"text": doc[:at] + f["statement"] + " " + doc[at:], "answer": f["answer"],
                    "question": f["question"]})
    return out


def answer(rt, grafts, order: list[int], method: str, question: str) -> tuple[str, int]:
    from grm.grafts import Mount, build
    from grm.grafts.blend import BlendConfig
    from grm.kv import cache_from_kv
    from grm.kv.forward import prefill
    from grm.runtime.question import question_text
    from grm.runtime.generate import greedy

    tok, model = rt.lm.tokenizer, rt.lm.model
    sinks = rt.exact.sinks()
    if method == "in context":
        cache, seat = cache_from_kv(sinks), sinks.tokens
        for i in order:
            prefill(model, cache, list(grafts[i].ids), seat)
            seat += grafts[i].tokens
        computed = seat - sinks.tokens
    else:
        mounts = [Mount(grafts[i].id, list(grafts[i].ids), grafts[i].seat, rt.grafts.load(grafts[i].id))
                  for i in order]
        arena = build(model, rt.dialect, sinks, mounts, repair=16 if method == "first 16" else 0,
                      blend=BlendConfig(0.15) if method == "blend 15%" else None)
        cache, seat, computed = arena.cache, arena.seat, arena.computed
    q = tok.encode(question_text(question, template=tok.template))
    logits = prefill(model, cache, q, seat)
    text, _, _ = greedy(model, tok, cache, logits, seat + len(q), 12, time.perf_counter())
    return text, computed


SIZES, ORDERS = "2,4,8", "document,reversed,routed"  # the full run


def main(args: argparse.Namespace) -> int:
    import torch

    from grm.runtime import Runtime

    threads = args.threads or 2
    torch.set_num_threads(threads)
    given = getattr(args, "sizes", SIZES), getattr(args, "orders", ORDERS)  # `grm bench composition` passes neither
    sizes = (2, 4) if args.quick else tuple(int(x) for x in given[0].split(","))
    orders = tuple(given[1].split(","))
    t0 = time.perf_counter()
    res: dict = {"sizes": {}}
    name = "composition" if given == (SIZES, ORDERS) else \
        f"composition-{given[0].replace(',', '-')}-{given[1].replace(',', '-')}"
    cmd = f"python bench/composition.py --threads {threads} --sizes {given[0]} --orders {given[1]}"
    with tempfile.TemporaryDirectory() as d, Runtime.open(store=Path(d) / "s", model=args.model, threads=threads,
                                                          section_tokens=600) as rt:
        docs = documents(rt.lm.tokenizer, max(sizes))
        paths = []
        for i, doc in enumerate(docs):
            p = Path(d) / f"doc{i}.txt"
            p.write_text(doc["text"])
            paths.append(p)
        ingested = rt.ingest(paths, layout="sections", progress=False)
        grafts = [rt.grafts.adopt_blocks(p.name, r.keys) for p, r in zip(paths, ingested)]
        assert all(len(g) == 1 for g in grafts), "each article must be one section"
        grafts = [g[0] for g in grafts]
        for n in sizes:
            rows = {}
            for order_name in orders:
                for method in METHODS:
                    got, cost = [], []
                    for j in range(n):
                        if order_name == "document":
                            order = list(range(n))
                        elif order_name == "reversed":
                            order = list(range(n))[::-1]
                        else:
                            scores = {r.graft.id: r.score for r in
                                      rt.grafts.route(docs[j]["question"], k=n, seat_budget=100_000)}
                            order = sorted(range(n), key=lambda i: scores.get(grafts[i].id, -1.0))
                        text, computed = answer(rt, grafts, order, method, docs[j]["question"])
                        got.append({"answer": text, "correct": docs[j]["answer"] in text})
                        cost.append(computed)
                    rows[f"{order_name} / {method}"] = {"correct": sum(g["correct"] for g in got), "of": n,
                                                        "computed_tokens": sum(cost) / len(cost), "answers": got}
                print(f"n={n} {order_name}: " + ", ".join(f"{m} {rows[f'{order_name} / {m}']['correct']}/{n}"
                                                         for m in METHODS), file=sys.stderr, flush=True)
                res["sizes"][str(n)] = {"rows": rows, "mounted_tokens": sum(g.tokens for g in grafts[:n])}
                res["seconds"] = time.perf_counter() - t0
                # written after each order: a run cut short keeps what it measured
                write_results(name, res, _table(res), cmd, quick=args.quick)
    print("\n".join(_table(res)))
    return 0


def _table(res: dict) -> list[str]:
    out = ["SmolLM2-135M fp32, greedy; n news articles (300-460 tokens, one invented fact each) as document "
           "grafts mounted together; every fact asked (recall.py's paraphrase + lead). See bench/composition.py.",
           "", "| grafts | order | " + " | ".join(METHODS) + " | tokens recomputed (none / first 16 / blend) |",
           "|---|---|" + "---|" * len(METHODS) + "---|"]
    for n, r in res["sizes"].items():
        for order in [o for o in ("document", "reversed", "routed") if f"{o} / none" in r["rows"]]:
            cells = [f"{r['rows'][f'{order} / {m}']['correct']}/{n}" for m in METHODS]
            costs = " / ".join(f"{r['rows'][f'{order} / {m}']['computed_tokens']:.0f}" for m in METHODS[1:])
            out.append(f"| {n} | {order} | " + " | ".join(cells) + f" | {costs} of {r['mounted_tokens']} |")
    return out


def _flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--sizes", default=SIZES, help="grafts mounted together, comma-separated (default %(default)s)")
    p.add_argument("--orders", default=ORDERS, help="orders of the mounted grafts (default %(default)s)")


if __name__ == "__main__":
    run_cli(main, _flags)
