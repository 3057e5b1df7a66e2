"""`grm bench scale`: how the local store behaves at 10^4, 10^5 and 10^6 records (issue 17).

Synthetic rows through the public store interface (no model: runs on 2 cores): graft-like rows
of one tenant, each with ~12 words of text from a 20,000-word Zipf vocabulary (so lexical
queries have realistic selectivity), and a 256-byte payload on one row in ten. Each size runs in
a child process that fills the store; a fresh grandchild then opens and uses it, so its memory
is a process that uses a store of that size, not the one that generated it. Per size:

- write rate: rows in transactions of 1,000 (durability normal: the log and each payload file
  fsynced before a transaction returns), automatic checkpoints at the default cadence;
- open: the same rows with no checkpoint and no catalog (the whole log replayed into an empty
  catalog), the store as the fill left it (catalog at the log's end; the log after the last
  checkpoint is read), and right after an explicit checkpoint;
- catalog rebuild (from checkpoint + log, as after a damaged catalog), fsck (every payload
  re-hashed, the catalog compared with checkpoint + log);
- lexical routing: `grm.route.lexical.search` (the graft router's lexical channel, FTS5 BM25)
  for 1,000 queries of 2-4 vocabulary words, p50 / p99;
- resident memory: after open (the routing imports, torch among them, included) and the peak
  of the using process (rebuild and fsck included); disk bytes of the store folder.

`python bench/scale.py [--quick] [--sizes 10000,100000]` or `grm bench scale [--quick]`;
`python bench/scale.py --one N DIR` measures one size (JSON on stdout) and
`python bench/scale.py --from A.json B.json ...` tables such runs.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

SIZES = (10_000, 100_000, 1_000_000)
QUICK_SIZES = (1_000, 10_000)
TXN = 1_000
VOCAB = 20_000
QUERIES = 1_000
TARGETS = {100_000: {"route_p99_ms": 20}, 1_000_000: {"route_p99_ms": 100, "open_ckpt_s": 1.0, "rss_mb": 1024}}



def _zipf_vocab_sampler(seed: int):
    rng = random.Random(seed)
    weights = [1.0 / (i + 1) ** 0.9 for i in range(VOCAB)]
    cum, total = [], 0.0
    for w in weights:
        total += w
        cum.append(total)
    import bisect

    def sample(k: int) -> list[str]:
        return [f"w{bisect.bisect_left(cum, rng.random() * total)}x" for _ in range(k)]
    return rng, sample


def _du(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def _rows(n: int):
    """The n synthetic rows, generated again on each call (same seed): never a list of n."""
    rng, sample = _zipf_vocab_sampler(n)
    for i in range(n):
        text = " ".join(sample(12))
        yield f"g{i:07d}", text, rng.randbytes(256) if i % 10 == 0 else None


def _fill(s, n: int) -> None:
    from grm.store.kinds import GRAFT

    rows = _rows(n)
    for _ in range(0, n, TXN):
        with s.transaction() as txn:
            for key, text, payload in itertools.islice(rows, TXN):
                txn.put("bench", GRAFT, key, text=text, payload=payload, meta={"n": len(text)})


def one(n: int, root: Path) -> dict:
    """Fill one size in this process (a child), then measure it in a fresh child (`use`), whose
    peak RSS is a process that opens and uses the store, not the one that generated the rows."""
    from grm.store import Store, StoreConfig

    out: dict = {"records": n}
    s = Store.open(StoreConfig(root=root))  # default cadence: checkpoints as the store grows
    t = time.perf_counter()
    _fill(s, n)
    out["write_s"] = time.perf_counter() - t
    out["write_rows_per_s"] = n / out["write_s"]
    out["checkpoints_during_fill"] = s.counters["checkpoints_written"]
    s.close()
    out["open_no_ckpt_s"] = _open_whole_log(n, root.parent / "no-checkpoint")
    out["fill_rss_mb"] = _peak_rss_mb()
    done = subprocess.run([sys.executable, __file__, "--use", str(n), str(root)], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(done.stderr.strip().splitlines()[-1] if done.stderr else "use phase failed")
    out.update(json.loads(done.stdout.strip().splitlines()[-1]))
    out["disk_bytes"] = _du(root)
    out["disk_bytes_per_record"] = out["disk_bytes"] / n
    return out


def use(n: int, root: Path) -> dict:
    """Open, rebuild the catalog, fsck, checkpoint, open again, route 1,000 queries."""
    from grm.route.lexical import LexicalConfig, search
    from grm.store import Store, StoreConfig
    from grm.store.kinds import GRAFT

    out: dict = {"rss_imports_mb": _rss_now_mb()}  # the process before any store: imports (torch) alone
    cfg = StoreConfig(root=root)
    t = time.perf_counter()
    s = Store.open(cfg)
    out["open_as_left_s"] = time.perf_counter() - t  # its last checkpoint + the log after it
    t = time.perf_counter()
    s._rebuild_catalog()  # from checkpoint + log, as after a damaged catalog
    out["catalog_rebuild_s"] = time.perf_counter() - t
    t = time.perf_counter()
    report = s.fsck()
    out["fsck_s"] = time.perf_counter() - t
    assert not report.damaged and not report.orphans and report.catalog_ok, report
    t = time.perf_counter()
    s.checkpoint()
    out["checkpoint_s"] = time.perf_counter() - t
    s.close()
    t = time.perf_counter()
    s = Store.open(cfg)
    out["open_ckpt_s"] = time.perf_counter() - t
    out["rss_after_open_mb"] = _rss_now_mb()
    assert len(s._state) == n

    _, sample = _zipf_vocab_sampler(n + 1)  # the rows' distribution, other draws
    qrng = random.Random(7)
    lat, cpu, hits = [], [], 0
    config = LexicalConfig()
    for _ in range(QUERIES):
        q = " ".join(sample(qrng.randint(2, 4)))
        t, c = time.perf_counter(), time.process_time()
        found = search(s, "bench", q, GRAFT, config)
        lat.append((time.perf_counter() - t) * 1000)
        cpu.append((time.process_time() - c) * 1000)  # this process's CPU: the machine's load left out
        hits += bool(found)
    lat.sort()
    cpu.sort()
    out["route_p50_ms"] = statistics.median(lat)
    out["route_p99_ms"] = lat[int(0.99 * len(lat)) - 1]
    out["route_cpu_p50_ms"] = statistics.median(cpu)
    out["route_cpu_p99_ms"] = cpu[int(0.99 * len(cpu)) - 1]
    out["route_hit_rate"] = hits / QUERIES
    out["rss_after_route_mb"] = _rss_now_mb()
    s.close()
    out["rss_mb"] = _peak_rss_mb()  # peak, fsck and rebuild included
    return out


def _peak_rss_mb() -> float:
    """This process's peak RSS (VmHWM): ru_maxrss would carry the parent's peak across exec."""
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:")) / 1024


def _rss_now_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _open_whole_log(n: int, root: Path) -> float:
    """Open time of the same rows with no checkpoint at all (the whole log replayed); filled
    volatile, so the fill is fast."""
    from grm.store import Store, StoreConfig

    cfg = StoreConfig(root=root, checkpoint_every=10**9, durability="volatile")
    with Store.open(cfg) as s:
        _fill(s, n)
    os.remove(root / "catalog.sqlite")  # else open finds the catalog at the log's end: no replay
    for extra in ("catalog.sqlite-wal", "catalog.sqlite-shm"):
        if (root / extra).exists():
            os.remove(root / extra)
    t = time.perf_counter()
    Store.open(cfg).close()
    took = time.perf_counter() - t
    shutil.rmtree(root, ignore_errors=True)
    return took


def _child(n: int) -> dict:
    work = Path(tempfile.mkdtemp(prefix=f"grm-scale-{n}-"))
    try:
        done = subprocess.run([sys.executable, __file__, "--one", str(n), str(work / "store")],
                              capture_output=True, text=True)
        if done.returncode != 0:
            return {"records": n, "error": done.stderr.strip().splitlines()[-1] if done.stderr else "failed"}
        return json.loads(done.stdout.strip().splitlines()[-1])
    finally:
        shutil.rmtree(work, ignore_errors=True)


COLUMNS = ("| records | write rows/s | open, whole log (s) | open as left (s) | open, fresh ckpt (s) | checkpoint (s) "
           "| catalog rebuild (s) | fsck (s) | lexical route p50 (ms) | p99 (ms) | RSS after open (MB) "
           "| peak RSS (MB) | disk (MiB) |")


def _fmt(r: dict) -> str:
    if "error" in r:
        return f"| {r['records']:,} | error: {r['error']} |" + " |" * 12
    return (f"| {r['records']:,} | {r['write_rows_per_s']:,.0f} | {r['open_no_ckpt_s']:.2f} | {r['open_as_left_s']:.2f} "
            f"| {r['open_ckpt_s']:.2f} "
            f"| {r['checkpoint_s']:.2f} | {r['catalog_rebuild_s']:.2f} | {r['fsck_s']:.2f} | {r['route_p50_ms']:.2f} "
            f"| {r['route_p99_ms']:.2f} | {r['rss_after_open_mb']:.0f} | {r['rss_mb']:.0f} "
            f"| {r['disk_bytes'] / 2**20:.1f} |")


NOTES = """
## What the numbers say (and what is not done)

