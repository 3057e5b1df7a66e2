"""`grm demo`: ingest a small corpus, answer cold, then warm in a new process, print the savings.

Cold = the prompt (document + question) read in full by the model with an empty memory. Warm = the
same prompt asked by a *new process* on the store the first one wrote: the document's blocks come
from stored K/V and only the question is computed.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from grm.demo.corpus import DOCUMENTS, QUESTIONS
from grm.runtime.runtime import question_text


def prompts() -> list[str]:
    return [DOCUMENTS[doc] + question_text(q) for doc, q, _ in QUESTIONS]


def _warm(args: argparse.Namespace, store: Path) -> list[dict]:
    cmd = [sys.executable, "-m", "grm.demo.warm", "--store", str(store), "--tenant", args.tenant,
           "--max-new-tokens", str(args.max_new_tokens)]
    if args.model:
        cmd += ["--model", args.model]
    if args.threads:
        cmd += ["--threads", str(args.threads)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr)
        raise SystemExit(proc.returncode or 2)
    return [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]


def run_demo(args: argparse.Namespace) -> int:
    from grm.runtime import Runtime

    store = Path(args.store).expanduser() if args.store else Path(tempfile.mkdtemp(prefix="grm-demo-")) / "store"
    corpus = store.parent / "corpus"
    corpus.mkdir(parents=True, exist_ok=True)
    for name, text in DOCUMENTS.items():
        (corpus / name).write_text(text, encoding="utf-8")
    say = (lambda m: print(m, file=sys.stderr)) if args.json else print
    say(f"GRM demo: store {store}")
    say("1/3 loading the model and answering cold (nothing in memory) ...")
    with Runtime.open(store=store, model=args.model, tenant=args.tenant, threads=args.threads) as rt:
        cold = [rt.ask(p, mode="exact", max_new_tokens=args.max_new_tokens).to_json() for p in prompts()]
        say(f"2/3 ingesting {len(DOCUMENTS)} documents (K/V stored once) ...")
        ingested = rt.ingest([corpus], progress=not args.json)
    say("3/3 answering warm in a new process (K/V loaded from the store) ...")
    warm = _warm(args, store)
    rows = []
    for (doc, q, expected), c, w in zip(QUESTIONS, cold, warm):
        rows.append({
            "question": q, "expected": expected, "cold_answer": c["answer"], "warm_answer": w["answer"],
            "cold_ttft_s": round(c["ttft_s"], 4), "warm_ttft_s": round(w["ttft_s"], 4),
            "speedup": round(c["ttft_s"] / max(w["ttft_s"], 1e-9), 1),
            "tokens_from_memory": w["tokens_from_memory"], "prompt_tokens": w["prompt_tokens"],
            "correct_cold": expected.lower() in c["answer"].lower(),
            "correct_warm": expected.lower() in w["answer"].lower(),
            "same_answer": c["answer"] == w["answer"],
        })
    summary = {
        "store": str(store), "documents": len(ingested), "blocks": sum(r.blocks for r in ingested),
        "rows": rows,
        "tokens_from_memory": sum(r["tokens_from_memory"] for r in rows),
        "prompt_tokens": sum(r["prompt_tokens"] for r in rows),
    }
    if args.json:
        print(json.dumps(summary, ensure_ascii=False))
        return 0
    _table(rows)
    saved = summary["tokens_from_memory"] / max(summary["prompt_tokens"], 1)
    print(f"\nMemory served {summary['tokens_from_memory']} of {summary['prompt_tokens']} prompt tokens "
          f"({saved:.0%}); the model read only the questions. Store: {store}")
    return 0


def _table(rows: list[dict]) -> None:
    try:
        from rich.console import Console
        from rich.table import Table
    except ImportError:  # rich is pinned, but the table is not worth a crash
        for r in rows:
            print(r)
        return
    table = Table(title="GRM demo: cold (read everything) vs warm (new process, K/V from memory)")
    for col in ("question", "answer (warm)", "same as cold", "TTFT cold", "TTFT warm", "speed-up", "from memory"):
        table.add_column(col)
    for r in rows:
        table.add_row(
            r["question"], r["warm_answer"][:40], "yes" if r["same_answer"] else "no",
            f"{r['cold_ttft_s'] * 1000:.0f} ms", f"{r['warm_ttft_s'] * 1000:.0f} ms", f"{r['speedup']}x",
            f"{r['tokens_from_memory']}/{r['prompt_tokens']}",
        )
    Console().print(table)
