"""Storage cost of exact K/V payloads (issue 17 item 3): what zstd and the compute dtype save.

Ingests a few paragraphs of real text with a real model (chain layout), then for every stored
block payload measures: raw bytes; zstd level 3 (what `--compress` does, lossless: the exact tier
stays bit-identical); zstd after a byte shuffle (the float bytes grouped by position, a standard
float-compression trick: lossless too); and the size of the same tensors in bf16 / fp16 (the
model's compute dtype on a GPU: bit-identical there, because the model computes in it; on a
CPU, where GRM computes in fp32, storing bf16 would NOT be exact).

`python bench/storage_cost.py [--model smollm2-135m] [--quick]`.
"""

from __future__ import annotations

from grm.models.registry import DEFAULT_MODEL

import json
import struct
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def _shuffle(data: bytes, width: int) -> bytes:
    import numpy as np

    a = np.frombuffer(data[: len(data) - len(data) % width], dtype=np.uint8).reshape(-1, width)
    return a.T.tobytes() + data[len(data) - len(data) % width:]


def measure(model: str, text: str, threads: int) -> dict:
    import zstandard

    from grm.kv.payload import parse_header
    from grm.runtime import Runtime
    from grm.store.kinds import BLOCK

    with tempfile.TemporaryDirectory() as tmp, Runtime.open(store=Path(tmp) / "s", model=model,
                                                            threads=threads) as rt:
        (Path(tmp) / "doc.txt").write_text(text)
        res = rt.ingest([Path(tmp) / "doc.txt"], layout="chain", progress=False)
        tokens = sum(r.tokens for r in res)
        z = zstandard.ZstdCompressor(level=3)
        tot = dict.fromkeys(("raw", "zstd", "shuffle_zstd", "tensor_fp32", "tensor_half"), 0)
        blocks = 0
        for rec in rt.store.records(rt.config.tenant, BLOCK):
            data = rt.store.read_payload(rec)
            if data is None:
                continue
            blocks += 1
            (n,) = struct.unpack("<Q", data[:8])
            head = parse_header(data[8:8 + n])
            width = head.torch_dtype.itemsize
            tot["raw"] += len(data)
            tot["zstd"] += len(z.compress(data))
            tot["shuffle_zstd"] += len(z.compress(data[:8 + n] + _shuffle(data[8 + n:], width)))
            tot["tensor_fp32"] += 2 * head.tensor_bytes
            tot["tensor_half"] += 2 * head.tensor_bytes // width * 2
        return {"model": model, "tokens": tokens, "blocks": blocks, **tot,
                "raw_bytes_per_token": tot["raw"] / max(tokens, 1)}


def main(args) -> int:
    from bench._common import write_results
    from tests.conftest import lorem

    model = getattr(args, "model", None) or DEFAULT_MODEL
    text = lorem(6 if getattr(args, "quick", False) else 24, seed=11)
    r = measure(model, text, getattr(args, "threads", 2) or 2)
    raw = r["raw"]
    table = [f"Model {r['model']}: {r['tokens']} tokens in {r['blocks']} chain blocks; "
             f"{r['raw_bytes_per_token']:,.0f} payload bytes per token as stored (fp32).", "",
             "| encoding | bytes | of raw | lossless / exact |", "|---|---|---|---|",
             f"| raw fp32 (today's default) | {raw:,} | 100% | yes |",
             f"| zstd-3 (`--compress`) | {r['zstd']:,} | {100 * r['zstd'] / raw:.1f}% | yes |",
             f"| byte-shuffle + zstd-3 | {r['shuffle_zstd']:,} | {100 * r['shuffle_zstd'] / raw:.1f}% | yes |",
             f"| bf16/fp16 tensors (compute dtype on GPU) | {r['tensor_half']:,} | "
             f"{100 * r['tensor_half'] / raw:.1f}% | exact only where the model computes in it |"]
    write_results("storage_cost", r, table, "python bench/storage_cost.py", quick=getattr(args, "quick", False))
    print("\n".join(table))
    return 0


if __name__ == "__main__":
    import argparse

    from bench._common import tag_flag, tagged  # the module write_results is taken from in main

    p = argparse.ArgumentParser()
    p.add_argument("--model", default=None)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--quick", action="store_true")
    tag_flag(p)
    print(json.dumps(main(tagged(p.parse_args()))))
