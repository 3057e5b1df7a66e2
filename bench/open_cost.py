"""What opening a runtime costs a new process, with the self-test run vs kept (grm/dialects/selftest.py
`kept_self_test`): `Runtime.open` three times in one process (the model folder in the page cache),
the first after `<cache>/selftest` is emptied (the test runs and its result is kept), the next two
with it kept; then the self-test itself run vs a kept hit, median of 3, on the opened model.

`python bench/open_cost.py --model qwen2.5-coder-1.5b --threads 2`
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import run_cli, write_results  # noqa: E402


def main(args: argparse.Namespace) -> int:
    from grm.dialects import kept_self_test, self_test
    from grm.dialects.selftest import PROBE_TEXT
    from grm.runtime import Runtime

    opens: list[float] = []
    with tempfile.TemporaryDirectory() as d:
        for i in range(3):
            t = time.perf_counter()
            rt = Runtime.open(store=Path(d) / "s", model=args.model, threads=args.threads)
            if i == 0:
                rt.close()  # the cache dir is the runtime's: empty it, then open again with the test run
                shutil.rmtree(rt.config.cache_dir / "selftest", ignore_errors=True)
                t = time.perf_counter()
                rt = Runtime.open(store=Path(d) / "s", model=args.model, threads=args.threads)
            opens.append(time.perf_counter() - t)
            if i < 2:
                rt.close()
        ids = list(rt.lm.tokenizer.sink_ids) + rt.lm.tokenizer.encode(PROBE_TEXT)
        run, hit = [], []
        for _ in range(3):
            t = time.perf_counter()
            self_test(rt.dialect, rt.lm.model, ids)
            run.append(time.perf_counter() - t)
            t = time.perf_counter()
            kept_self_test(rt.dialect, rt.lm.model, ids, rt.lm.identity, rt.config.cache_dir)
            hit.append(time.perf_counter() - t)
        res = {"model": rt.lm.name, "dtype": str(rt.lm.model.dtype).replace("torch.", ""), "threads": args.threads,
               "open_test_run_s": round(opens[0], 2), "open_kept_s": [round(x, 2) for x in opens[1:]],
               "self_test_run_s": round(statistics.median(run), 3), "self_test_kept_s": round(statistics.median(hit), 4),
               "probe_tokens": len(ids)}
        rt.close()
    table = ["| model | dtype | threads | Runtime.open, self-test run | Runtime.open, kept (two opens) | "
             "self-test run (median of 3) | kept hit | probe tokens |", "|---|---|---|---|---|---|---|---|",
             f"| {res['model']} | {res['dtype']} | {res['threads']} | {res['open_test_run_s']} s | "
             f"{' / '.join(f'{x} s' for x in res['open_kept_s'])} | {res['self_test_run_s']} s | "
             f"{res['self_test_kept_s'] * 1000:.1f} ms | {res['probe_tokens']} |", "",
             "One process, the model folder in the page cache (its first load is not timed); the opens alternate "
             "with nothing else of this process. The machine's other jobs weigh on every figure alike."]
    write_results(f"open-cost-{res['model']}", res, table, f"python bench/open_cost.py --model {args.model} --threads {args.threads}")
    print("\n".join(table))
    return 0


if __name__ == "__main__":
    run_cli(main)
