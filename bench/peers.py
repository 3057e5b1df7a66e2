"""Peers: GRM next to what a user would pick instead, on the same GGUF and the same tokens.

On the real model (Qwen2.5-Coder-1.5B-Instruct Q4_K_M), at 2k / 8k / 16k tokens of real news text
(32k by `--sizes 32768`: the most the window holds) plus a question, both sides at the same
thread count:

- llama.cpp (llama-cpp-python, built from source in its own venv: `make peers-venv`; it runs in
  subprocesses, bench/lib/llama_peer.py, so GRM's venv never imports it), on the GGUF itself, in
  its 4-bit kernels: cold time to first token, the state saved with the state file API, warm
  time to first token from that file in a NEW process (and that process's wall time), the state
  file's bytes;
- GRM in the dtype `--dtype` picks (auto: bf16 on this CPU): cold (`ask --mode exact` with memory
  off), the document ingested (default layout), warm from the store in a NEW process (`grm ask
  --mode exact --prompt-file`: time to first token and the process's wall time), warm in a
  resident runtime (the store open, the same prompt asked again), the store's bytes on disk per
  document token;
- the floor: a transformers in-process prefix cache on GRM's model (a DynamicCache holding the
  sinks and the document, prefilled once), the question answered from a copy of it.

Every side reads the same token ids: GRM's sinks (the chat template's head) and the document's
stored blocks, then the rest of the prompt tokenized alone (what GRM's warm path reads); the ids
are handed to llama.cpp, so no tokenizer difference enters. Warm runs of the two peers alternate
(both from a page cache the cold runs just filled). GRM's warm path is split by stage in a
separate instrumented new process (timers wrapped around the functions it calls; nothing changed).
Targets (issue 32): GRM warm TTFT <= llama.cpp's state restore at every size, and <= 1.5x the floor.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path

T_START = time.perf_counter()
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import news_corpus, run_cli, write_results  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
MODEL = "qwen2.5-coder-1.5b"  # the real model; --model takes another registry name or a .gguf path
SIZES = (2048, 8192, 16384)
QUICK_SIZES = (256, 512)
RUNS = 3
QUESTION = "\n\nQuestion: Which places and people are named in the first article above?\nAnswer:"
PEERS_VENV = ROOT / ".peers-venv"
LLAMA_CPP = "llama-cpp-python==0.3.36"
PEER_SCRIPT = ROOT / "bench" / "lib" / "llama_peer.py"
# Every process here (both peers' OpenMP pools: torch's and llama.cpp's) yields its cores while it
# waits instead of spinning: on 2 cores shared with other work, spinning threads that wait for a
# descheduled one made a 22-token read 3-4x slower on both sides (llama.cpp 4.0 s vs 1.4 s passive).
OMP_WAIT = "PASSIVE"
BUILD = ("make peers-venv  (python3.11 -m venv .peers-venv; CMAKE_ARGS='-DGGML_NATIVE=ON -DLLAVA_BUILD=OFF' "
         f".peers-venv/bin/pip install --no-cache-dir {LLAMA_CPP}: a C/C++ compiler and cmake)")


# ----- shared helpers ---------------------------------------------------------------------------
def build_docs(tok, targets: list[int]) -> list[str]:
    """One document per target: whole news articles joined by blank lines, each document starting
    where the previous one stopped (no two share a first block), cut at a sentence near `target`
    tokens and ending with a newline, as a pasted text file does."""
    arts = news_corpus()
    docs, at = [], 0
    for target in targets:
        text = ""
        while len(tok.encode(text)) < target:
            if at >= len(arts):
                raise SystemExit(f"the news corpus holds too few tokens for documents of {targets}")
            text += arts[at] + "\n\n"
            at += 1
        cut = tok.decode(tok.encode(text)[:target])
        end = max(cut.rfind(". "), cut.rfind(".\n"))
        docs.append((cut[: end + 1] if end > 0 else cut) + "\n")
    return docs


def store_bytes(path: Path) -> int:
    """Bytes of every file under the store (payloads, log, checkpoints, catalog)."""
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def gguf_path(model: str, cache_dir: Path) -> Path:
    """The GGUF file GRM materialized `model` from (a registry name or a .gguf path)."""
    from grm.models.install import locate_gguf
    from grm.models.registry import MODELS

    spec = MODELS.get(model)
    if spec is None:
        path = Path(model).expanduser()
        if path.suffix == ".gguf" and path.is_file():
            return path
        raise SystemExit(f"peers needs a GGUF: {model!r} is neither a registry model with one nor a .gguf file")
    if spec.parts:  # joined once into the model cache by the loader
        path = cache_dir / "models" / f"{spec.name}.gguf"
        if not path.is_file():
            raise SystemExit(f"{path} is missing: load the model once (grm ask --model {model} ...) to join it")
        return path
    return locate_gguf(spec, cache_dir / "models")


def median(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


class Stages:
    """Wall-clock seconds per named stage, summed over calls (calls made on pool threads sum
    their threads' time: the wall share of those is the enclosing stage's)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self._lock = threading.Lock()

    def wrap(self, owner: object, attr: str, name: str, static: bool = False) -> None:
        fn = getattr(owner, attr)

        def timed(*a, **k):
            t = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                with self._lock:
                    self.seconds[name] += time.perf_counter() - t
        setattr(owner, attr, staticmethod(timed) if static else timed)

    def take(self) -> dict[str, float]:
        out = dict(self.seconds)
        self.seconds.clear()
        return out


