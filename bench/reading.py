"""Reading from memory vs in context, on sets written blind: one section vs top-k side by side.

The sets (bench/data/blind/, written by a helper who never saw grm/ or bench/, committed before
any run): `recurring-a`, `recurring-b` (10 invented essays each whose names, places and years
recur across essays, 20 paraphrased questions each, with the wrong answers a reader mixing
essays would give), `stdlib-docs` (30 questions a new user asks about ten standard-library
modules' docstrings, read from this Python at run time). Each set's documents are ingested with
the default layout into one store; every question is asked plainly (default flags but those the
configuration names), through the model's chat template where it has one.

Configurations (rows):
- `in context: its document`: the question's own document alone, read as text (memory off): the
  reading ceiling.
- `auto`: the default path as a user meets it.
- `sections k=N`: the top N routed sections mounted side by side from memory (`--mode grafts
  --grafts N`), with the lead named; `+ blend`, `+ repair`: what restores the links between
  mounted spans (grm/grafts/blend.py, boundary repair).
- `in context: what k=N mounted`: the same routed sections read as text in the same order
  (`--reread always`): memory's own ceiling, the same texts in context.

A reply is right when it contains one of the question's answers (case-insensitive); `mixed`
counts replies that name a distractor (another document's fact) and no answer.

    python bench/reading.py --threads 2 [--model NAME] [--sets recurring-a,stdlib-docs] [--configs auto,k3]
"""

from __future__ import annotations

import argparse
import importlib
import json
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import run_cli, write_results  # noqa: E402

BLIND = Path(__file__).resolve().parent / "data" / "blind"
SETS = ("recurring-a", "recurring-b", "stdlib-docs")

# name -> (label, ask mode, RuntimeConfig fields); "ceiling" reads the question's document as text
CONFIGS: dict[str, tuple[str, str, dict]] = {
    "ceiling": ("in context: its document", "ceiling", {}),
    "auto": ("auto (default flags)", "auto", {}),
    "k1-off": ("sections k=1, lead off", "grafts", {"graft_k": 1, "lead": "off"}),
    "k2-off": ("sections k=2, lead off", "grafts", {"graft_k": 2, "lead": "off"}),
    "k3-off": ("sections k=3, lead off", "grafts", {"graft_k": 3, "lead": "off"}),
    "k4-off": ("sections k=4, lead off", "grafts", {"graft_k": 4, "lead": "off"}),
    "k3-rules": ("sections k=3, lead rules", "grafts", {"graft_k": 3, "lead": "rules"}),
    "k3-model": ("sections k=3, lead rules else model", "grafts", {"graft_k": 3, "lead": "model"}),
    "k3-blend": ("sections k=3, lead off, + blend 0.15", "grafts", {"graft_k": 3, "lead": "off", "blend": 0.15}),
    "k3-repair": ("sections k=3, lead off, + repair 16", "grafts", {"graft_k": 3, "lead": "off", "repair": 16}),
    "k3-text": ("in context: what k=3 mounted, lead off", "grafts", {"graft_k": 3, "lead": "off", "reread": "always"}),
    "k3-nofloor": ("sections k=3, lead off, no abstain floor", "grafts", {"graft_k": 3, "lead": "off", "abstain_floor": 0.0}),
    "k1-rules": ("sections k=1, lead rules", "grafts", {"graft_k": 1, "lead": "rules"}),
}
DEFAULT_CONFIGS = tuple(CONFIGS)


def load_set(name: str) -> tuple[dict[str, str], list[dict]]:
    """(document name -> text, questions) of a blind set; stdlib docstrings read from this Python."""
    data = json.loads((BLIND / f"{name}.json").read_text())
    docs = {}
    for d in data["documents"]:
        docs[d["name"]] = d["text"] if "text" in d else importlib.import_module(d["module"]).__doc__
    return docs, data["questions"]


def judge(reply: str, q: dict) -> tuple[bool, bool]:
    """(right, mixed): an answer is in the reply; a distractor is and no answer is."""
    low = reply.casefold()
    right = any(a.casefold() in low for a in q["answers"])
    return right, not right and any(d.casefold() in low for d in q.get("distractors", ()))


