"""The GPU gate: exact memory at real sizes on an accelerator, through GRM's own code.

On `random:llama-3-8b` in bf16 (seeded random weights: speed and memory only), for documents
of 8k and 32k tokens plus a short question:
- cold: `Runtime.exact_context` with nothing stored (the model reads every token; 512-token chunks);
- warm (store): a NEW process opens the store and asks the same prompt: blocks are read from the
  store, verified, and moved host->device layer by layer as the model needs them;
- warm (host plane): in that process, the same K/V held in pinned host memory (the host plane),
  mounted with `grm.kv.device.mount` (all layers copied on a side stream, the model waiting per
  layer) and the question read after it;
- raw pinned host->device bandwidth measured in the same run, and the mount's share of it;
- warm vs cold two-stage logits (the document read block by block as at ingest, then the
  question): bit-identical, or the max difference and top-1 agreement, stated;
- graft re-seat parity on the device (the dialect self-test on a 256-token probe);
- peak device memory vs the device's total.
Targets (issue 16, on one H200): warm (host plane) >= 10x faster than cold at 32k tokens, the
mount at >= 70% of raw host->device bandwidth.

`--device cpu --quick` runs the same steps on `random:llama-3-8b@small` at 512 and 2048 tokens
(CI runs it); its numbers say nothing about GPUs and are written as gpu-cpu-quick.*.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import write_results  # noqa: E402

SIZES = (8192, 32768)
QUICK_SIZES = (512, 2048)
MODEL, QUICK_MODEL = "random:llama-3-8b", "random:llama-3-8b@small"
QUESTION = "\n\nQuestion: which harbor opened first, and in which year?\nAnswer:"
WARM_RUNS = 3
PARITY_PROBE = 256  # tokens of the re-seat parity probe
WORDS = ("harbor station winter river orchard robot sensor village market frost north south meeting "
         "opened closed year light team water record member boat seal").split()


def document(tokens: int, seed: int) -> str:
    """Deterministic English-like text of `tokens` bytes (the random models read bytes)."""
    rng = random.Random(seed)
    out: list[str] = []
    size = 0
    while size < tokens:
        sentence = " ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 14))).capitalize() + ". "
        out.append(sentence)
        size += len(sentence)
    return "".join(out)[:tokens]


def _sync(device) -> None:
    import torch

    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


def _timed(fn, device):
    _sync(device)
    t = time.perf_counter()
    out = fn()
    _sync(device)
    return out, time.perf_counter() - t


def _release_device_memory() -> None:
    import gc

    import torch

    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def _open(store: Path, args: argparse.Namespace):
    from grm.runtime import Runtime

    return Runtime.open(store=store, model=args.model, device=args.device, dtype=args.dtype,
                        threads=args.threads, durability="normal")


def cold_phase(args: argparse.Namespace, work: Path) -> list[dict]:
    """This process: cold timings, cold two-stage logits, ingest."""
    import torch

    from grm.exact import split_blocks
    from grm.kv import new_cache
    from grm.kv.forward import prefill

    rows = []
    with _open(work / "store", args) as rt:
        dev, tok = rt.lm.model.device, rt.lm.tokenizer
        prefill(rt.lm.model, new_cache(), [65 + j % 26 for j in range(512)], 0)  # warm-up: kernels, allocator
        for i, size in enumerate(args.sizes):
            doc = document(size, seed=i)
            prompt = doc + QUESTION
            colds = []
            for _ in range(2):
                (_c, logits, seat, _m, _p), s = _timed(lambda: rt.exact_context(prompt), dev)
                colds.append(s)
                del _c
            # Two-stage cold: sinks, then the document block by block as ingest reads it, then the question.
            cache, seat = new_cache(), 0
            for ids in [list(tok.sink_ids)] + [list(b.ids) for b in split_blocks(doc, tok, rt.config.block_tokens)]:
                prefill(rt.lm.model, cache, ids, seat)
                seat += len(ids)
            two_stage = prefill(rt.lm.model, cache, tok.encode(QUESTION), seat)
            del cache
            torch.save(two_stage.cpu(), work / f"cold{i}.pt")
            (work / f"doc{i}.txt").write_text(doc, encoding="utf-8")
            _r, ingest_s = _timed(lambda: rt.ingest([work / f"doc{i}.txt"], progress=False), dev)
            rows.append({"tokens": seat + len(tok.encode(QUESTION)), "doc_tokens": len(tok.encode(doc)),
                         "cold_s": min(colds), "cold_first_s": colds[0], "ingest_s": ingest_s})
            (work / f"prompt{i}.txt").write_text(prompt, encoding="utf-8")
    return rows


def warm_phase(args: argparse.Namespace, work: Path) -> None:
    """The new process: warm from the store, warm from the host plane, logits, bandwidth, VRAM."""
    import torch

    from grm.dialects import self_test
    from grm.kv.device import host_to_device_bandwidth, mount, pinned
    from grm.kv.forward import prefill

    with _open(work / "store", args) as rt:
        dev, tok = rt.lm.model.device, rt.lm.tokenizer
        parity = self_test(rt.dialect, rt.lm.model, list(tok.sink_ids) + [97 + j % 26 for j in range(PARITY_PROBE)])
        for i in range(len(args.sizes)):
            prompt = (work / f"prompt{i}.txt").read_text(encoding="utf-8")
            cold = torch.load(work / f"cold{i}.pt")
            if dev.type == "cuda":
                torch.cuda.reset_peak_memory_stats(dev)
            stores, warm_logits, from_memory = [], None, 0
            for _ in range(WARM_RUNS):
                (cache, warm_logits, _seat, from_memory, _p), s = _timed(lambda: rt.exact_context(prompt), dev)
                stores.append(s)
                del cache
            prefix = rt.exact.load_prefix(prompt)
            assert not prefix.pending, "every block of the document must verify"
            host = pinned(prefix.kv)  # the host plane: verified K/V kept in pinned RAM
            rest = tok.encode(prefix.rest)  # what the pipeline reads after the served blocks
            hosts, mounts, host_logits = [], [], None
            for _ in range(WARM_RUNS):
                def ask():
                    cache = mount(host, dev)
                    return prefill(rt.lm.model, cache, rest, host.tokens)
                host_logits, s = _timed(ask, dev)
                hosts.append(s)

                def move():
                    cache = mount(host, dev)
                    cache.sync()
                    return cache
                _m, s = _timed(move, dev)
                mounts.append(s)
                del _m
            raw = host_to_device_bandwidth(host.nbytes, dev) if dev.type == "cuda" else None
            diff = (warm_logits.float().cpu() - cold).abs()
            print(json.dumps({
                "warm_store_s": statistics.median(stores), "warm_store_first_s": stores[0],
                "warm_host_s": statistics.median(hosts), "mount_s": min(mounts), "kv_bytes": host.nbytes,
                "mount_bytes_per_s": host.nbytes / min(mounts), "raw_bytes_per_s": raw,
                "tokens_from_memory": from_memory, "blocks": len(prefix.blocks),
                "logits_bit_identical": bool(torch.equal(warm_logits.float().cpu(), cold)),
                "logits_max_abs_diff": float(diff.max()),
                "top1_agree": int(warm_logits.argmax()) == int(cold.argmax()),
                "host_equals_store": bool(torch.equal(host_logits.cpu(), warm_logits.cpu())),
                "peak_device_bytes": torch.cuda.max_memory_allocated(dev) if dev.type == "cuda" else None,
                "device_total_bytes": torch.cuda.get_device_properties(dev).total_memory if dev.type == "cuda" else None,
                "reseat_parity_max_rel_error": parity.max_rel_error, "dtype": str(rt.lm.model.dtype),
                "device": str(dev), "identity": rt.lm.identity[:16],
            }), flush=True)


def main(args: argparse.Namespace) -> int:
    quick = bool(getattr(args, "quick", False))
    args.model = args.model or (QUICK_MODEL if quick else MODEL)
    args.device = getattr(args, "device", None) or "auto"
    args.dtype = getattr(args, "dtype", None) or "auto"
    args.threads = getattr(args, "threads", None) or 2
    args.sizes = QUICK_SIZES if quick else SIZES
    work = Path(tempfile.mkdtemp(prefix="grm-bench-gpu-"))
    t0 = time.perf_counter()
    cold = cold_phase(args, work)
    _release_device_memory()  # the warm process gets the device to itself
    cmd = [sys.executable, __file__, "--warm", str(work), "--model", args.model, "--device", args.device,
           "--dtype", args.dtype, "--threads", str(args.threads)] + (["--quick"] if quick else [])
    out = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, check=True).stdout
    warm = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    rows = []
    for c, w in zip(cold, warm):
        row = {**c, **w, "speedup_store": c["cold_s"] / w["warm_store_s"], "speedup_host": c["cold_s"] / w["warm_host_s"]}
        row["mount_share_of_raw"] = w["mount_bytes_per_s"] / w["raw_bytes_per_s"] if w["raw_bytes_per_s"] else None
        rows.append(row)
    on_gpu = bool(warm) and warm[0]["device"].startswith("cuda")
    big = rows[-1]
    targets = {"speedup_host_32k_ge_10": big["speedup_host"] >= 10 if on_gpu else None,
               "mount_share_ge_0.7": (big["mount_share_of_raw"] or 0) >= 0.7 if on_gpu else None,
               "top1_agree": all(r["top1_agree"] for r in rows)}
    table = ["| tokens | cold | warm (store, new process) | warm (host plane) | speed-up store / host | "
             "K/V | mount vs raw H2D | logits warm vs cold | peak device mem |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        bw = (f"{r['mount_bytes_per_s'] / 1e9:.1f} / {r['raw_bytes_per_s'] / 1e9:.1f} GB/s "
              f"({r['mount_share_of_raw']:.0%})" if r["raw_bytes_per_s"] else "n/a (no accelerator)")
        logits = ("bit-identical" if r["logits_bit_identical"] else
                  f"max diff {r['logits_max_abs_diff']:.2e}, top-1 {'same' if r['top1_agree'] else 'DIFFERS'}")
        peak = (f"{r['peak_device_bytes'] / 2**30:.1f} / {r['device_total_bytes'] / 2**30:.0f} GiB"
                if r["peak_device_bytes"] else "n/a")
        table.append(f"| {r['tokens']} | {r['cold_s']:.3f} s | {r['warm_store_s']:.3f} s | {r['warm_host_s']:.3f} s | "
                     f"{r['speedup_store']:.1f}x / {r['speedup_host']:.1f}x | {r['kv_bytes'] / 2**20:.1f} MiB | {bw} | "
                     f"{logits} | {peak} |")
    table += ["", "Targets: " + ", ".join(f"{k}: {v}" for k, v in targets.items()),
              "", f"Model {args.model} ({rows[0]['dtype'] if rows else '?'}, {rows[0]['device'] if rows else '?'}; "
              "random weights: timings only). Re-seat parity on the device (self-test, "
              f"{PARITY_PROBE}-token probe): max relative error {rows[0]['reseat_parity_max_rel_error']:.2e}. "
              "Cold = the model reads sinks + document + question (best of 2); warm (store) = a new process, "
              f"blocks read + verified from the store and moved to the device per layer (median of {WARM_RUNS}); "
              "warm (host plane) = the same K/V from pinned RAM, mounted layer by layer on a side stream, then "
              "the question. Logits compare the warm answer with the cold two-stage reading (document block by "
              "block, then the question)."]
    name = "gpu" if on_gpu else f"gpu-{warm[0]['device'] if warm else 'cpu'}"
    command = f"grm bench gpu --device {args.device} --dtype {args.dtype}"
    write_results(name, {"model": args.model, "wall_s": time.perf_counter() - t0, "rows": rows, "targets": targets},
                  table, command, quick=quick)
    print("\n".join(table))
    return 0


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser()
    p.add_argument("--warm", metavar="WORKDIR", default=None)
    p.add_argument("--model", default=None)
    p.add_argument("--device", default="auto")
    p.add_argument("--dtype", default="auto")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--quick", action="store_true")
    return p


if __name__ == "__main__":
    a = _parser().parse_args()
    if a.warm:
        a.sizes = QUICK_SIZES if a.quick else SIZES
        warm_phase(a, Path(a.warm))
    else:
        sys.exit(main(a))