- **Host state not resident** (a plain local store): the rows live in the SQLite catalog
  (`grm.store.state.CatalogState`), read on demand with a per-row CRC32C. Open finds the catalog
  at an LSN between the checkpoint's and the log's end and replays only the log after it: no
  row is read, so "open, fresh ckpt" does not grow with the rows. "Open as left" still reads
  (CRC + JSON) every log frame after the last automatic checkpoint to find the log's end (up to
  a quarter of the rows at the default cadence). A catalog that is missing, of another schema,
  behind the checkpoint, ahead of the log (loss evidence first) or damaged (SQLite error, a row
  failing its CRC, on open or on any later read) is rebuilt from checkpoint + log, streamed.
  Encrypted stores (no plaintext on disk), MemoryFS stores and read-only opens stay resident
  (a dict of rows and an in-memory catalog filled at open), as before.
- **Checkpoints stream** (format 2: one JSON line per row, CRC in a trailer; format 1 is still
  read), so writing one does not hold every row in memory; fsck compares the catalog with
  checkpoint + log by an order-free digest of the row set (memory bounded by the log since the
  checkpoint, not the rows), and checks payloads against checkpoint + log, never the catalog.
- **Resident memory**: "RSS after open" includes the routing imports (torch comes in with
  `grm.route`: about 254 MB before any store is opened, `rss_imports_mb` in the JSON); the peak
  includes the catalog rebuild and fsck.
