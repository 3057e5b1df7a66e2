"""The GPU gate: exact memory at real sizes on an accelerator, through GRM's own code.

On `random:llama-3-8b` in bf16 (seeded random weights: speed and memory only), for documents
of 8k and 32k tokens plus a short question:
- cold: `Runtime.exact_context` with nothing stored (the model reads every token; 512-token chunks);
- warm (store): a NEW process opens the store and asks the same prompt with no host tier, so
  every ask reads the blocks from the store, verifies them and places them on the device
  (grm/exact/load.py: a worker per core, page-locked staging, copies on a side stream);
- warm (host tier): in that process, a runtime keeping verified blocks in page-locked RAM
  (`host_budget`, grm/exact/tier.py): after one ask fills it, asks mount from RAM; and the same
  through a server request (`/v1/completions` of the OpenAI-compatible app, in process, over the
  same resident runtime: its time to first token as the server reports it, and the call's wall);
- where the time goes, per size: the load's wall (read + verify + place, overlapped) beside the
  raw parallel reads and raw parallel SHA-256 of the same files on the same thread count, the
  host->device copy of the same bytes at the raw pinned rate, and the model's part;
- warm vs cold two-stage logits (the document read block by block as at ingest, then the
  question): bit-identical, or the max difference and top-1 agreement, stated; the host tier's
  logits equal the store's;
- re-seat parity on the device (the dialect self-test on a 256-token probe: raw error, the model's
  own position noise, the excess the gate holds; reported, never raised);
- peak device memory vs the device's total.
Targets (issue 33, on one H200): warm from the store in a new process >= 6x cold at 32k, warm from
the host tier through a server request >= 30x cold at 32k, logits bit-identical, re-seat parity
passing in bf16.

`--device cpu --quick` runs the same steps on `random:llama-3-8b@small` at 512 and 2048 tokens
(CI runs it); its numbers say nothing about GPUs and are written as gpu-cpu-quick.*.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import RawBandwidth, tag_flag, tagged, write_results  # noqa: E402

SIZES = (8192, 32768)
QUICK_SIZES = (512, 2048)
MODEL, QUICK_MODEL = "random:llama-3-8b", "random:llama-3-8b@small"
QUESTION = "\n\nQuestion: which harbor opened first, and in which year?\nAnswer:"
WARM_RUNS = 3
PARITY_PROBE = 256  # tokens of the re-seat parity probe
HOST_BUDGET, QUICK_HOST_BUDGET = 8 << 30, 256 << 20  # the warm process's host tier (both documents fit)
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


def _open(store: Path, args: argparse.Namespace, host_budget: int = 0):
    from grm.runtime import Runtime

    return Runtime.open(store=store, model=args.model, device=args.device, dtype=args.dtype,
                        threads=args.threads, durability="normal", host_budget=host_budget)


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
            _r, ingest_s = _timed(lambda: rt.ingest([work / f"doc{i}.txt"], layout="both", progress=False), dev)
            rows.append({"tokens": seat + len(tok.encode(QUESTION)), "doc_tokens": len(tok.encode(doc)),
                         "cold_s": min(colds), "cold_first_s": colds[0], "ingest_s": ingest_s})
            (work / f"prompt{i}.txt").write_text(prompt, encoding="utf-8")
    return rows


def _ask_and_load(rt, prompt: str, dev) -> tuple[list[float], list[float], list[dict], object, int, object]:
    """WARM_RUNS times, timed: the pipeline's ask (`exact_context`) and the load alone
    (`load_prefix`). Returns (ask seconds, load seconds, the loads' own splits, the last ask's
    logits, its tokens from memory, the last prefix)."""
    asks, loads, splits, logits, from_memory, prefix = [], [], [], None, 0, None
    for _ in range(WARM_RUNS):
        (cache, logits, _seat, from_memory, _p), s = _timed(lambda: rt.exact_context(prompt), dev)
        asks.append(s)
        del cache, _p, prefix
        prefix, s = _timed(lambda: rt.exact.load_prefix(prompt), dev)
        loads.append(s)
        splits.append(prefix.seconds)
    return asks, loads, splits, logits, from_memory, prefix


class _Server:
    """The OpenAI-compatible app over the resident runtime, called in process (no socket)."""

    def __init__(self, rt) -> None:
        from starlette.testclient import TestClient

        from grm.serve.app import create_app
        from grm.serve.config import ServeConfig
        from grm.serve.engine import Engine
        from grm.serve.metrics import Metrics

        config = ServeConfig(no_auth=True, tenant=rt.config.tenant, timeout_s=600.0)
        metrics = Metrics()
        self.engine = Engine(rt, config, metrics).start()
        self.client = TestClient(create_app(self.engine, config, None, metrics))
        self.model = rt.lm.name

    def complete(self, prompt: str) -> tuple[dict, float]:
        t = time.perf_counter()
        r = self.client.post("/v1/completions", json={"model": self.model, "prompt": prompt, "max_tokens": 1})
        wall = time.perf_counter() - t
        if r.status_code != 200:
            raise RuntimeError(f"the server answered {r.status_code}: {r.text[:300]}")
        return r.json(), wall

    def close(self) -> None:
        self.engine.close(timeout=60)  # drains, then closes the runtime and its store


def warm_phase(args: argparse.Namespace, work: Path) -> None:
    """The new process: warm from the store, from the host tier (runtime and server), the time
    split, logits, bandwidth, re-seat parity, VRAM."""
    import torch

    from grm.dialects import measure_selftest
    from grm.kv.device import host_to_device_bandwidth
    from grm.store.kinds import SINKS
    from grm.store.tenant import SYSTEM_TENANT

    rt = _open(work / "store", args, host_budget=QUICK_HOST_BUDGET if args.quick else HOST_BUDGET)
    dev, tok, tier = rt.lm.model.device, rt.lm.tokenizer, rt.exact.tier
    parity = measure_selftest(rt.dialect, rt.lm.model, list(tok.sink_ids) + [97 + j % 26 for j in range(PARITY_PROBE)])
    server = _Server(rt)
    for i in range(len(args.sizes)):
        prompt = (work / f"prompt{i}.txt").read_text(encoding="utf-8")
        cold = torch.load(work / f"cold{i}.pt")
        if dev.type == "cuda":
            torch.cuda.reset_peak_memory_stats(dev)
        # 1. From the store: no host tier, so every ask reads, verifies and places every block.
        rt.exact.tier = None
        stores, loads, splits, warm_logits, from_memory, prefix = _ask_and_load(rt, prompt, dev)
        assert not prefix.pending, "every block of the document must verify"
        kv_bytes, blocks = prefix.kv.nbytes, list(prefix.blocks)
        del prefix
        raw = RawBandwidth([rt.store.payload_path(r) for r in
                            [rt.store.get(SYSTEM_TENANT, SINKS, rt.exact.sink_fp), *blocks]])
        workers = rt.exact.workers
        read_s, sha_s = min(raw.read_s(workers) for _ in range(2)), min(raw.sha256_s(workers) for _ in range(2))
        payload_bytes = raw.nbytes
        raw.close()
        # 2. From the host tier: one ask fills it (a store read), then asks mount from RAM.
        rt.exact.tier = tier
        rt.exact_context(prompt)
        hosts, tier_loads, _splits, host_logits, _m, _p = _ask_and_load(rt, prompt, dev)
        del _p
        # 3. Through a server request over the same resident runtime (the first stores the question).
        served = [server.complete(prompt) for _ in range(WARM_RUNS + 1)]
        ttfts = [body["grm"]["ttft_s"] for body, _wall in served[1:]]
        walls = [wall for _body, wall in served[1:]]
        cached = served[-1][0]["usage"].get("prompt_tokens_details", {}).get("cached_tokens", 0)
        raw_h2d = host_to_device_bandwidth(min(kv_bytes, 1 << 30), dev) if dev.type == "cuda" else None
        diff = (warm_logits.float().cpu() - cold).abs()
        load, tier_load = statistics.median(loads), statistics.median(tier_loads)
        split = splits[loads.index(sorted(loads)[len(loads) // 2])]
        print(json.dumps({
            "warm_store_s": statistics.median(stores), "warm_store_first_s": stores[0],
            "warm_host_s": statistics.median(hosts), "serve_ttft_s": statistics.median(ttfts),
            "serve_ttft_first_s": served[0][0]["grm"]["ttft_s"], "serve_wall_s": statistics.median(walls),
            "serve_cached_tokens": cached, "kv_bytes": kv_bytes, "payload_bytes": payload_bytes,
            "tokens_from_memory": from_memory, "blocks": len(blocks), "read_workers": workers,
            "split": {"load_s": load, "load_first_s": loads[0], "fetch_s": split.get("fetch"),
                      "commit_s": split.get("commit"), "raw_read_s": read_s, "raw_sha256_s": sha_s,
                      "h2d_s": kv_bytes / raw_h2d if raw_h2d else None,
                      "model_s": max(0.0, statistics.median(stores) - load),
                      "tier_load_s": tier_load, "tier_model_s": max(0.0, statistics.median(hosts) - tier_load)},
            "mount_s": tier_load, "mount_bytes_per_s": kv_bytes / tier_load, "raw_bytes_per_s": raw_h2d,
            "logits_bit_identical": bool(torch.equal(warm_logits.float().cpu(), cold)),
            "logits_max_abs_diff": float(diff.max()),
            "top1_agree": int(warm_logits.argmax()) == int(cold.argmax()),
            "host_equals_store": bool(torch.equal(host_logits.cpu(), warm_logits.cpu())),
            "tier": rt.tier.stats(rt.config.tenant),
            "peak_device_bytes": torch.cuda.max_memory_allocated(dev) if dev.type == "cuda" else None,
            "device_total_bytes": torch.cuda.get_device_properties(dev).total_memory if dev.type == "cuda" else None,
            "reseat_parity_max_rel_error": parity.max_rel_error, "reseat_parity_floor": parity.floor,
            "reseat_parity_excess": parity.excess, "reseat_parity_tolerance": parity.tolerance,
            "reseat_parity_passed": parity.passed, "dtype": str(rt.lm.model.dtype),
            "device": str(dev), "identity": rt.lm.identity[:16],
        }), flush=True)
    server.close()


def _ms(seconds: float | None) -> str:
    return "n/a" if seconds is None else f"{seconds * 1000:.0f} ms"


def main(args: argparse.Namespace) -> int:
    quick = bool(getattr(args, "quick", False))
    args.model = args.model or (QUICK_MODEL if quick else MODEL)
    args.device = getattr(args, "device", None) or "auto"
    args.dtype = getattr(args, "dtype", None) or "auto"
    args.threads = getattr(args, "threads", None) or 2
    args.sizes = QUICK_SIZES if quick else SIZES
    work = Path(tempfile.mkdtemp(prefix="grm-bench-gpu-"))
    try:
        t0 = time.perf_counter()
        cold = cold_phase(args, work)
        _release_device_memory()  # the warm process gets the device to itself
        cmd = [sys.executable, __file__, "--warm", str(work), "--model", args.model, "--device", args.device,
               "--dtype", args.dtype, "--threads", str(args.threads)] + (["--quick"] if quick else [])
        out = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, check=True).stdout
    finally:
        shutil.rmtree(work, ignore_errors=True)  # the store and the cold logits: GBs at 32k tokens
    warm = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    rows = []
    for c, w in zip(cold, warm):
        row = {**c, **w, "speedup_store": c["cold_s"] / w["warm_store_s"], "speedup_host": c["cold_s"] / w["warm_host_s"],
               "speedup_serve": c["cold_s"] / w["serve_ttft_s"]}
        row["mount_share_of_raw"] = w["mount_bytes_per_s"] / w["raw_bytes_per_s"] if w["raw_bytes_per_s"] else None
        rows.append(row)
    on_gpu = bool(warm) and warm[0]["device"].startswith("cuda")
    big = rows[-1]
    targets = {"speedup_store_new_process_32k_ge_6": big["speedup_store"] >= 6 if on_gpu else None,
               "speedup_host_tier_server_32k_ge_30": big["speedup_serve"] >= 30 if on_gpu else None,
               "logits_bit_identical": all(r["logits_bit_identical"] for r in rows),
               "reseat_parity_passed": all(r["reseat_parity_passed"] for r in rows),
               "top1_agree": all(r["top1_agree"] for r in rows)}
    table = ["| tokens | cold | warm (store, new process) | warm (host tier: runtime; server TTFT) | speed-up store / "
             "tier / server | K/V | tier mount vs raw H2D | logits warm vs cold | peak device mem |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        bw = (f"{r['mount_bytes_per_s'] / 1e9:.1f} / {r['raw_bytes_per_s'] / 1e9:.1f} GB/s "
              f"({r['mount_share_of_raw']:.0%})" if r["raw_bytes_per_s"] else "n/a (no accelerator)")
        logits = ("bit-identical" if r["logits_bit_identical"] else
                  f"max diff {r['logits_max_abs_diff']:.2e}, top-1 {'same' if r['top1_agree'] else 'DIFFERS'}")
        peak = (f"{r['peak_device_bytes'] / 2**30:.1f} / {r['device_total_bytes'] / 2**30:.0f} GiB"
                if r["peak_device_bytes"] else "n/a")
        table.append(f"| {r['tokens']} | {r['cold_s']:.3f} s | {r['warm_store_s']:.3f} s (first {r['warm_store_first_s']:.3f} s) | "
                     f"{r['warm_host_s']:.3f} s; {r['serve_ttft_s']:.3f} s | {r['speedup_store']:.1f}x / "
                     f"{r['speedup_host']:.1f}x / {r['speedup_serve']:.1f}x | {r['kv_bytes'] / 2**20:.1f} MiB | {bw} | "
                     f"{logits} | {peak} |")
    table += ["", "Where the time goes (medians; raw figures on the same files and thread count):", "",
              "| tokens | cold: model | store load (first) | of it: fetch / commit | raw read | raw SHA-256 | "
              "H2D at raw rate | store: model | tier load | tier: model | server wall |",
              "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        s = r["split"]
        table.append(f"| {r['tokens']} | {_ms(r['cold_s'])} | {_ms(s['load_s'])} ({_ms(s['load_first_s'])}) | "
                     f"{_ms(s['fetch_s'])} / {_ms(s['commit_s'])} | {_ms(s['raw_read_s'])} | {_ms(s['raw_sha256_s'])} | "
                     f"{_ms(s['h2d_s'])} | {_ms(s['model_s'])} | {_ms(s['tier_load_s'])} | {_ms(s['tier_model_s'])} | "
                     f"{_ms(r['serve_wall_s'])} |")
    first = rows[0] if rows else {}
    table += ["", "Targets: " + ", ".join(f"{k}: {v}" for k, v in targets.items()),
              "", f"Model {args.model} ({first.get('dtype', '?')}, {first.get('device', '?')}; random weights: timings "
              f"only); {first.get('read_workers', '?')} read workers. Re-seat parity on the device (self-test, "
              f"{PARITY_PROBE}-token probe): raw {first.get('reseat_parity_max_rel_error', float('nan')):.2e}, the "
              f"model's own drift {first.get('reseat_parity_floor', float('nan')):.2e}, excess "
              f"{first.get('reseat_parity_excess', float('nan')):.2e} vs tolerance "
              f"{first.get('reseat_parity_tolerance', float('nan')):.0e}: "
              f"{'passes' if first.get('reseat_parity_passed') else 'FAILS'}. "
              "Cold = the model reads sinks + document + question (best of 2); warm (store) = a new process "
              f"without host tier, blocks read + verified + placed on the device (median of {WARM_RUNS}; the first "
              "pays for the page-locked staging buffers once); warm (host tier) = the same process keeping "
              "verified blocks in page-locked RAM: a runtime's ask, and a server request's time to first token "
              f"(the app in process over the same runtime; median of {WARM_RUNS} after one that stores the "
              "question). Store load = ExactMemory.load_prefix, synchronized; fetch = its parallel part, commit = "
              "the loading thread starting copies; model = the ask minus the load. Logits compare the warm "
              "answer with the cold two-stage reading (document block by block, then the question)."]
    name = "gpu" if on_gpu else f"gpu-{warm[0]['device'] if warm else 'cpu'}"
    command = f"grm bench gpu --device {args.device} --dtype {args.dtype} --threads {args.threads}"
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
    tag_flag(p)
    return p


if __name__ == "__main__":
    a = tagged(_parser().parse_args())
    if a.warm:
        a.sizes = QUICK_SIZES if a.quick else SIZES
        warm_phase(a, Path(a.warm))
    else:
        sys.exit(main(a))