# ----- workers (new processes) ------------------------------------------------------------------
def worker_prepare(work: Path) -> None:
    """GRM's first process: per size, cold (memory off), ingest (default layout) with the store's
    growth, the ids every side reads, and the floor (a transformers DynamicCache of the prefix,
    the question answered from a deep copy of it)."""
    import copy

    import torch
    from transformers import DynamicCache

    from grm.kv.forward import prefill
    from grm.runtime import Runtime
    from grm.runtime.answer import exact_prompt

    p = json.loads((work / "params.json").read_text())
    store = work / "store"
    opts = {"dtype": p["dtype"]} if p["dtype"] else {}
    out = []
    with Runtime.open(store=store, model=p["model"], threads=p["threads"], **opts) as rt:
        tok, model = rt.lm.tokenizer, rt.lm.model
        sinks = list(tok.sink_ids)
        room = rt.dialect.max_positions - rt.exact.config.window_reserve - len(sinks) - 8
        targets = [min(s, room) for s in p["sizes"]]
        docs = build_docs(tok, targets)
        rt.exact.sinks()  # stored once per model before any document: not charged to the first one
        for size, doc in zip(p["sizes"], docs):
            text = doc + QUESTION
            (work / f"prompt-{size}.txt").write_text(text, encoding="utf-8")
            (work / f"doc-{size}.txt").write_text(doc, encoding="utf-8")
            cold = rt.ask(text, mode="exact", memory=False, max_new_tokens=1)
            before = store_bytes(store)
            t = time.perf_counter()
            rt.ingest([work / f"doc-{size}.txt"], progress=False)
            ingest_s = time.perf_counter() - t
            grown = store_bytes(store) - before
            # the default layout (`seen`) stores the document's chain when a prompt first reads it: that
            # first prompt, here, is what the state llama.cpp restores was made by (its one read)
            rt.ask(text, mode="exact", max_new_tokens=1)
            grown_first = store_bytes(store) - before
            prompt = exact_prompt(rt.ctx, text, False)
            blocks, _fps, covered = rt.exact.match(prompt)
            prefix_ids = sinks + [i for b in blocks for i in b.ids]
            rest_ids = tok.encode(prompt.encode()[covered:].decode("utf-8"))
            doc_tokens = len(prefix_ids) - len(sinks)
            with torch.no_grad():
                cache = DynamicCache()
                t = time.perf_counter()
                prefill(model, cache, prefix_ids, 0)
                floor_prefix_s = time.perf_counter() - t
                floors, copies, token = [], [], None
                for _ in range(p["runs"]):
                    t = time.perf_counter()
                    c = copy.deepcopy(cache)
                    copies.append(time.perf_counter() - t)
                    token = int(torch.argmax(prefill(model, c, rest_ids, len(prefix_ids))))
                    floors.append(time.perf_counter() - t)
                    del c
                del cache
            out.append({"size": size, "doc_tokens": doc_tokens, "doc_bytes": len(doc.encode()),
                        "grm_dtype": str(model.dtype).replace("torch.", ""),
                        "sink_tokens": len(sinks), "prefix_ids": prefix_ids, "rest_ids": rest_ids,
                        "grm_cold_ttft_s": cold.ttft_s, "grm_cold_prompt_tokens": cold.prompt_tokens,
                        "grm_cold_answer": cold.answer, "ingest_s": ingest_s, "store_grew_bytes": grown,
                        "store_grew_after_first_prompt_bytes": grown_first,
                        "store_bytes_per_doc_token": grown / doc_tokens, "floor_prefix_prefill_s": floor_prefix_s,
                        "floor_ttft_s": median(floors), "floor_ttft_runs_s": floors, "floor_copy_s": median(copies),
                        "floor_first_token": token, "floor_first_piece": tok.decode([token])})
            print(f"peers: prepared {size}: cold {cold.ttft_s:.1f} s, ingest {ingest_s:.1f} s, "
                  f"floor {median(floors):.3f} s", file=sys.stderr, flush=True)
    (work / "prepare.json").write_text(json.dumps(out))


