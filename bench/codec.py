"""Benchmark of the archive symbol codecs: bit-packed baseline vs chaos-game anchors.

For A in (2, 16, 256, 1024), on a uniform and a Zipf-skewed stream of n symbols, measures side
by side in one run (shared machines are noisy, so compare ratios, not absolute figures):
round-trip correctness (decode and bytes), encode/decode µs per symbol, symbol_at µs per op,
append µs per symbol, suffix-search µs per query for s = 1..8 with precision/recall against a
brute-force scan, and bytes per symbol (bit-packed payload, chaos anchors, suffix index).
Then a round-trip sweep over EVERY alphabet size 2..1024 (SWEEP_SYMBOLS uniform symbols each,
both codecs): decode, container bytes, symbol_at at random positions and append in chunks
(whose bytes must equal one-shot encoding) must all agree with the stream.
Real symbols (index streams of real K/V) are checked by `grm bench archive` (round trip of every
stream, suffix search on per-head streams against brute force).

Run from the repository root:  .venv/bin/python bench/codec.py [out_dir] [n]   (or: grm bench codec)
Writes out_dir/codec.json and out_dir/codec.md (default out_dir: bench/results).
"""

from __future__ import annotations

import os

# Thread counts are fixed before numpy loads so that runs are comparable across machines.
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import datetime as _dt  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from grm.archive.bitpack import BitPackedCodec  # noqa: E402
from grm.archive.chaos import ChaosGameCodec  # noqa: E402

ALPHABETS = (2, 16, 256, 1024)
DISTRIBUTIONS = ("uniform", "zipf")
ZIPF_EXPONENT = 1.1
QUERY_LENGTHS = range(1, 9)
QUERIES_PER_LENGTH = 16  # 12 drawn from the stream (present), 4 uniform random (often absent)
SYMBOL_AT_OPS = 20_000
APPEND_CHUNK = 4096
SEED = 20240601
SWEEP_ALPHABETS = range(2, 1025)  # every alphabet size the codecs take
SWEEP_SYMBOLS = 1_000_000  # per alphabet size (the quick run uses 10x fewer)
SWEEP_SYMBOL_AT = 200  # random-access checks per stream and codec


def make_stream(distribution: str, alphabet: int, n: int, rng: np.random.Generator) -> np.ndarray:
    if distribution == "uniform":
        return rng.integers(0, alphabet, n)
    p = 1.0 / np.arange(1, alphabet + 1) ** ZIPF_EXPONENT
    return rng.permutation(alphabet)[rng.choice(alphabet, n, p=p / p.sum())]


def best_of(repeats: int, fn: Callable[[], object]) -> tuple[float, object]:
    """Fastest wall time of `repeats` calls, in seconds, and the last result."""
    best, result = float("inf"), None
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def brute_force(stream: np.ndarray, query: np.ndarray) -> np.ndarray:
    windows = np.lib.stride_tricks.sliding_window_view(stream, query.size)
    return np.flatnonzero((windows == query).all(axis=1)) + query.size - 1


def measure_codec(codec_cls: type, stream: np.ndarray, alphabet: int, rng: np.random.Generator,
                  ops: int = SYMBOL_AT_OPS, chunk: int = APPEND_CHUNK) -> dict:
    """Round trip, encode/decode, symbol_at (`ops` random positions), append (`chunk` symbols at a
    time) and bytes for one codec on one stream."""
    n = stream.size
    encode_s, codec = best_of(3, lambda: codec_cls.encode(stream, alphabet))
    decode_s, decoded = best_of(3, codec.decode)
    data = codec.to_bytes()
    round_trip = bool(np.array_equal(decoded, stream)
                      and np.array_equal(codec_cls.from_bytes(data).decode(), stream))
    positions = rng.integers(0, n, ops).tolist()
    start = time.perf_counter()
    sampled = [codec.symbol_at(i) for i in positions]
    symbol_at_s = time.perf_counter() - start
    round_trip = round_trip and sampled == stream[positions].tolist()
    grown = codec_cls.encode(stream[:0], alphabet)
    start = time.perf_counter()
    for at in range(0, n, chunk):
        grown.append(stream[at : at + chunk])
    append_s = time.perf_counter() - start
    round_trip = round_trip and grown.to_bytes() == data
    return {
        "round_trip_ok": round_trip,
        "encode_us_per_symbol": 1e6 * encode_s / n,
        "decode_us_per_symbol": 1e6 * decode_s / n,
        "symbol_at_us_per_op": 1e6 * symbol_at_s / ops,
        "append_us_per_symbol": 1e6 * append_s / n,
        "payload_bytes_per_symbol": codec.payload_nbytes / n,
        "container_bytes": len(data),
    }, codec