def run_set(rt, name: str, configs: list[str], max_new: int, log) -> dict[str, dict]:
    from grm.runtime import Runtime

    docs, questions = load_set(name)
    out: dict[str, dict] = {}
    for key in configs:
        label, mode, fields = CONFIGS[key]
        view = Runtime(replace(rt.config, **fields), rt.lm, rt.dialect, rt.selftest, rt.store, owns_store=False,
                       uses=rt.uses)
        rows = []
        for q in questions:
            t0 = time.perf_counter()
            if mode == "ceiling":
                ans = view.ask(docs[q["document"]].strip() + "\n\n" + q["question"], mode="exact", memory=False,
                               max_new_tokens=max_new)
            else:
                ans = view.ask(q["question"], mode=mode, max_new_tokens=max_new)
            right, mixed = judge(ans.answer, q)
            rows.append({"question": q["question"], "answer": ans.answer, "right": right, "mixed": mixed,
                         "mode": ans.mode, "ttft_s": round(ans.ttft_s, 3), "total_s": round(time.perf_counter() - t0, 3),
                         "prompt_tokens": ans.prompt_tokens, "from_memory": ans.tokens_from_memory,
                         "abstained": ans.abstained, "sources": [Path(m.get("source") or "").name for m in ans.mounted],
                         "document": q["document"]})
        n = len(rows)
        out[key] = {
            "label": label, "right": sum(r["right"] for r in rows), "mixed": sum(r["mixed"] for r in rows), "n": n,
            "abstained": sum(r["abstained"] for r in rows),
            "found": sum(q["document"] in {Path(s).name for s in r["sources"] or []} for q, r in zip(questions, rows)),
            "median_ttft_s": round(statistics.median(r["ttft_s"] for r in rows), 3),
            "from_memory": round(sum(r["from_memory"] for r in rows) / max(1, sum(r["prompt_tokens"] for r in rows)), 3),
            "rows": rows,
        }
        log(f"{name} {label}: {out[key]['right']}/{n} (mixed {out[key]['mixed']}, "
            f"median ttft {out[key]['median_ttft_s']} s)")
    return out


def table(model: str, dtype: str, results: dict) -> list[str]:
    lines = [f"{model} ({dtype}), greedy, plain questions, default flags but those named; each set's documents "
             "ingested with the default layout. Sets written blind (bench/data/blind/, see bench/reading.py); "
             "`found`: the question's document was among those mounted or read.", "",
             "| set | configuration | right | mixed (another document's fact) | found | median TTFT | from memory |",
             "|---|---|---|---|---|---|---|"]
    for name, per in results.items():
        for r in per.values():
            found = "-" if r["label"].startswith("in context: its") else f"{r['found']}/{r['n']}"
            lines.append(f"| {name} | {r['label']} | {r['right']}/{r['n']} | {r['mixed']} | {found} | "
                         f"{r['median_ttft_s']:.2f} s | {100 * r['from_memory']:.0f}% |")
    return lines


def main(args: argparse.Namespace) -> int:
    import torch

    from grm.models.registry import DEFAULT_MODEL
    from grm.runtime import Runtime

    torch.set_num_threads(args.threads)
    sets = args.sets.split(",") if args.sets else list(SETS)
    configs = args.configs.split(",") if args.configs else list(DEFAULT_CONFIGS)
    unknown = sorted(set(configs) - set(CONFIGS)) + sorted(set(sets) - set(SETS))
    if unknown:
        print(f"unknown configuration or set: {', '.join(unknown)}", file=sys.stderr)
        return 2
    model = args.model or DEFAULT_MODEL
    results: dict[str, dict] = {}
    for name in sets:
        docs, questions = load_set(name)
        if args.quick:
            configs = configs[:2]
        with tempfile.TemporaryDirectory() as tmp:
            for doc, text in docs.items():
                (Path(tmp) / doc).write_text(text)
            with Runtime.open(store=Path(tmp) / "store", model=model, threads=args.threads) as rt:
                rt.ingest(sorted(Path(tmp).glob("*.txt")) if name != "stdlib-docs" else
                          [Path(tmp) / d for d in docs], progress=False)
                dtype = str(rt.lm.model.dtype).replace("torch.", "")
                results[name] = run_set(rt, name, configs, args.max_new_tokens, lambda m: print(m, flush=True))
        out = args.out or f"reading-{model.replace('/', '_')}"
        cmd = f"python bench/reading.py --threads {args.threads} --model {model}" + (
            f" --sets {args.sets}" if args.sets else "") + (f" --configs {args.configs}" if args.configs else "")
        write_results(out, {"model": model, "dtype": dtype, "results": results}, table(model, dtype, results), cmd,
                      quick=args.quick)
    return 0


def flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--sets", default="", help=f"comma-separated, of {', '.join(SETS)}")
    p.add_argument("--configs", default="", help=f"comma-separated, of {', '.join(CONFIGS)}")
    p.add_argument("--max-new-tokens", type=int, default=48)
    p.add_argument("--out", default="", help="results name (default reading-MODEL)")


if __name__ == "__main__":
    run_cli(main, flags)
