"""The llama.cpp side of `grm bench peers`, run by the peers venv's Python (llama-cpp-python built
from source there; `make peers-venv`), never by GRM's: it imports only the standard library,
numpy and llama_cpp, and is given token ids, so both sides read the same tokens.

    python bench/lib/llama_peer.py cold SPEC.json       one process, every size: cold prefill, state saved
    python bench/lib/llama_peer.py warm SPEC.json SIZE  a new process: state loaded, question read

SPEC.json: {"gguf": path, "threads": n, "states": dir, "sizes": [{"size", "prefix_ids", "rest_ids"}]}.
Each prints one JSON object per size on stdout.

- cold: a fresh context per size reads `prefix_ids` (the sinks and the document), saves the state
  with llama.cpp's state file API (`llama_state_save_file`: the K/V cells in use, the last
  output's logits and the tokens; not timed), then reads `rest_ids` (the question) and takes the
  argmax of the last logits: time to first token = the two reads + the argmax.
- warm: model loaded, then time `llama_state_load_file` (its tokens compared with `prefix_ids`,
  as a prompt cache must), reading `rest_ids` after them, and the argmax.

Greedy first token by argmax of the logits, as GRM generates. The high-level
`Llama.save_state()` is not used: its pickled LlamaState also carries the n_batch x n_vocab
score buffer (512 x 151,936 floats, ~311 MB for Qwen), which the state file does not.
"""

from __future__ import annotations

import ctypes
import json
import sys
import time
from pathlib import Path

T_START = time.perf_counter()

import numpy as np  # noqa: E402
import llama_cpp  # noqa: E402

T_IMPORTED = time.perf_counter()
N_BATCH = 512  # tokens per llama_decode call (n_batch = n_ubatch), GRM's prefill chunk too


def n_ctx_for(n: int) -> int:
    """The smallest context of whole 256-token pages holding n tokens and one generated."""
    return -(-(n + 1) // 256) * 256


def open_llama(gguf: str, n_ctx: int, threads: int) -> llama_cpp.Llama:
    # flash_attn stays at the library's default (off); the K/V cache type at llama.cpp's (f16)
    return llama_cpp.Llama(model_path=gguf, n_ctx=n_ctx, n_threads=threads, n_threads_batch=threads,
                           n_batch=N_BATCH, n_ubatch=N_BATCH, logits_all=False, verbose=False)


def first_token(llm: llama_cpp.Llama) -> int:
    """Greedy: the argmax of the last position's logits."""
    ptr = llama_cpp.llama_get_logits_ith(llm.ctx, -1)
    return int(np.argmax(np.ctypeslib.as_array(ptr, shape=(llm.n_vocab(),))))


def cold(spec: dict) -> None:
    states = Path(spec["states"])
    states.mkdir(parents=True, exist_ok=True)
    for item in spec["sizes"]:
        prefix, rest = item["prefix_ids"], item["rest_ids"]
        t = time.perf_counter()
        llm = open_llama(spec["gguf"], n_ctx_for(len(prefix) + len(rest)), spec["threads"])
        load_s = time.perf_counter() - t
        t0 = time.perf_counter()
        llm.eval(prefix)
        prefix_s = time.perf_counter() - t0
        path = states / f"{item['size']}.state"
        t = time.perf_counter()
        arr = (llama_cpp.llama_token * len(prefix))(*prefix)
        if not llama_cpp.llama_state_save_file(llm.ctx, str(path).encode(), arr, len(prefix)):
            raise RuntimeError(f"llama_state_save_file failed for {path}")
        save_s = time.perf_counter() - t
        t1 = time.perf_counter()
        llm.eval(rest)
        token = first_token(llm)
        rest_s = time.perf_counter() - t1
        print(json.dumps({"size": item["size"], "tokens": len(prefix) + len(rest), "model_load_s": load_s,
                          "prefix_s": prefix_s, "question_s": rest_s, "cold_ttft_s": prefix_s + rest_s,
                          "save_s": save_s, "state_bytes": path.stat().st_size, "state_file": str(path),
                          "first_token": token, "first_piece": llm.detokenize([token]).decode("utf-8", "replace")}),
              flush=True)
        llm.close()
        del llm


def warm(spec: dict, size: int) -> None:
    item = next(i for i in spec["sizes"] if i["size"] == size)
    prefix, rest = item["prefix_ids"], item["rest_ids"]
    t = time.perf_counter()
    llm = open_llama(spec["gguf"], n_ctx_for(len(prefix) + len(rest)), spec["threads"])
    load_s = time.perf_counter() - t
    path = Path(spec["states"]) / f"{size}.state"
    t0 = time.perf_counter()
    cap = llm.n_ctx()
    out = (llama_cpp.llama_token * cap)()
    n = ctypes.c_size_t(0)
    if not llama_cpp.llama_state_load_file(llm.ctx, str(path).encode(), out, cap, ctypes.byref(n)):
        raise RuntimeError(f"llama_state_load_file failed for {path}")
    if list(out[: n.value]) != prefix:  # a prompt cache serves a state only for the tokens it holds
        raise RuntimeError(f"{path} holds other tokens than the prompt's prefix")
    llm.n_tokens = n.value
    llm.input_ids[: n.value] = prefix
    restore_s = time.perf_counter() - t0
    llm.eval(rest)
    token = first_token(llm)
    ttft = time.perf_counter() - t0
    print(json.dumps({"size": size, "import_s": T_IMPORTED - T_START, "model_load_s": load_s,
                      "restore_s": restore_s, "warm_ttft_s": ttft, "first_token": token,
                      "state_bytes": path.stat().st_size,
                      "first_piece": llm.detokenize([token]).decode("utf-8", "replace")}), flush=True)
    llm.close()


if __name__ == "__main__":
    spec = json.loads(Path(sys.argv[2]).read_text())
    if sys.argv[1] == "cold":
        cold(spec)
    elif sys.argv[1] == "warm":
        warm(spec, int(sys.argv[3]))
    else:
        sys.exit(f"usage: {sys.argv[0]} cold|warm SPEC.json [SIZE]")