- **Lexical routing**: on a catalog of more than 20,000 rows each query's work is bounded:
  tokens are kept rarest first while their rows (estimated on the newest 4,096 rows) add up to
  at most 3,000, the rarest always; if even the rarest is in more, only the newest rows expected
  to hold 3,000 of it are scored. Ranking in the FTS index first, then filtering by tenant,
  kind and state (exact whenever enough rows pass, else the joined query). Smaller catalogs are
  searched exactly as asked: on the recall benchmark's corpus (87 sections, 100 questions) the
  top-50 lists are identical before and after, with or without the size gate. The p99 wall
  times are taken on a shared 2-core machine with a load average of 7-10 from other work: a
  query is preempted now and then, so the CPU time per query (`route_cpu_p50_ms`,
  `route_cpu_p99_ms` in the JSON) is given beside it.
- **How this table was made**: each size filled once (`--one N DIR`); for 10^5 and 10^6 the use
  phase (`--use N DIR`: open after a checkpoint, rebuild, fsck, routing, RSS) was run again on
  the filled store, because the first run's peak RSS (ru_maxrss) carried the filling parent's
  peak across exec (now VmHWM). "Open as left" and "checkpoint" are the first run's; the first
  run's other use figures are kept in the JSON (`first_use`): its routing p99 was 27.1 ms at 10^5
  (load ~7) and 46.3 ms at 10^6 (the store tests were running beside it), CPU p99 5.9 / 9.5 ms.
