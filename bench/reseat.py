"""Re-seat parity by probe length: the rotary self-test's figures in a 16-bit dtype.

For each model, probe text and length (16, 64, 256, 1,024 tokens after the sinks) the self-test reads
the probe at seats 0.. and at 37.., re-seats the first run's keys by 37 and compares
(grm/dialects/selftest.py): `raw` is the max relative error of re-seated vs forward keys (what the
gate compared before), `floor` the values' own drift between the two runs (the model's position
noise: values carry no rotation, so in exact arithmetic they would not move), `excess` the
re-seat's error beyond that floor, per layer (what the gate holds to the dtype's tolerance now).
Also: how many re-seated keys the fp32 rotation rounds differently from a float64 one.

Default models: CPU, the three `random:...@small` geometries and tiny-random-llama; CUDA
(`--device cuda`), the full random:llama-3-8b, random:qwen3-4b and random:gemma-3-4b. `--model`
runs one model (e.g. a real one: `--model PATH --dtype bfloat16`). A failing probe is a row of
the table, never a crash.
"""

from __future__ import annotations

import argparse
import gc
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import run_cli, write_results  # noqa: E402

PROBES = (16, 64, 256, 1024)
CPU_MODELS = ("random:llama-3-8b@small", "random:qwen3-4b@small", "random:gemma-3-4b@small", "tiny-random-llama")
CUDA_MODELS = ("random:llama-3-8b", "random:qwen3-4b", "random:gemma-3-4b")
WORDS = ("the station harbor seal boat winter river orchard apple robot wheel sensor light team morning water "
         "village market frost meeting member record north south opened closed year").split()


def probe_texts() -> dict[str, str]:
    """The probes: English-like random words, and the runtime's own probe sentence repeated (a
    periodic text: the model's position noise is larger on it)."""
    import random

    from grm.dialects.selftest import PROBE_TEXT

    rng = random.Random(7)
    return {"words": " ".join(rng.choice(WORDS) for _ in range(2000)).capitalize() + ".",
            "repeated": " ".join([PROBE_TEXT] * 200)}


def rounding_differences(dialect, keys) -> float:
    """Share of re-seated key elements the fp32 rotation rounds differently from a float64 one."""
    import torch

    from grm.dialects.rotary import rotate_half

    inv = dialect.inv_freq[0]
    angles = 37.0 * inv.to(keys.device, torch.float64)
    emb = torch.cat((angles, angles))
    k64 = keys.to(torch.float64)
    ref = (k64 * emb.cos() + rotate_half(k64) * emb.sin()).to(keys.dtype)
    return float((dialect.reseat(keys, 0, 37) != ref).float().mean())


def measure_model(name: str, device: str, dtype: str, probes: tuple[int, ...]) -> list[dict]:
    import torch

    from grm.dialects import dialect_for, measure_selftest
    from grm.kv import new_cache
    from grm.kv.forward import prefill
    from grm.models import load_model
    from grm.runtime.config import default_cache_dir

    lm = load_model(name, default_cache_dir(), device=device, dtype=dtype)
    dialect = dialect_for(lm.model)
    rows = []
    for kind, text in probe_texts().items():
        ids = list(lm.tokenizer.encode(text))
        for n in probes:
            t = time.perf_counter()
            r = measure_selftest(dialect, lm.model, list(lm.tokenizer.sink_ids) + ids[:n])
            cache = new_cache()
            prefill(lm.model, cache, ids[:n], 0)
            keys = cache.layers[0].keys[0]  # layer 0 [kv_heads, tokens, head_dim], rotated to seats 0..n-1
            rows.append({"model": name, "dtype": str(lm.model.dtype).removeprefix("torch."),
                         "device": str(lm.model.device), "layers": dialect.n_layers, "probe": kind,
                         "probe_tokens": n, "raw": r.max_rel_error, "floor": r.floor, "excess": r.excess,
                         "tolerance": r.tolerance, "passed": r.passed,
                         "raw_within_tolerance": r.max_rel_error <= r.tolerance,
                         "fp32_vs_fp64_rotation_differs": rounding_differences(dialect, keys),
                         "seconds": time.perf_counter() - t})
            print(f"{name} {kind} {n}: raw {r.max_rel_error:.2e} floor {r.floor:.2e} excess {r.excess:.2e} "
                  f"({'pass' if r.passed else 'FAIL'})", file=sys.stderr, flush=True)
    del lm
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    return rows


def main(args: argparse.Namespace) -> int:
    device = getattr(args, "device", None) or "cpu"
    dtype = getattr(args, "dtype", None) or "auto"
    dtype = "bfloat16" if dtype == "auto" else dtype
    probes = PROBES[:2] if getattr(args, "quick", False) else PROBES
    models = [args.model] if args.model else list(CUDA_MODELS if device.startswith("cuda") else CPU_MODELS)
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    rows = []
    for name in models:
        try:
            rows += measure_model(name, device, dtype, probes)
        except Exception as exc:  # a model that cannot load or run here is a row, not a crash
            rows.append({"model": name, "error": f"{type(exc).__name__}: {exc}"})
    table = ["| model | dtype, device | probe | tokens | raw (re-seated vs forward) | floor (values' own drift) | "
             "excess (gate) | tolerance | verdict | raw within tolerance (old gate) | fp32 vs fp64 rotation |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "error" in r:
            table.append(f"| {r['model']} | | | | {r['error']} | | | | not measured | | |")
            continue
        table.append(f"| {r['model']} ({r['layers']} layers) | {r['dtype']}, {r['device']} | {r['probe']} | {r['probe_tokens']} | "
                     f"{r['raw']:.2e} | {r['floor']:.2e} | {r['excess']:.2e} | {r['tolerance']:.0e} | "
                     f"{'pass' if r['passed'] else 'FAIL'} | {'yes' if r['raw_within_tolerance'] else 'no'} | "
                     f"{r['fp32_vs_fp64_rotation_differs']:.1e} of elements differ |")
    table += ["", "raw = max over layers of the relative error of keys re-seated by 37 vs a forward pass at +37 "
              "(max |diff| / max |key|); floor = the same measure on the values of the two passes (no rotation "
              "touches them: what the model's own rounding moves between two starting seats); excess = max over "
              "layers of (key error - value drift), held to the dtype's tolerance by the self-test. Probe: the "
              "sinks, then the first N tokens of a fixed text: `words` (English-like random words) or `repeated` "
              "(the runtime's probe sentence over and over). The last column compares the re-seat's "
              "fp32 rotation with a float64 one on layer 0's keys, both rounded once to the dtype."]
    slug = "" if not args.model else "-" + re.sub(r"[^a-z0-9.]+", "-", Path(args.model).name.lower()).strip("-")
    name = "reseat" + ("-cuda" if device.startswith("cuda") and not args.model else "") + slug
    command = f"grm bench reseat --device {device} --dtype {dtype}" + (f" --model {args.model}" if args.model else "")
    write_results(name, {"rows": rows, "probes": list(probes)}, table, command, quick=getattr(args, "quick", False))
    print("\n".join(table))
    return 0


if __name__ == "__main__":
    def _flags(p: argparse.ArgumentParser) -> None:
        p.add_argument("--device", default="cpu")
        p.add_argument("--dtype", default="auto")

    run_cli(main, _flags)
