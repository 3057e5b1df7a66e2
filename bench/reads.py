"""What the model reads per request, counted (grm/kv/forward.py `Reads`), for two choices of session 15.

1. Routing keys kept (grm/route/dense.py `QueryKeys`): the same served chat turn (`Runtime.ask`
   with the chat's prompt, `recall` its latest message, `store_prompt`) sent twice, with the cache
   off (`QueryKeys(0)`) and on (the default), side by side; tokens the model read per request
   (decoding apart). Model: tiny-random-llama-chat (the templated path; the counts are of tokens,
   so the weights do not matter).
2. The system message's cost in sinks (RuntimeConfig.system): tokens of the template's head with
   the template's own system message and with GRM's, on the default model's tokenizer (loaded from
   the model cache only: skipped where that model was never prepared), and the K/V bytes those
   extra sink tokens take in fp32 and bf16.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from _common import run_cli, write_results  # noqa: E402

MESSAGE = "Count the model reads of this message, please. " * 4


def repeated_turn(size: int, threads: int) -> list[int]:
    from grm.route.dense import QueryKeys
    from grm.runtime import Runtime

    with tempfile.TemporaryDirectory() as d, Runtime.open(store=d, model="tiny-random-llama-chat", threads=threads,
                                                          abstain_floor=0) as rt:
        rt.exact.query_keys = QueryKeys(size)
        t = rt.lm.tokenizer.template
        prompt = t.head + t.user_turn(MESSAGE)
        out = []
        for _ in range(2):
            before = rt.reads.snapshot()[0]
            rt.ask(prompt, mode="exact", chat=True, store_prompt=True, recall=MESSAGE, max_new_tokens=4)
            out.append(rt.reads.snapshot()[0] - before)
        return out


def sink_tokens() -> dict | None:
    from transformers import AutoTokenizer

    from grm.models import DEFAULT_MODEL
    from grm.models.template import derive
    from grm.runtime.config import MEMORY_SYSTEM
    from grm.runtime.locations import default_cache_dir

    folder = default_cache_dir() / "models" / DEFAULT_MODEL
    if not (folder / "config.json").exists():
        return None
    import json

    cfg = json.loads((folder / "config.json").read_text())
    tok = AutoTokenizer.from_pretrained(str(folder))
    template = derive(tok)
    own, grm = len(tok.encode(template.head)), len(tok.encode(template.with_system(MEMORY_SYSTEM).head))
    head_dim = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
    per_token = cfg["num_hidden_layers"] * cfg["num_key_value_heads"] * head_dim * 2  # K and V elements
    return {"model": DEFAULT_MODEL, "own": own, "grm": grm, "extra_bytes_fp32": (grm - own) * per_token * 4,
            "extra_bytes_bf16": (grm - own) * per_token * 2}


def main(args: argparse.Namespace) -> int:
    import torch

    threads = args.threads or 1
    torch.set_num_threads(threads)
    res = {"off": repeated_turn(0, threads), "on": repeated_turn(64, threads), "sinks": sink_tokens()}
    table = ["| routing keys kept | tokens read: first request | the same request again |", "|---|---|---|",
             f"| no (`QueryKeys(0)`) | {res['off'][0]} | {res['off'][1]} |",
             f"| yes (default, 64) | {res['on'][0]} | {res['on'][1]} |", "",
             "tiny-random-llama-chat; a served chat turn (`Runtime.ask(prompt, mode='exact', chat=True, "
             "store_prompt=True, recall=message)`) sent twice in one runtime; tokens the model read per "
             "request, decoding apart (grm/kv/forward.py Reads)."]
    s = res["sinks"]
    if s is not None:
        table += ["", "| model | sink tokens, the template's own system message | with GRM's (`--system memory`) "
                  "| extra K/V stored once (fp32 / bf16) |", "|---|---|---|---|",
                  f"| {s['model']} | {s['own']} | {s['grm']} | {s['extra_bytes_fp32'] / 1e6:.2f} MB / "
                  f"{s['extra_bytes_bf16'] / 1e6:.2f} MB |"]
    write_results("reads", res, table, f"python bench/reads.py --threads {threads}", quick=args.quick)
    print("\n".join(table))
    return 0


if __name__ == "__main__":
    run_cli(main)