def measure_search(codec: ChaosGameCodec, stream: np.ndarray, alphabet: int,
                   rng: np.random.Generator) -> dict:
    """Index build, then per query length: search time, context decode time, precision/recall."""
    build_s, index = best_of(1, codec.suffix_index)
    per_length = []
    for s in QUERY_LENGTHS:
        present = [stream[i - s + 1 : i + 1] for i in rng.integers(s - 1, stream.size, 12)]
        queries = present + [rng.integers(0, alphabet, s) for _ in range(4)]
        search_s = context_s = 0.0
        precision = recall = 1.0
        matches_total = 0
        for query in queries:
            start = time.perf_counter()
            matches = codec.suffix_search(query)
            search_s += time.perf_counter() - start
            start = time.perf_counter()
            contexts = matches.contexts()
            context_s += time.perf_counter() - start
            truth = brute_force(stream, np.asarray(query))
            hits = np.intersect1d(matches.positions, truth).size
            found = matches.positions.size
            precision = min(precision, hits / found if found else 1.0)
            recall = min(recall, hits / truth.size if truth.size else 1.0)
            if contexts.shape[0] and not (contexts[:, -s:] == query).all():
                precision = 0.0  # a context that does not end with the query is a false match
            matches_total += truth.size
        per_length.append({
            "s": s,
            "search_us_per_query": 1e6 * search_s / len(queries),
            "contexts_us_per_match": 1e6 * context_s / max(1, matches_total),
            "mean_matches": matches_total / len(queries),
            "precision": precision,
            "recall": recall,
        })
    return {
        "index_build_us_per_symbol": 1e6 * build_s / stream.size,
        "index_bytes_per_symbol": index.nbytes / stream.size,
        "by_query_length": per_length,
    }


