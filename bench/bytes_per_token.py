"""Bytes on disk per stored document token, by model and ingest layout; byte planes + zstd on real K/V.

For each model (and the dtype it computes in) one document of ~DOC_TOKENS tokens of news text is
ingested into an empty store per layout, the store closed, and its folder measured (every file:
payloads, log, checkpoints, catalog, the model's sinks) over the document's tokens:
- `both` (the default before): chain blocks and sections, sharing the first block;
- `seen` (the default now): sections and the chain's first block; then the same store after one
  prompt that starts with the document (`ask --mode exact`), which stores the rest of its chain.
Then every payload file of the `seen` store (after that prompt: chain blocks and sections) is
encoded as a `--compress` store writes it (grm/store/envelope.py: byte planes + zstd-1, plain
where that does not shrink it) and, beside it, as zstd-3 of the raw bytes; the ratio is bytes
over bytes. Load cost: per MB of payload, verifying plain bytes (SHA-256) vs decoding an envelope
(zstd + unshuffle + SHA-256), both from bytes in RAM, one thread, best of 3.
`--exact-*`/`--recall-*` name the JSON of `bench/exact.py` / `bench/recall.py` runs before and after
the layout change, whose exact-hit and recall figures the table repeats.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import news_corpus, run_cli, write_results  # noqa: E402

MODELS = (("smollm2-135m", "bfloat16"), ("smollm2-135m", "float32"), ("qwen2.5-coder-1.5b", "auto"))  # auto: bf16 on this CPU
DOC_TOKENS = 1100  # three 512-token blocks (two of them in sections too under `both`)
QUESTION = "\n\nQuestion: Which places and people are named in the first article above?\nAnswer:"


def build_doc(tok, target: int) -> str:
    text = ""
    for art in news_corpus():
        text += art + "\n\n"
        if len(tok.encode(text)) >= target:
            break
    cut = tok.decode(tok.encode(text)[:target])
    end = max(cut.rfind(". "), cut.rfind(".\n"))
    return (cut[: end + 1] if end > 0 else cut) + "\n"


def payload_files(store: Path) -> list[Path]:
    return sorted(p for p in (store / "payloads").rglob("*") if p.is_file())


def best(f, n: int = 3) -> float:
    times = []
    for _ in range(n):
        t = time.perf_counter()
        f()
        times.append(time.perf_counter() - t)
    return min(times)


def compression(files: list[Path]) -> dict:
    import hashlib

    import zstandard

    from grm.store.defences import Defences
    from grm.store.envelope import Codec
    from grm.store.planes import width_of

    codec = Codec(None, True, Defences())
    raw = comp = z3 = 0
    plain_s = decode_s = 0.0
    for path in files:
        data = path.read_bytes()
        if width_of(data) == 1:
            continue  # a document's text, not K/V
        name = hashlib.sha256(data).hexdigest()
        blob = codec.encode_payload("t", "block", "k", name, data)
        raw, comp, z3 = raw + len(data), comp + len(blob), z3 + len(zstandard.ZstdCompressor(level=3).compress(data))
        plain_s += best(lambda: hashlib.sha256(data).hexdigest() == name)
        decode_s += best(lambda: codec.decode_payload("t", "block", "k", name, len(data), blob))
        assert codec.decode_payload("t", "block", "k", name, len(data), blob) == data
    mb = raw / 1e6
    return {"kv_bytes": raw, "planes_zstd1_bytes": comp, "zstd3_bytes": z3, "planes_zstd1_ratio": comp / raw,
            "zstd3_ratio": z3 / raw, "verify_plain_ms_per_mb": plain_s * 1000 / mb,
            "decode_compressed_ms_per_mb": decode_s * 1000 / mb,
            "load_cost_ms_per_mb": (decode_s - plain_s) * 1000 / mb}


def measure(model: str, dtype: str, threads: int, doc_tokens: int, work: Path) -> dict:
    from grm.runtime import Runtime
    from grm.store.opener import disk_bytes

    out: dict = {"model": model, "dtype": dtype}  # the dtype asked; "dtype" below: the one it ran in
    doc = None
    for layout in ("both", "seen"):
        store = work / f"{model}-{dtype}-{layout}"
        with Runtime.open(store=store, model=model, dtype=dtype, device="cpu", threads=threads) as rt:
            doc = doc or build_doc(rt.lm.tokenizer, doc_tokens)
            tokens = len(rt.lm.tokenizer.encode(doc))
            t = time.perf_counter()
            rt.ingest_text(doc, "doc", layout=layout)
            ingest_s = time.perf_counter() - t
            kv_token = 2 * rt.dialect.n_layers * rt.dialect.kv_heads * rt.dialect.head_dim * rt.lm.model.dtype.itemsize
        out["doc_tokens"], out["kv_bytes_per_token_one_read"] = tokens, kv_token
        out["dtype"] = str(rt.lm.model.dtype).replace("torch.", "")
        disk = disk_bytes(store)
        out[layout] = {"disk_bytes": disk, "per_token": disk / tokens, "ingest_s": ingest_s,
                       "payload_bytes": sum(p.stat().st_size for p in payload_files(store))}
        if layout == "seen":
            with Runtime.open(store=store, model=model, dtype=dtype, device="cpu", threads=threads) as rt:
                a = rt.ask(doc + QUESTION, mode="exact", max_new_tokens=1)
                b = rt.ask(doc + QUESTION, mode="exact", max_new_tokens=1)
            sinks = len(rt.lm.tokenizer.sink_ids)
            after = disk_bytes(store)
            out["seen_after_prompt"] = {"disk_bytes": after, "per_token": after / tokens,
                                        "first_prompt_doc_from_memory": (a.tokens_from_memory - sinks) / tokens,
                                        "second_prompt_doc_from_memory": (b.tokens_from_memory - sinks) / tokens,
                                        "first_prompt_ttft_s": a.ttft_s, "second_prompt_ttft_s": b.ttft_s}
            out["compression"] = compression(payload_files(store))
            c = out["compression"]
            # the `seen` store at ingest with its K/V written as --compress writes it
            out["seen_compressed_per_token_est"] = (disk - out["seen"]["payload_bytes"]
                                                    + out["seen"]["payload_bytes"] * c["planes_zstd1_ratio"]) / tokens
    return out


def figures(path: str | None) -> dict | None:
    return json.loads(Path(path).read_text()) if path else None


def main(args: argparse.Namespace) -> int:
    threads = args.threads or 1
    doc_tokens = 512 if args.quick else args.doc_tokens
    models = [m for m in MODELS if not args.models or m[0] in args.models]
    work = Path(tempfile.mkdtemp(prefix="grm-bench-bytes-"))
    rows = json.loads(Path(args.rows).read_text())["rows"] if args.rows else []
    for model, dtype in models if not args.rows else ():
        print(f"{model} {dtype} ...", file=sys.stderr, flush=True)
        rows.append(measure(model, dtype, threads, doc_tokens, work))
        Path(work / "rows.json").write_text(json.dumps({"rows": rows}))  # what --rows re-reads
        print(f"rows so far: {work / 'rows.json'}", file=sys.stderr, flush=True)
    table = ["| model | dtype | doc tokens | K/V of one read | `both` (before) | `seen` (now) | `seen` after one prompt "
             "reads the doc | `seen` with --compress (est.) |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        table.append(f"| {r['model']} | {r['dtype']} | {r['doc_tokens']} | {r['kv_bytes_per_token_one_read'] / 1000:.1f} KB "
                     f"| {r['both']['per_token'] / 1000:.1f} KB | {r['seen']['per_token'] / 1000:.1f} KB "
                     f"| {r['seen_after_prompt']['per_token'] / 1000:.1f} KB "
                     f"| {r['seen_compressed_per_token_est'] / 1000:.1f} KB |")
    table += ["", "Bytes per document token = the store folder's bytes after the ingest (store closed: payloads, "
              "log, checkpoints, catalog, the model's sinks) over the document's tokens; one document per store.",
              "", "| model | dtype | planes + zstd-1 | zstd-3 alone | verify plain | decode compressed | load cost |",
              "|---|---|---|---|---|---|---|"]
    for r in rows:
        c = r["compression"]
        table.append(f"| {r['model']} | {r['dtype']} | {c['planes_zstd1_ratio']:.1%} | {c['zstd3_ratio']:.1%} | "
                     f"{c['verify_plain_ms_per_mb']:.2f} ms/MB | {c['decode_compressed_ms_per_mb']:.2f} ms/MB | "
                     f"+{c['load_cost_ms_per_mb']:.2f} ms/MB |")
    table += ["", "Compression over every K/V payload of the `seen` store after the prompt (chain blocks and "
              "sections); ratio = bytes kept. Verify plain = SHA-256 of the payload; decode compressed = zstd + "
              "unshuffle + SHA-256 (what a --compress store's read does); bytes in RAM, one thread, best of 3.", ""]
    table += ["| model | dtype | first prompt after ingest: doc from memory | second prompt | TTFT first / second |",
              "|---|---|---|---|---|"]
    for r in rows:
        s = r["seen_after_prompt"]
        table.append(f"| {r['model']} | {r['dtype']} | {s['first_prompt_doc_from_memory']:.1%} | "
                     f"{s['second_prompt_doc_from_memory']:.1%} | {s['first_prompt_ttft_s']:.2f} s / "
                     f"{s['second_prompt_ttft_s']:.2f} s |")
    bench = {k: figures(getattr(args, k)) for k in ("exact_before", "exact_after", "recall_before", "recall_after")}
    if bench["exact_before"] and bench["exact_after"]:
        table += ["", "`bench/exact.py` (smollm2-135m, auto dtype, new process after ingest; doc share from memory "
                  "per warm ask):", "", "| doc tokens | before (`both`) | after (`seen`) |", "|---|---|---|"]
        for b, a in zip(bench["exact_before"]["rows"], bench["exact_after"]["rows"]):
            runs = " / ".join(f"{m:.1%}" for m in a.get("memory_share_runs", [a["memory_share_of_document"]]))
            table.append(f"| {b['doc_tokens']} | {b['memory_share_of_document']:.1%} (every ask) | {runs} |")
    if bench["recall_before"] and bench["recall_after"]:
        table += ["", "`bench/recall.py` (smollm2-135m; correct answers):", "",
                  "| mode | before (`sections` records) | after (`seen`) |", "|---|---|---|"]
        for mode, b in bench["recall_before"]["modes"].items():
            a = bench["recall_after"]["modes"].get(mode)
            after = f"{a['correct']}/{a['questions']}" if a else "not run"
            table.append(f"| {mode} | {b['correct']}/{b['questions']} | {after} |")
    write_results("bytes-per-token", {"threads": threads, "rows": rows, "benchmarks": {
        k: ({"command": v.get("command"), "date": v.get("date"), "rows": v.get("rows"), "modes": v.get("modes")}
            if v else None) for k, v in bench.items()}}, table,
        f"python bench/bytes_per_token.py --threads {threads} --doc-tokens {doc_tokens}"
        + "".join(f" --{k.replace('_', '-')} {getattr(args, k)}" for k in bench if getattr(args, k)),
        quick=args.quick)
    print("\n".join(table))
    return 0


def _flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--doc-tokens", type=int, default=DOC_TOKENS)
    p.add_argument("--models", nargs="*", default=None, help="model names (default: all of MODELS)")
    p.add_argument("--rows", default=None, metavar="JSON", help="the rows of an earlier run (its JSON), not measured again")
    for k in ("exact-before", "exact-after", "recall-before", "recall-after"):
        p.add_argument(f"--{k}", default=None, metavar="JSON")


if __name__ == "__main__":
    run_cli(main, _flags)
