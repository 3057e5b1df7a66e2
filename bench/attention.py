"""Attention kernel: transformers' SDPA vs GRM's grouped kernel (grm/models/attention.py), side by side.

Two measurements on one model, in one process, the two kernels alternating:
- the same output: a real text read in PREFILL_CHUNK-token calls (every call after the first
  masked) and a question read after it, under each kernel; the K/V of every layer and both
  logits compared to the bit;
- time: a question (QUESTION_TOKENS tokens) read after a cache of N tokens, per N, the cache a
  deep copy of one random K/V set (reading time does not depend on the values), median of the
  runs after a first one per kernel.
"""

from __future__ import annotations

import argparse
import copy
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import news_corpus, run_cli, write_results  # noqa: E402

SIZES = (2048, 8192, 16384)
QUICK_SIZES = (256, 1024)
READ_TOKENS = 1100  # three forward calls of the chunked read
QUESTION_TOKENS = 22
RUNS = 4


def main(args: argparse.Namespace) -> int:
    import torch
    from transformers import DynamicCache

    from grm.kv.cache import kv_from_cache
    from grm.kv.forward import prefill
    from grm.models.attention import NAME, use_grouped_attention
    from grm.models.loader import load_model
    from grm.models.registry import DEFAULT_MODEL
    from grm.runtime.config import default_cache_dir

    quick = getattr(args, "quick", False)
    threads = args.threads or 2
    torch.set_num_threads(threads)
    model_name = args.model or DEFAULT_MODEL
    lm = load_model(model_name, default_cache_dir(), dtype=getattr(args, "dtype", None) or "auto")
    model, cfg = lm.model, lm.model.config
    dtype = str(model.dtype).replace("torch.", "")
    sizes = QUICK_SIZES if quick else tuple(getattr(args, "sizes", None) or SIZES)
    runs = 2 if quick else RUNS

    def kernel(name: str) -> None:
        model.set_attn_implementation("sdpa")
        if name == NAME:
            use_grouped_attention(model)

    ids = lm.tokenizer.encode("\n\n".join(news_corpus()[:12]))[:READ_TOKENS]
    question = lm.tokenizer.encode("\n\nQuestion: Which places and people are named in the first article above?\n"
                                   "Answer:")[:QUESTION_TOKENS]
    outputs = {}
    for name in ("sdpa", NAME):
        kernel(name)
        cache = DynamicCache()
        after = prefill(model, cache, ids, 0)
        kv = kv_from_cache(cache, 0)
        outputs[name] = (kv.keys, kv.values, after, prefill(model, cache, question, len(ids)))
    identical = all(torch.equal(a, b) for a, b in zip(outputs["sdpa"], outputs[NAME]))
    print(f"attention: {len(ids)}-token read + question, bit-identical: {identical}", file=sys.stderr, flush=True)

    rows = []
    heads, dim = cfg.num_key_value_heads, getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    for n in sizes:
        g = torch.Generator().manual_seed(n)
        base = DynamicCache()
        for layer in range(cfg.num_hidden_layers):
            k, v = (torch.randn(1, heads, n, dim, generator=g).to(model.dtype) for _ in range(2))
            base.update(k, v, layer)
        times: dict[str, list[float]] = {"sdpa": [], NAME: []}
        for _ in range(runs):
            for name in times:
                kernel(name)
                c = copy.deepcopy(base)
                t = time.perf_counter()
                prefill(model, c, question, n)
                times[name].append(time.perf_counter() - t)
                del c
        med = {k: statistics.median(v[1:]) for k, v in times.items()}
        rows.append({"cache_tokens": n, "sdpa_s": med["sdpa"], "grouped_s": med[NAME], "runs": times,
                     "speedup": med["sdpa"] / med[NAME]})
        print(f"attention: {n}: sdpa {med['sdpa']:.3f} s, grouped {med[NAME]:.3f} s", file=sys.stderr, flush=True)
    kernel(NAME)

    table = [f"{model_name}, {dtype}, {threads} thread(s), {cfg.num_attention_heads} query / {heads} K/V heads. "
             f"A {QUESTION_TOKENS}-token question read after a cache of N tokens (random K/V, the same set for both "
             f"kernels), median of {runs - 1} runs after a first, the kernels alternating. Same output: a "
             f"{len(ids)}-token news text read in chunked calls and the question after it under each kernel: "
             f"K/V of every layer and both logits **{'bit-identical' if identical else 'DIFFERENT'}**.", "",
             "| cache tokens | transformers SDPA (copies K/V per query head) | GRM grouped kernel | speed-up |",
             "|---|---|---|---|"]
    for r in rows:
        table.append(f"| {r['cache_tokens']:,} | {r['sdpa_s']:.3f} s | {r['grouped_s']:.3f} s | {r['speedup']:.2f}x |")
    cmd = (f"python bench/attention.py --threads {threads}" + (f" --model {args.model}" if args.model else "")
           + (f" --sizes {' '.join(map(str, sizes))}" if tuple(sizes) != SIZES and not quick else ""))
    write_results("attention" + (f"-{args.model}" if args.model else ""),
                  {"model": model_name, "dtype": dtype, "threads": threads, "identical": identical, "rows": rows},
                  table, cmd, quick=quick)
    print("\n".join(table))
    return 0 if identical else 1


def flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--sizes", type=int, nargs="+", help=f"cache tokens (default {' '.join(map(str, SIZES))})")
    p.add_argument("--dtype", default="auto")


if __name__ == "__main__":
    run_cli(main, flags)