- **Not bounded yet**: recovery parses every live log frame into memory (`grm.store.log.
  read_segment`) before replaying: the filling process peaked at 2.35 GB opening the 10^6 store
  that has no checkpoint (the whole log live); with the default cadence the live log is at most
  a quarter of the rows (open as left at 10^6: 3.5 s; checked apart: 128,000 live frames over
  the 10^6 store opened in 5.0 s at a peak RSS of 311 MB, store imports only). `records(tenant, kind)` still returns
  every matching row (O(matches) per call), and gc's scans are O(rows).
- **Write rate** is bounded by fsyncs (durability normal: the log once per transaction, each
  payload file and its folder before the log record naming it).
"""


def _verdicts(rows: list[dict]) -> list[str]:
    lines = []
    for r in rows:
        for key, limit in TARGETS.get(r["records"], {}).items():
            if key in r:
                ok = r[key] < limit
                lines.append(f"- {r['records']:,} records: {key} = {r[key]:.2f} (target < {limit}): "
                             f"{'met' if ok else 'NOT met'}")
    return lines


def main(args) -> int:
    from bench._common import write_results

    rows = []
    if getattr(args, "from_files", None):  # sizes measured one by one (`--one N DIR`), tabled here
        for path in args.from_files:
            rows.append(json.loads(Path(path).read_text().strip().splitlines()[-1]))
        rows.sort(key=lambda r: r["records"])
        sizes = tuple(r["records"] for r in rows)
        cmd = "python bench/scale.py --one N DIR (each size on its own, N = " + ", ".join(map(str, sizes)) + \
            "); python bench/scale.py --from THEIR-OUTPUTS"
    else:
        sizes = QUICK_SIZES if getattr(args, "quick", False) else tuple(getattr(args, "sizes", None) or SIZES)
        for n in sizes:
            r = _child(n)
            print(json.dumps(r), file=sys.stderr, flush=True)
            rows.append(r)
        cmd = "python bench/scale.py" + (f" --sizes {','.join(map(str, sizes))}" if not getattr(args, "quick", False) else "")
    table = [COLUMNS, "|---" * COLUMNS.count("| ") + "|"] + [_fmt(r) for r in rows]
    table += ["", "Targets:"] + (_verdicts(rows) or ["- (no size with a target was run)"]) + NOTES.splitlines()
    write_results("scale", {"sizes": list(sizes), "results": rows, "targets": {str(k): v for k, v in TARGETS.items()}},
                  table, cmd, quick=getattr(args, "quick", False))
    print("\n".join(table))
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] in ("--one", "--use"):
        print(json.dumps((one if sys.argv[1] == "--one" else use)(int(sys.argv[2]), Path(sys.argv[3]))))
        sys.exit(0)
    import argparse

    p = argparse.ArgumentParser()
    p.add_argument("--quick", action="store_true")
    p.add_argument("--sizes", type=lambda t: [int(x) for x in t.split(",")], default=None)
    p.add_argument("--model", default=None)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--from", dest="from_files", nargs="+", default=None, metavar="JSON",
                   help="table the outputs of earlier `--one N DIR` runs instead of running")
    sys.exit(main(p.parse_args()))