def worker_warm(work: Path, size: int) -> None:
    """A new GRM process on the ingested store, instrumented: Runtime.open by stage, then the
    warm ask split by stage (time to first token), then the same prompt asked again in this
    runtime (resident), and the raw read + SHA-256 of the payload files it loaded."""
    import hashlib

    stages = Stages()
    t = time.perf_counter()
    import torch  # noqa: F401  (timed as part of the imports)

    import grm.runtime.answer as answer
    import grm.runtime.execute as execute
    import grm.runtime.runtime as runtime_mod
    from grm.exact.memory import ExactMemory
    from grm.kv.payload import KV
    from grm.runtime import Runtime
    from grm.store.kinds import SINKS
    from grm.store.store import Store
    from grm.store.tenant import SYSTEM_TENANT
    import_s = time.perf_counter() - t + (t - T_START)

    for attr in ("load_model", "dialect_for", "kept_self_test", "open_backend"):
        stages.wrap(runtime_mod, attr, f"open.{attr}")
    for attr, name in (("match", "match (catalog walk)"), ("_walk", "load (walk: sinks + blocks)"),
                       ("sinks", "  sinks"), ("verified", "  verify bound fields + parse")):
        stages.wrap(ExactMemory, attr, name)
    stages.wrap(Store, "read_payload", "  read_payload (file read + SHA-256; thread time)")
    stages.wrap(KV, "from_bytes", "    parse payload (KV.from_bytes)", static=True)
    stages.wrap(KV, "cat", "  concatenate blocks (KV.cat)", static=True)
    stages.wrap(answer, "cache_from_kv", "arena (cache_from_kv)")
    stages.wrap(answer, "prefill_call", "prefill the rest (question)")
    stages.wrap(execute.Decoding, "alone", "first token (greedy)")

    p = json.loads((work / "params.json").read_text())
    opts = {"dtype": p["dtype"]} if p["dtype"] else {}
    text = (work / f"prompt-{size}.txt").read_text(encoding="utf-8")
    t = time.perf_counter()
    rt = Runtime.open(store=work / "store", model=p["model"], threads=p["threads"], **opts)
    open_s = time.perf_counter() - t
    open_stages = stages.take()
    with rt:
        a = rt.ask(text, mode="exact", max_new_tokens=1)
        ask_stages = stages.take()
        resident = [rt.ask(text, mode="exact", max_new_tokens=1) for _ in range(p["runs"])]
        resident_stages = stages.take()
        prefix = rt.exact.load_prefix(answer.exact_prompt(rt.ctx, text, False))
        files = [rt.store.payload_path(r) for r in [rt.store.get(SYSTEM_TENANT, SINKS, rt.exact.sink_fp),
                                                    *prefix.blocks]]
        t = time.perf_counter()
        data = [f.read_bytes() for f in files]
        raw_read_s = time.perf_counter() - t
        t = time.perf_counter()
        for d in data:
            hashlib.sha256(d).digest()
        sha_s = time.perf_counter() - t
    print(json.dumps({
        "size": size, "import_s": import_s, "open_s": open_s, "open_stages": open_stages,
        "ttft_s": a.ttft_s, "tokens_from_memory": a.tokens_from_memory, "tokens_computed": a.tokens_computed,
        "answer": a.answer, "stages": ask_stages, "resident_ttft_s": median([r.ttft_s for r in resident]),
        "resident_ttft_runs_s": [r.ttft_s for r in resident],
        "resident_stages_per_ask": {k: v / len(resident) for k, v in resident_stages.items()},
        "payload_files": len(files), "payload_bytes": sum(map(len, data)),
        "raw_read_1thread_s": raw_read_s, "sha256_1thread_s": sha_s,
    }), flush=True)


