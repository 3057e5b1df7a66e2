"""Corruption and I/O-error sweeps (used by tests/store and bench/reliability.py).

Byte flips: a small store (log segment after a checkpoint, the checkpoint, payload files) is
built on a MemoryFS; then every byte of the log and the checkpoint, and sampled bytes of each
payload file, is flipped in turn and the store recovered from the damaged copy. Each flip must
end as one of: the exact state after some earlier commit (a prefix), a typed CorruptionError,
or a payload miss (read_payload -> None) - never a wrong row or wrong bytes. The catalog sweep
does the same to catalog.sqlite on the local disk: it ends in a rebuild, or fsck finds the drift,
and searches only ever return the true rows.

I/O errors: the n-th I/O call (open, write, fsync, rename, directory sync, remove, truncate,
mkdir) fails for n = 1, 2, ... (a write fails with ENOSPC after half its bytes, an fsync with
EIO); after the store is reopened, it holds the state after the last acknowledged call or after
the failed one (never anything else) and every payload it serves verifies.
"""

from __future__ import annotations

import errno
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from grm.errors import CorruptionError, GrmError
from grm.store.config import StoreConfig
from grm.store.memfs import MemoryFS
from tests.sim.workloads import view_of
from grm.store.store import Store

ROOT = "/f"


@dataclass
class SweepReport:
    flips: int = 0
    prefix: int = 0  # opened at an earlier (or the final) committed state
    corruption: int = 0  # CorruptionError
    misses: int = 0  # payload reads that returned None
    rebuilds: int = 0  # catalog rebuilds (catalog sweep)
    violations: list[str] = field(default_factory=list)

    def add(self, other: SweepReport) -> None:
        for k in ("flips", "prefix", "corruption", "misses", "rebuilds"):
            setattr(self, k, getattr(self, k) + getattr(other, k))
        self.violations += other.violations


def _workload(s: Store, step: Callable[[], None]) -> None:
    """Puts with parents, payloads and text, a transaction, set_state and delete; with
    checkpoint_every=8 the log rotates once."""
    for i in range(5):
        s.put("t", "block", f"b{i}", parent=f"b{i - 1}" if i else None, payload=bytes([i]) * (40 + i),
              text=f"block {i}", meta={"i": i})
        step()
    with s.transaction() as txn:
        txn.put("t", "doc", "d", payload=b"document bytes", text="a document")
        txn.set_state("t", "block", "b0", "superseded")
    step()
    s.delete("t", "block", "b1")
    step()
    s.put("u", "block", "b0", payload=bytes([0]) * 40, text="other tenant")
    step()


def _build(**kw) -> tuple[StoreConfig, list[tuple[int, frozenset]], dict]:
    cfg = StoreConfig(root=ROOT, fs=MemoryFS(), checkpoint_every=8, **kw)
    s = Store.open(cfg)
    states = [(s.last_lsn, view_of(s))]
    payloads: dict = {}

    def step() -> None:
        states.append((s.last_lsn, view_of(s)))
        payloads.update({(r.tenant, r.payload): s.read_payload(r) for r in s.records() if r.payload})

    _workload(s, step)
    s.close()
    return cfg, states, payloads


def _files(fs: MemoryFS, root: str) -> dict[str, bytes]:
    out = {}
    for name in fs.listdir(root):
        p = os.path.join(root, name)
        if fs.is_dir(p):
            out.update(_files(fs, p))
        else:
            out[p] = fs.read_bytes(p)
    return out


def _check_open(cfg: StoreConfig, states, payloads, rep: SweepReport, where: str) -> None:
    try:
        s = Store.open(cfg)
    except CorruptionError:
        rep.corruption += 1
        return
    except GrmError as e:
        rep.violations.append(f"{where}: untyped failure {type(e).__name__}: {e}")
        return
    with s:
        if (s.recovered_lsn, view_of(s)) not in states:
            rep.violations.append(f"{where}: recovered rows at lsn {s.recovered_lsn} are no committed state")
        else:
            rep.prefix += 1
        for r in s.records():
            if r.payload is None:
                continue
            data = s.read_payload(r)
            if data is None:
                rep.misses += 1
            elif data != payloads.get((r.tenant, r.payload)):
                rep.violations.append(f"{where}: wrong payload bytes served for {r.ident}")


