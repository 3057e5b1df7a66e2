"""Decoding over a long arena: layers that grow in place (grm/kv/device.py ArenaLayer, the
default) against transformers' DynamicLayer, which concatenates the whole layer into a new tensor
for every token read.

For each context length: the model reads a document of that many tokens (sinks first) once, its
K/V are kept, and then, alternating between the two layer kinds, a cache is mounted over them
(`cache_from_kv`, as a warm answer mounts stored K/V) and `--new` tokens are decoded greedily one
forward call each (`logits_to_keep=1`). Reported: ms per decoded token (median of `--repeats`
alternating rounds, side by side, so machine load hits both alike), the ratio, and whether the two
decoded the same tokens (they must: the logits are bit-identical, tests/kv/test_device.py).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import news_corpus, run_cli, write_results  # noqa: E402

LENGTHS = (1024, 4096, 7000)


def decode(model, cache, first: int, seat: int, n: int) -> tuple[float, list[int]]:
    import torch

    from grm.kv.forward import prefill

    out, tok = [], first
    t = time.perf_counter()
    with torch.no_grad():
        for i in range(n):
            logits = prefill(model, cache, [tok], seat + i)
            tok = int(logits.argmax())
            out.append(tok)
    return (time.perf_counter() - t) / n, out


def main(args: argparse.Namespace) -> int:
    import torch
    from transformers.cache_utils import DynamicLayer

    from grm.kv import cache_from_kv, kv_from_cache, new_cache
    from grm.kv.forward import prefill
    from grm.models import load_model
    from grm.runtime.locations import default_cache_dir

    threads = args.threads or 1
    torch.set_num_threads(threads)
    model_name = args.model or "smollm2-135m"
    lm = load_model(model_name, default_cache_dir(), dtype=args.dtype)
    tok = lm.tokenizer
    text = "\n\n".join(news_corpus())
    ids = tok.encode(text)
    lengths = (1024, 2048) if args.quick else args.lengths
    rows = []
    for n in lengths:
        cache = new_cache()
        seat = 0
        with torch.no_grad():
            prefill(lm.model, cache, list(tok.sink_ids), 0)
            seat = len(tok.sink_ids)
            for i in range(0, n, 512):  # block by block, as ingest reads
                prefill(lm.model, cache, ids[i:min(n, i + 512)], seat)
                seat += min(n, i + 512) - i
        stored = kv_from_cache(cache)
        times: dict[str, list[float]] = {"in place": [], "concatenate": []}
        tokens: dict[str, list[int]] = {}
        for _ in range(args.repeats):
            for kind in times:
                c = cache_from_kv(stored)
                if kind == "concatenate":
                    c.layer_class_to_replicate = DynamicLayer
                    for i, layer in enumerate(c.layers):  # the mounted layers, as DynamicLayers over the same views
                        plain = DynamicLayer()
                        plain.lazy_initialization(layer.keys, layer.values)
                        plain.keys, plain.values = layer.keys, layer.values
                        c.layers[i] = plain
                per, out = decode(lm.model, c, ids[n], seat, args.new)
                times[kind].append(per)
                tokens[kind] = out
        a, b = statistics.median(times["in place"]), statistics.median(times["concatenate"])
        rows.append({"context_tokens": seat, "new_tokens": args.new, "in_place_ms": a * 1000,
                     "concatenate_ms": b * 1000, "speedup": b / a,
                     "same_tokens": tokens["in place"] == tokens["concatenate"],
                     "kv_mb": (stored.keys.nbytes + stored.values.nbytes) / 1e6})
        print(rows[-1], file=sys.stderr, flush=True)
    dtype = str(lm.model.dtype).replace("torch.", "")
    table = [f"{model_name}, {dtype}, {threads} torch thread(s); {args.new} tokens decoded one forward call each after a "
             f"mounted arena, median of {args.repeats} alternating rounds.", "",
             "| context tokens | arena K/V | in place (ArenaLayer) | concatenate (DynamicLayer) | speed-up | same tokens |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        table.append(f"| {r['context_tokens']} | {r['kv_mb']:.0f} MB | {r['in_place_ms']:.1f} ms/token | "
                     f"{r['concatenate_ms']:.1f} ms/token | {r['speedup']:.2f}x | {r['same_tokens']} |")
    name = "arena" if model_name == "smollm2-135m" else f"arena-{model_name}"
    flags = f" --model {model_name}" if args.model else ""
    write_results(name, {"model": model_name, "dtype": dtype, "threads": threads, "rows": rows}, table,
                  f"python bench/arena.py --threads {threads}{flags} --new {args.new} --repeats {args.repeats}",
                  quick=args.quick)
    print("\n".join(table))
    return 0


def _flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--lengths", type=int, nargs="+", default=list(LENGTHS), help="context lengths in tokens")
    p.add_argument("--new", type=int, default=32, help="tokens decoded per round (default 32)")
    p.add_argument("--repeats", type=int, default=3, help="alternating rounds (default 3)")
    p.add_argument("--dtype", default="auto", help="the model's compute dtype (default auto)")


if __name__ == "__main__":
    run_cli(main, _flags)