# ----- the run ----------------------------------------------------------------------------------
LOADS: list[tuple[str, float, float, float]] = []  # (step, 1-min load average before, after, wall s)


def run(cmd: list[str], what: str, **kw) -> tuple[str, float]:
    """Run a subprocess; (stdout, wall seconds from spawn to exit). Its stderr goes to ours."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": str(kw.pop("threads")),
           "OMP_WAIT_POLICY": OMP_WAIT}
    load = os.getloadavg()[0]
    t = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True, **kw)
    wall = time.perf_counter() - t
    LOADS.append((what, round(load, 2), round(os.getloadavg()[0], 2), round(wall, 1)))
    if proc.returncode != 0:
        raise SystemExit(f"peers: {what} failed (exit {proc.returncode}): {' '.join(map(str, cmd))}")
    return proc.stdout, wall


def objects(out: str) -> list[dict]:
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def check_peers(python: Path) -> None:
    if not python.exists():
        raise SystemExit(f"peers: no llama.cpp venv at {python.parent.parent}: build it with {BUILD}")
    probe = subprocess.run([str(python), "-c", "import llama_cpp; print(llama_cpp.__version__)"],
                           capture_output=True, text=True)
    if probe.returncode != 0:
        raise SystemExit(f"peers: {python} cannot import llama_cpp: build it with {BUILD}")


def main(args: argparse.Namespace) -> int:
    from grm.runtime.config import default_cache_dir

    quick = getattr(args, "quick", False)
    model = args.model or MODEL
    threads = args.threads or 2
    sizes = list(QUICK_SIZES if quick else (getattr(args, "sizes", None) or SIZES))
    runs = 1 if quick else (getattr(args, "runs", None) or RUNS)
    dtype = getattr(args, "dtype", None) or "auto"
    peers_python = Path(getattr(args, "peers_python", None) or PEERS_VENV / "bin" / "python")
    check_peers(peers_python)
    gguf = gguf_path(model, default_cache_dir())
    work = Path(tempfile.mkdtemp(prefix="grm-bench-peers-"))
    params = {"model": model, "threads": threads, "sizes": sizes, "runs": runs, "dtype": dtype}
    (work / "params.json").write_text(json.dumps(params))
    me = [sys.executable, str(Path(__file__).resolve())]
    try:
        # 1. GRM cold, ingest and the floor; 2. llama.cpp cold, states saved (each in its own process)
        run([*me, "--worker", "prepare", str(work)], "GRM cold + ingest + floor", threads=threads)
        prep = {r["size"]: r for r in json.loads((work / "prepare.json").read_text())}
        spec = {"gguf": str(gguf), "threads": threads, "states": str(work / "states"),
                "sizes": [{"size": s, "prefix_ids": prep[s]["prefix_ids"], "rest_ids": prep[s]["rest_ids"]}
                          for s in sizes]}
        (work / "llama.json").write_text(json.dumps(spec))
        out, _ = run([str(peers_python), str(PEER_SCRIPT), "cold", str(work / "llama.json")], "llama.cpp cold",
                     threads=threads)
        lcold = {r["size"]: r for r in objects(out)}
        # 3. warm in new processes, the two peers alternating
        gwarm, lwarm = defaultdict(list), defaultdict(list)
        for _ in range(runs):
            for s in sizes:
                cmd = [sys.executable, "-m", "grm", "ask", "--prompt-file", str(work / f"prompt-{s}.txt"),
                       "--mode", "exact", "--json", "--max-new-tokens", "1", "--store", str(work / "store"),
                       "--model", model, "--threads", str(threads), "--dtype", dtype]
                out, wall = run(cmd, f"grm ask (warm, {s})", threads=threads)
                gwarm[s].append({**json.loads(out), "wall_s": wall})
                out, wall = run([str(peers_python), str(PEER_SCRIPT), "warm", str(work / "llama.json"), str(s)],
                                f"llama.cpp warm ({s})", threads=threads)
                lwarm[s].append({**objects(out)[0], "wall_s": wall})
        # 4. GRM's warm path by stage, and the resident runtime (a new instrumented process per size)
        split = {}
        for s in sizes:
            out, wall = run([*me, "--worker", "warm", str(work), str(s)], f"GRM stage split ({s})", threads=threads)
            split[s] = {**objects(out)[0], "wall_s": wall}
    finally:
        shutil.rmtree(work, ignore_errors=True)  # llama.cpp states and the store: GBs at 16k+

    rows = []
    for s in sizes:
        pr, lc, gw, lw, sp = prep[s], lcold[s], gwarm[s], lwarm[s], split[s]
        g_ttft, l_ttft = median([r["ttft_s"] for r in gw]), median([r["warm_ttft_s"] for r in lw])
        rows.append({
            "size": s, "doc_tokens": pr["doc_tokens"], "prompt_tokens": len(pr["prefix_ids"]) + len(pr["rest_ids"]),
            "restored_tokens": len(pr["prefix_ids"]), "question_tokens": len(pr["rest_ids"]),
            "llama_cold_ttft_s": lc["cold_ttft_s"], "llama_warm_ttft_s": l_ttft,
            "llama_warm_ttft_runs_s": [r["warm_ttft_s"] for r in lw],
            "llama_warm_restore_s": median([r["restore_s"] for r in lw]),
            "llama_warm_wall_s": median([r["wall_s"] for r in lw]), "llama_model_load_s": median([r["model_load_s"] for r in lw]),
            "llama_state_bytes": lc["state_bytes"], "llama_state_bytes_per_token": lc["state_bytes"] / len(pr["prefix_ids"]),
            "llama_save_s": lc["save_s"], "llama_first_piece": lc["first_piece"],
            "llama_warm_first_piece": lw[0]["first_piece"],
            "grm_cold_ttft_s": pr["grm_cold_ttft_s"], "grm_warm_ttft_s": g_ttft,
            "grm_warm_ttft_runs_s": [r["ttft_s"] for r in gw], "grm_warm_wall_s": median([r["wall_s"] for r in gw]),
            "grm_warm_tokens_from_memory": gw[0]["tokens_from_memory"], "grm_warm_answer": gw[0]["answer"],
            "grm_cold_answer": pr["grm_cold_answer"], "grm_resident_ttft_s": sp["resident_ttft_s"],
            "grm_ingest_s": pr["ingest_s"], "grm_store_grew_bytes": pr["store_grew_bytes"],
            "grm_store_bytes_per_doc_token": pr["store_bytes_per_doc_token"],
            "floor_ttft_s": pr["floor_ttft_s"], "floor_copy_s": pr["floor_copy_s"],
            "floor_prefix_prefill_s": pr["floor_prefix_prefill_s"], "floor_first_piece": pr["floor_first_piece"],
            "warm_over_llama": g_ttft / l_ttft, "warm_over_floor": g_ttft / pr["floor_ttft_s"],
            "resident_over_floor": sp["resident_ttft_s"] / pr["floor_ttft_s"],
            "llama_cold_over_grm_cold": lc["cold_ttft_s"] / pr["grm_cold_ttft_s"],
            "stage_split": {k: sp[k] for k in ("import_s", "open_s", "open_stages", "ttft_s", "stages",
                                                "resident_stages_per_ask", "payload_files", "payload_bytes",
                                                "raw_read_1thread_s", "sha256_1thread_s", "wall_s")},
        })
    targets = {"warm_le_llama_restore_every_size": all(r["warm_over_llama"] <= 1 for r in rows),
               "warm_le_1.5x_floor_every_size": all(r["warm_over_floor"] <= 1.5 for r in rows)}
    ran = prep[sizes[0]]["grm_dtype"]
    table = tables(rows, targets, threads, dtype if dtype == ran else f"{ran} (`--dtype {dtype}`)")
    name = "peers" if quick or sizes == list(SIZES) else "peers-" + "-".join(map(str, sizes))
    cmd = f"grm bench peers --model {model} --threads {threads}"
    if sizes != list(SIZES) and not quick:
        cmd = f"python bench/peers.py --model {model} --threads {threads} --sizes {' '.join(map(str, sizes))}"
    write_results(name, {"model": model, "gguf": str(gguf), "dtype": dtype, "ran_in": ran, "threads": threads, "runs": runs,
                         "llama_cpp": LLAMA_CPP, "omp_wait_policy": OMP_WAIT, "rows": rows, "targets": targets,
                         "load_average": LOADS}, table, cmd, quick=quick)
    print("\n".join(table))
    return 0


def tables(rows: list[dict], targets: dict, threads: int, dtype: str) -> list[str]:
    t = ["| doc tokens | llama.cpp cold | llama.cpp warm TTFT (new process) | its wall | state on disk | "
         "GRM cold | GRM warm TTFT (new process) | its wall | GRM resident | floor | GRM on disk | "
         "warm / llama.cpp | warm / floor | resident / floor |",
         "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        t.append(
            f"| {r['doc_tokens']:,} | {r['llama_cold_ttft_s']:.1f} s | {r['llama_warm_ttft_s']:.3f} s | "
            f"{r['llama_warm_wall_s']:.1f} s | {r['llama_state_bytes'] / 1e6:.0f} MB "
            f"({r['llama_state_bytes_per_token'] / 1e3:.1f} KB/token) | {r['grm_cold_ttft_s']:.1f} s | "
            f"{r['grm_warm_ttft_s']:.3f} s | {r['grm_warm_wall_s']:.1f} s | {r['grm_resident_ttft_s']:.3f} s | "
            f"{r['floor_ttft_s']:.3f} s | {r['grm_store_grew_bytes'] / 1e6:.0f} MB "
            f"({r['grm_store_bytes_per_doc_token'] / 1e3:.1f} KB/token) | {r['warm_over_llama']:.2f}x | "
            f"{r['warm_over_floor']:.2f}x | {r['resident_over_floor']:.2f}x |")
    t += ["", "Targets (issue 32): " + ", ".join(f"{k}: {v}" for k, v in targets.items()), "",
          f"TTFT = time to first token (greedy, argmax), medians of the warm runs; {threads} threads on each "
          f"side; GRM in {dtype}, llama.cpp in the GGUF's Q4_K_M kernels (f16 K/V, flash "
          "attention off: the library's defaults). Every side reads the same token ids: the chat template's "
          "head (GRM's sinks) and the document, then the question and the generation prompt "
          "(question tokens below). llama.cpp warm: `llama_state_load_file` + reading the question + argmax, "
          "after its model loaded; GRM warm: `grm ask --mode exact` in a new process (its `ttft_s`: ask "
          "call to first token, after the runtime opened); walls are spawn to exit. GRM resident: the same "
          "prompt asked again in a runtime that has answered it once. Floor: transformers DynamicCache of the "
          "same prefix on GRM's model, deep-copied, the question read after it. GRM on disk: the store's "
          "growth when the document was ingested (default layout) over document tokens. Every process ran "
          f"with OMP_WAIT_POLICY={OMP_WAIT}; the machine's 1-min load average over the run's steps was "
          f"{min(x[1] for x in LOADS):.1f}-{max(x[2] for x in LOADS):.1f} on its 2 cores (others' jobs).", "",
          "| doc tokens | restored / question tokens | llama.cpp restore alone | llama.cpp model load | "
          "floor's copy | floor's prefix prefill | GRM ingest | first piece: llama.cpp cold / warm, GRM cold / "
          "warm, floor |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        t.append(f"| {r['doc_tokens']:,} | {r['restored_tokens']:,} / {r['question_tokens']} | "
                 f"{r['llama_warm_restore_s']:.3f} s | {r['llama_model_load_s']:.2f} s | "
                 f"{r['floor_copy_s']:.3f} s | {r['floor_prefix_prefill_s']:.1f} s | {r['grm_ingest_s']:.1f} s | "
                 f"{r['llama_first_piece']!r} / {r['llama_warm_first_piece']!r}, {r['grm_cold_answer']!r} / "
                 f"{r['grm_warm_answer']!r}, {r['floor_first_piece']!r} |")
    t += ["", "GRM's warm path by stage (the instrumented new process; seconds; ↳ = inside the stage above; "
          "read_payload is summed over its reader threads):", ""]
    names = []
    for r in rows:
        for k in r["stage_split"]["stages"]:
            if k not in names:
                names.append(k)
    t.append("| stage | " + " | ".join(f"{r['doc_tokens']:,}" for r in rows) + " |")
    t.append("|---|" + "---|" * len(rows))
    sp = [r["stage_split"] for r in rows]
    t.append("| imports (python, torch, grm) | " + " | ".join(f"{x['import_s']:.2f}" for x in sp) + " |")
    for k in ("open.load_model", "open.dialect_for", "open.kept_self_test", "open.open_backend"):
        t.append(f"| {k} | " + " | ".join(f"{x['open_stages'].get(k, float('nan')):.2f}" for x in sp) + " |")
    t.append("| **time to first token** | " + " | ".join(f"**{x['ttft_s']:.3f}**" for x in sp) + " |")
    for k in names:
        label = "↳ " * ((len(k) - len(k.lstrip())) // 2) + k.strip()
        t.append(f"| {label} | " + " | ".join(f"{x['stages'].get(k, float('nan')):.3f}" for x in sp) + " |")
    t.append("| (rest of the ask: planning, tokenizing the question) | " + " | ".join(
        f"{x['ttft_s'] - sum(v for k, v in x['stages'].items() if not k.startswith(' ')):.3f}" for x in sp) + " |")
    t.append("| raw read of the same files, 1 thread | " + " | ".join(f"{x['raw_read_1thread_s']:.3f}" for x in sp) + " |")
    t.append("| SHA-256 of the same bytes, 1 thread | " + " | ".join(f"{x['sha256_1thread_s']:.3f}" for x in sp) + " |")
    t.append("| payload files / MB | " + " | ".join(f"{x['payload_files']} / {x['payload_bytes'] / 1e6:.0f}" for x in sp) + " |")
    t.append("| the process's wall | " + " | ".join(f"{x['wall_s']:.1f}" for x in sp) + " |")
    return t


def flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--sizes", type=int, nargs="+", help=f"document tokens (default {' '.join(map(str, SIZES))})")
    p.add_argument("--runs", type=int, default=RUNS, help="warm runs per side and size")
    p.add_argument("--dtype", default="auto")
    p.add_argument("--peers-python", help="the Python of the llama.cpp venv (default .peers-venv/bin/python)")


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--worker":
        if sys.argv[2] == "prepare":
            worker_prepare(Path(sys.argv[3]))
        else:
            worker_warm(Path(sys.argv[3]), int(sys.argv[4]))
    else:
        run_cli(main, flags)