def flip_sweep(payload_samples: int = 16, **kw) -> SweepReport:
    """Every byte of log segments and checkpoints, `payload_samples` bytes of each payload file."""
    cfg, states, payloads = _build(**kw)
    files = _files(cfg.fs, ROOT)  # type: ignore[arg-type]
    rep = SweepReport()
    for path, data in sorted(files.items()):
        if "/log/" in path or "/checkpoints/" in path:
            offsets = range(len(data))
        elif "/payloads/" in path:
            offsets = range(0, len(data), max(1, len(data) // payload_samples))
        else:
            continue
        for i in offsets:
            fs = MemoryFS()
            for p, d in files.items():
                fs.makedirs(os.path.dirname(p))
                h = fs.open_write(p)
                h.write(d)
                h.close()
            fs.raw(path)[i] ^= 1 << (i % 8)
            rep.flips += 1
            _check_open(replace(cfg, fs=fs), states, payloads, rep, f"{path}@{i}")
    return rep


def catalog_sweep(samples: int = 120) -> SweepReport:
    """Flip sampled bytes of a local store's catalog.sqlite; open, search, fsck."""
    rep = SweepReport()
    tmp = Path(tempfile.mkdtemp(prefix="grm-catalog-sweep-"))
    try:
        cfg = StoreConfig(root=tmp / "s", checkpoint_every=8)
        with Store.open(cfg) as s:
            _workload(s, lambda: None)
            truth = {r.key: r for r in s.records("t")}
        catalog = (tmp / "s" / "catalog.sqlite").read_bytes()
        for i in range(0, len(catalog), max(1, len(catalog) // samples)):
            damaged = bytearray(catalog)
            damaged[i] ^= 1 << (i % 8)
            (tmp / "s" / "catalog.sqlite").write_bytes(bytes(damaged))
            rep.flips += 1
            try:
                with Store.open(cfg) as s:
                    rep.rebuilds += s.counters["catalog_rebuilds"]
                    for rec, _ in s.search_text("t", "block document"):
                        if truth.get(rec.key) != rec:
                            rep.violations.append(f"catalog@{i}: search served a row that is not the truth")
                    if not s.fsck(repair=True).catalog_ok:
                        rep.rebuilds += 1
                    keys = sorted(r.key for r, _ in s.search_text("t", "block document"))
                    want = sorted(k for k, r in truth.items() if r.state == "active" and r.text)
                    if keys != want:
                        rep.violations.append(f"catalog@{i}: search after fsck --repair found {keys}")
                    rep.prefix += 1
            except GrmError as e:
                rep.violations.append(f"catalog@{i}: {type(e).__name__}: {e}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return rep


class _FailAt:
    """Delegates to `inner`; the n-th mutating call fails (write: ENOSPC after half the bytes)."""

    def __init__(self, inner: MemoryFS, n: int) -> None:
        self.inner, self.n, self.calls = inner, n, 0

    def _tick(self, what: str, code: int = errno.EIO) -> None:
        self.calls += 1
        if self.calls == self.n:
            raise OSError(code, f"injected failure of {what} (call {self.n})")

    def open_write(self, path: str, *, append: bool = False):
        self._tick("open")
        h, outer = self.inner.open_write(path, append=append), self

        class Handle:
            def write(self, data):
                data = bytes(data)
                try:
                    outer._tick("write", errno.ENOSPC)
                except OSError:
                    h.write(data[:len(data) // 2])
                    raise
                h.write(data)

            def fsync(self):
                outer._tick("fsync")
                h.fsync()

            def close(self):
                h.close()
        return Handle()

    def __getattr__(self, name: str):
        attr = getattr(self.inner, name)
        if name in ("rename", "fsync_dir", "remove", "truncate", "makedirs"):
            def failing(*a, **k):
                self._tick(name)
                return attr(*a, **k)
            return failing
        return attr


def io_error_loop(durability: str = "normal", limit: int = 2000) -> SweepReport:
    """Fail the n-th I/O call for n = 1, 2, ... until the workload runs clean."""
    cfg0, states, payloads = _build(durability=durability, async_flush_ms=3_600_000)  # deterministic call order
    rep = SweepReport()
    for n in range(1, limit + 1):
        inner = MemoryFS()
        faulty = _FailAt(inner, n)
        done: list[tuple[int, frozenset]] = [(0, frozenset())]
        s = None
        try:
            s = Store.open(replace(cfg0, fs=faulty))
            done.append((s.last_lsn, view_of(s)))
            _workload(s, lambda: done.append((s.last_lsn, view_of(s))))
        except GrmError:
            pass
        finally:
            if s is not None:
                s.close()
        if faulty.calls < n:
            break  # the workload finished before the n-th call: every call has failed once
        rep.flips += 1
        k = len(done) - 1
        allowed = [done[-1]] + [st for st in [(0, frozenset())] + states if st not in done][:1]
        _check_open(replace(cfg0, fs=inner), allowed, payloads, rep, f"fail call {n}")
        if rep.violations and rep.violations[-1].startswith(f"fail call {n}:"):
            rep.violations[-1] += f" (acknowledged steps: {k})"
    return rep
