"""Store reliability: write/read throughput per durability mode against the raw disk, measured
side by side in one run, plus the counts of the crash-image, byte-flip and I/O-error suites.

Throughput: N records of S bytes of random (incompressible) payload, one `put` each, into a fresh
store on the local disk; read = `read_payload` of every record (read + SHA-256 verify, and
decrypt for the encrypted row) after reopening. Raw disk: the same bytes with plain os calls in
the same folder - one file each, write + fsync + close (the per-record cost the fsync modes pay),
and reading them back. Shapes: 200 x 256 KB and 2,000 x 4 KB (quick: 40 x 256 KB, 400 x 4 KB).
Issue 14 rows (bench/lib/reliability_sweeps.py): flips of every byte of the log meta, salvage of
a 1,000-record log damaged at random offsets, and a plaintext scan of an encrypted store.
The attacks section (issue 31) is bench/reliability_attacks.py's: kept as it is when this runs.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from _common import run_cli, write_results  # noqa: E402
from reliability_attacks import carried  # noqa: E402

from grm.store import Store, StoreConfig  # noqa: E402
from bench.lib import reliability_sweeps as sweeps  # noqa: E402
from tests.sim import flips  # noqa: E402
from tests.sim.crash import check_run  # noqa: E402
from tests.sim.workloads import WORKLOADS  # noqa: E402

MODES = ("volatile", "async", "normal", "full", "strict")
KEY = bytes(range(32))


def _raw(work: Path, blobs: list[bytes]) -> tuple[float, float]:
    d = work / "raw"
    d.mkdir()
    t = time.perf_counter()
    for i, b in enumerate(blobs):
        fd = os.open(d / f"{i}", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.write(fd, b)
        os.fsync(fd)
        os.close(fd)
    dfd = os.open(d, os.O_RDONLY)
    os.fsync(dfd)
    os.close(dfd)
    w = time.perf_counter() - t
    t = time.perf_counter()
    for i in range(len(blobs)):
        with open(d / f"{i}", "rb", buffering=0) as f:
            f.readall()
    r = time.perf_counter() - t
    shutil.rmtree(d)
    return w, r


def _store(work: Path, mode: str, blobs: list[bytes], **kw) -> tuple[float, float]:
    root = work / f"store-{mode}"
    cfg = StoreConfig(root, durability=mode, **kw)
    t = time.perf_counter()
    with Store.open(cfg) as s:
        for i, b in enumerate(blobs):
            s.put("bench", "block", f"k{i}", payload=b)
    w = time.perf_counter() - t  # includes close: async's final flush is part of the cost
    with Store.open(cfg) as s:
        recs = list(s.records("bench"))
        t = time.perf_counter()
        for rec in recs:
            assert s.read_payload(rec) is not None
        r = time.perf_counter() - t
    shutil.rmtree(root)
    return w, r


def throughput(quick: bool) -> list[dict]:
    shapes = [(40, 256 << 10), (400, 4 << 10)] if quick else [(200, 256 << 10), (2000, 4 << 10)]
    rows = []
    work = Path(tempfile.mkdtemp(prefix="grm-bench-reliability-"))  # $TMPDIR: point it at the disk to measure
    try:
        for n, size in shapes:
            blobs = [os.urandom(size) for _ in range(n)]
            mb = n * size / 1e6
            raw_w, raw_r = _raw(work, blobs)
            rows.append({"shape": f"{n} x {size >> 10} KB", "mode": "raw disk (os write+fsync / read)",
                         "write_s": raw_w, "read_s": raw_r, "mb": mb, "records": n})
            variants = [(m, {}) for m in MODES] + [("normal", {"master_key": KEY}), ("normal", {"compress": True})]
            for mode, kw in variants:
                w, r = _store(work, mode, blobs, **kw)
                label = mode + (" + AES-GCM" if "master_key" in kw else " + zstd" if kw else "")
                rows.append({"shape": f"{n} x {size >> 10} KB", "mode": label, "write_s": w, "read_s": r,
                             "mb": mb, "records": n})
    finally:
        shutil.rmtree(work, ignore_errors=True)
    for row in rows:
        row["write_mb_s"] = row["mb"] / row["write_s"]
        row["read_mb_s"] = row["mb"] / row["read_s"]
        row["write_records_s"] = row["records"] / row["write_s"]
        row["read_records_s"] = row["records"] / row["read_s"]
    return rows


def suites(quick: bool) -> dict:
    logging.disable(logging.WARNING)
    out: dict = {"crash_images": {}, "flips": {}, "io_errors": {}}
    subsets = 4 if quick else 16
    for name, make in WORKLOADS.items():
        rep = check_run(name, make(), subsets=subsets)
        out["crash_images"][name] = {"ops": rep.ops, "crash_points_x_variants": rep.images,
                                     "distinct_images": rep.distinct, "violations": len(rep.violations)}
    for name, fn in [("log+checkpoint+payloads", lambda: flips.flip_sweep()),
                     ("encrypted log+checkpoint+payloads",
                      lambda: flips.flip_sweep(master_key=KEY, compress=True)),
                     ("catalog.sqlite (sampled)", lambda: flips.catalog_sweep(60 if quick else 120))]:
        rep = fn()
        out["flips"][name] = {"flips": rep.flips, "prefix": rep.prefix, "corruption_error": rep.corruption,
                              "payload_misses": rep.misses, "catalog_rebuilds": rep.rebuilds,
                              "violations": len(rep.violations)}
    for mode in ("normal", "async", "strict"):
        rep = flips.io_error_loop(mode)
        out["io_errors"][mode] = {"failed_calls": rep.flips, "reopened_clean": rep.prefix,
                                  "violations": len(rep.violations)}
    out["meta_flips"] = {name: sweeps.meta_flip_sweep(enc).to_json()
                         for name, enc in (("plain", False), ("encrypted", True))}
    out["salvage"] = {k: v.to_json() for k, v in
                      sweeps.salvage_sweep(records=200 if quick else 1000, trials=4 if quick else 12).items()}
    out["plaintext_scan"] = sweeps.plaintext_scan()
    logging.disable(logging.NOTSET)
    return out


def main(args: argparse.Namespace) -> int:
    quick = bool(getattr(args, "quick", False))
    rows = throughput(quick)
    counts = suites(quick)
    table = ["| shape | mode | write MB/s | write rec/s | read MB/s | read rec/s | write vs raw |",
             "|---|---|---|---|---|---|---|"]
    raw: dict[str, dict] = {}
    for r in rows:
        if r["mode"].startswith("raw"):
            raw[r["shape"]] = r
        ratio = r["write_mb_s"] / raw[r["shape"]]["write_mb_s"]
        table.append(f"| {r['shape']} | {r['mode']} | {r['write_mb_s']:.1f} | {r['write_records_s']:.0f} | "
                     f"{r['read_mb_s']:.1f} | {r['read_records_s']:.0f} | {ratio:.2f}x |")
    ci = counts["crash_images"]
    table += ["", "| suite | checked | distinct images / outcomes | violations |", "|---|---|---|---|",
              f"| crash images ({len(ci)} workloads) | {sum(v['crash_points_x_variants'] for v in ci.values())} "
              f"crash points x variants | {sum(v['distinct_images'] for v in ci.values())} distinct images recovered | "
              f"{sum(v['violations'] for v in ci.values())} |"]
    for name, v in counts["flips"].items():
        table.append(f"| byte flips: {name} | {v['flips']} flips | {v['prefix']} prefix, {v['corruption_error']} "
                     f"CorruptionError, {v['payload_misses']} payload misses, {v['catalog_rebuilds']} catalog "
                     f"rebuilds | {v['violations']} |")
    for mode, v in counts["io_errors"].items():
        table.append(f"| I/O error loop ({mode}) | {v['failed_calls']} failed calls | {v['reopened_clean']} "
                     f"reopened with the acknowledged state | {v['violations']} |")
    for name, v in counts["meta_flips"].items():
        table.append(f"| byte flips: every byte of the log meta ({name}) | {v['cases']} flips | {v['opened']} prefix, "
                     f"{v['corruption']} CorruptionError -> {v['salvaged']} salvaged; {v['recovered']}/{v['intact']} "
                     f"intact records served, {v['lost']} lost ({v['lost_named']} named), {v['wrong']} wrong rows | "
                     f"{v['violations']} |")
    for kind, v in counts["salvage"].items():
        table.append(f"| salvage: {kind} at random offsets of a {200 if quick else 1000}-record log | {v['cases']} "
                     f"cases | {v['opened']} opened, {v['salvaged']} salvaged; records recovered {v['recovered']} vs "
                     f"intact {v['intact']}; {v['lost']} lost ({v['lost_named']} named); {v['wrong']} wrong serves | "
                     f"{v['violations']} |")
    ps = counts["plaintext_scan"]
    table.append(f"| plaintext scan: encrypted store after sections ingest + chat ({ps['model']}) | {ps['needles']} "
                 f"distinctive words and paths x {ps['files']} files ({ps['bytes']} bytes) + token-id arrays | "
                 f"{ps['hits']} hits | {ps['hits']} |")
    table += ["", "Raw disk = the same bytes, one file each, os.write + fsync + close, then read back. Store write "
              "includes close (async's last flush). Store read = read_payload (read + SHA-256, + AES-GCM for the "
              "encrypted row). Crash images: every prefix of each workload's I/O log, variants all / none / "
              f"{'4' if quick else '16'} random subsets / torn / zeros / hole. Meta flips: each byte of each put's "
              "meta JSON (plain) or sealed fields (encrypted) flipped; a store that refuses to open is salvaged "
              "(grm fsck --salvage); named = listed in fsck's lost (by key, or keyed id when its frame is "
              "unreadable). Salvage: one transaction per record; intact = records whose frames the damage did not "
              "touch; a cut tail opens as is and the catalog ahead of the log names what was lost. "
              + ("Quick run: smaller shapes." if quick else "")]
    kept_md, kept_json = carried()  # bench/reliability_attacks.py's section: kept, not rewritten here
    write_results("reliability", {"quick": quick, "throughput": rows, "suites": counts,
                                  **({"attacks": kept_json} if kept_json and not quick else {})},
                  table + (["", kept_md] if kept_md and not quick else []), "grm bench reliability", quick=quick)
    print("\n".join(table))
    return 0


if __name__ == "__main__":
    run_cli(main)