def sweep(n: int, rng: np.random.Generator) -> dict:
    """Round trip of both codecs on n uniform symbols for every alphabet size in SWEEP_ALPHABETS."""
    failures: list[dict] = []
    start = time.perf_counter()
    for alphabet in SWEEP_ALPHABETS:
        stream = rng.integers(0, alphabet, n)
        positions = rng.integers(0, n, SWEEP_SYMBOL_AT)
        for codec_cls in (BitPackedCodec, ChaosGameCodec):
            codec = codec_cls.encode(stream, alphabet)
            data = codec.to_bytes()
            grown = codec_cls.encode(stream[: n // 3], alphabet)
            for at in range(n // 3, n, 65_536):
                grown.append(stream[at : at + 65_536])
            checks = {
                "decode": np.array_equal(codec.decode(), stream),
                "from_bytes": np.array_equal(codec_cls.from_bytes(data).decode(), stream),
                "symbol_at": [codec.symbol_at(int(i)) for i in positions] == stream[positions].tolist(),
                "append": grown.to_bytes() == data,
            }
            bad = [name for name, ok in checks.items() if not ok]
            if bad:
                failures.append({"alphabet": alphabet, "codec": codec_cls.__name__, "failed": bad})
    return {"alphabets": f"{SWEEP_ALPHABETS.start}..{SWEEP_ALPHABETS.stop - 1}",
            "count": len(SWEEP_ALPHABETS), "symbols_per_alphabet": n,
            "symbols_total": n * len(SWEEP_ALPHABETS), "failures": failures,
            "seconds": time.perf_counter() - start}


def machine() -> dict:
    return {
        "processor": platform.processor() or platform.machine(),
        "nproc": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "numpy": np.__version__,
    }


def run(out_dir: Path, n: int = 1_000_000, sweep_n: int = SWEEP_SYMBOLS) -> dict:
    """Run every configuration on n-symbol streams; write codec.json and codec.md to out_dir."""
    rng = np.random.default_rng(SEED)
    rows = []
    for alphabet in ALPHABETS:
        for distribution in DISTRIBUTIONS:
            stream = make_stream(distribution, alphabet, n, rng)
            packed, _ = measure_codec(BitPackedCodec, stream, alphabet, rng)
            chaos, chaos_codec = measure_codec(ChaosGameCodec, stream, alphabet, rng)
            search = measure_search(chaos_codec, stream, alphabet, rng)
            rows.append({
                "alphabet": alphabet,
                "distribution": distribution,
                "span": chaos_codec.span,
                "bitpacked": packed,
                "chaos": chaos,
                "suffix_search": search,
                "chaos_over_bitpacked": {
                    key: chaos[key] / packed[key]
                    for key in ("encode_us_per_symbol", "decode_us_per_symbol",
                                "symbol_at_us_per_op", "append_us_per_symbol",
                                "payload_bytes_per_symbol")
                },
            })
    report = {
        "command": "grm bench codec" if n == 1_000_000 else f"python bench/codec.py {out_dir} {n}",
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "machine": machine(),
        "threads": {var: os.environ[var] for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                                                       "MKL_NUM_THREADS")},
        "n_symbols": n,
        "zipf_exponent": ZIPF_EXPONENT,
        "results": rows,
        "sweep": sweep(sweep_n, rng),
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "codec.json").write_text(json.dumps(report, indent=2) + "\n")
    (out_dir / "codec.md").write_text(markdown(report))
    return report


def markdown(report: dict) -> str:
    m = report["machine"]
    lines = [
        "# Symbol codecs: bit-packed vs chaos-game anchors",
        "",
        f"Command: `{report['command']}`  ",
        f"Machine: {m['processor']}, nproc {m['nproc']}, {m['platform']}, numpy {m['numpy']}; "
        f"threads pinned to 1  ",
        f"Date: {report['date']}; n = {report['n_symbols']:,} symbols per stream; "
        f"Zipf exponent {report['zipf_exponent']}",
        "",
        "Times in µs (per symbol, per op or per query); sizes in bytes per symbol. "
        "BP = bit-packed, CG = chaos game. Search = mean over s = 1..8 of one cold call per "
        "query (positions only; short queries on small alphabets return up to n/A positions); "
        "P/R = worst precision/recall over all queries vs brute force. Index build in µs/symbol.",
        "",
        "| A | stream | span | round trip | enc BP/CG | dec BP/CG | symbol_at BP/CG "
        "| append BP/CG | B/sym BP | B/sym CG anchors | B/sym index | index build | search "
        "| P/R |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in report["results"]:
        bp, cg, ss = r["bitpacked"], r["chaos"], r["suffix_search"]
        by_s = ss["by_query_length"]
        search = sum(q["search_us_per_query"] for q in by_s) / len(by_s)
        p = min(q["precision"] for q in by_s)
        rc = min(q["recall"] for q in by_s)
        ok = "ok" if bp["round_trip_ok"] and cg["round_trip_ok"] else "FAIL"
        lines.append(
            f"| {r['alphabet']} | {r['distribution']} | {r['span']} | {ok} "
            f"| {bp['encode_us_per_symbol']:.4f} / {cg['encode_us_per_symbol']:.4f} "
            f"| {bp['decode_us_per_symbol']:.4f} / {cg['decode_us_per_symbol']:.4f} "
            f"| {bp['symbol_at_us_per_op']:.2f} / {cg['symbol_at_us_per_op']:.2f} "
            f"| {bp['append_us_per_symbol']:.4f} / {cg['append_us_per_symbol']:.4f} "
            f"| {bp['payload_bytes_per_symbol']:.3f} | {cg['payload_bytes_per_symbol']:.3f} "
            f"| {ss['index_bytes_per_symbol']:.1f} | {ss['index_build_us_per_symbol']:.3f} "
            f"| {search:.1f} | {p:.2f}/{rc:.2f} |"
        )
    lines += ["", "Suffix search µs per query by query length s (positions only):", "",
              "| A | stream | " + " | ".join(f"s={s}" for s in QUERY_LENGTHS) + " |",
              "|---|---|" + "---|" * len(QUERY_LENGTHS)]
    for r in report["results"]:
        cells = " | ".join(f"{q['search_us_per_query']:.1f}"
                           for q in r["suffix_search"]["by_query_length"])
        lines.append(f"| {r['alphabet']} | {r['distribution']} | {cells} |")
    sw = report.get("sweep")
    if sw:
        verdict = ("every check passed" if not sw["failures"] else
                   f"{len(sw['failures'])} FAILURES: " + ", ".join(f"A={f['alphabet']} {f['codec']} {f['failed']}"
                                                             for f in sw["failures"][:10]))
        lines += ["", f"Round-trip sweep: every alphabet size {sw['alphabets']} ({sw['count']} sizes), "
                  f"{sw['symbols_per_alphabet']:,} uniform symbols each ({sw['symbols_total']:,} in all), both "
                  f"codecs: decode, container bytes, symbol_at at {SWEEP_SYMBOL_AT} random positions, and append "
                  f"in 65,536-symbol chunks after a one-shot third (bytes equal to one-shot encoding): "
                  f"{verdict} ({sw['seconds']:.0f} s)."]
    return "\n".join(lines) + "\n"


def main(args: object) -> int:
    """`grm bench codec`: the full run into bench/results/ (--quick: 10^5 symbols, not committed)."""
    quick = getattr(args, "quick", False)
    target = Path(__file__).resolve().parent / "results"
    if quick:
        target = Path(tempfile.mkdtemp(prefix="grm-bench-codec-"))
    run(target, 100_000 if quick else 1_000_000, SWEEP_SYMBOLS // 10 if quick else SWEEP_SYMBOLS)
    print((target / "codec.md").read_text())
    return 0


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else Path("bench/results")
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 1_000_000
    result = run(target, count)
    print((target / "codec.md").read_text())
    failed = [r for r in result["results"]
              if not (r["bitpacked"]["round_trip_ok"] and r["chaos"]["round_trip_ok"])]
    sys.exit(1 if failed or result["sweep"]["failures"] else 0)
