"""Salvage (`grm fsck --salvage`, in the spirit of SQLite's `.recover`): a store whose log is
damaged in the middle - recovery refuses it with a CorruptionError, for every tenant - becomes a
store that opens again, keeping every intact record before and after the damage.

Steps (under the writer lock; a store that recovers cleanly is left untouched):
1. Load the newest checkpoint that validates (damaged ones are set aside).
2. Read every segment leniently: every frame that validates with its segment's salt (header
   checksum or not) is kept, whatever comes before it; each run of bytes that does not validate
   is a damaged range. A frame whose LSN is not above the previous one kept (two writers, a
   stale copy) is not kept either.
3. Replay the kept frames after the checkpoint: a transaction applies only if all its frames
   and its commit are there, in sequence. Everything else is lost: LSNs never seen, frames of
   transactions cut by the damage.
4. Name what was lost, as exactly as the bytes allow: the records of lost frames that are still
   readable (a frame with one bad byte often still parses), else the catalog's rows written at a
   lost LSN (plain stores), else "lsn N".
5. Write, in an order a crash cannot hurt: copies of each damaged range into
   `quarantine/<time>/`, the evidence file (`grm.store.evidence`: fsck reports the lost
   records until `--repair` acknowledges them), a checkpoint of the salvaged state at the
   highest LSN seen, then every old segment, damaged checkpoint and the stored catalog are moved
   into the quarantine folder (moved, never deleted), and a new log generation starts after it.

One log for all tenants, with salvage, rather than a log per tenant: a transaction stays atomic
across tenants (the system tenant's sinks and a tenant's blocks commit together), one fsync per
commit instead of one per tenant touched, one LSN order for checkpoints and readers; damage
costs only the records in the damaged byte range, whichever tenant they belong to.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import time
from dataclasses import dataclass, field

from grm.errors import CorruptionError, StoreError
from grm.store.catalog import Catalog
from grm.store.checkpoint import CheckpointInvalid, read_checkpoint, write_checkpoint
from grm.store.config import StoreConfig
from grm.store.defences import Defences
from grm.store.envelope import Codec, Unauthenticated
from grm.store.evidence import record_loss
from grm.store.fs import FileSystem, LocalFS, OsPaths, atomic_write, ensure_dir
from grm.store.layout import Layout, parse_checkpoint_name, parse_segment_name
from grm.store.log import FRAME, FRAME_SIZE, HEADER, HEADER_SIZE, LogWriter, BadFrame, check_frame, valid_frames_after
from grm.store.recovery import recover
from grm.store.root import open_root
from grm.store.state import HostState


@dataclass
class SalvageReport:
    salvaged: bool  # False: the store recovered cleanly and was left untouched
    records: int  # rows in the store afterwards
    last_lsn: int  # the checkpoint LSN the salvaged store starts from
    kept_frames: int  # committed frames replayed from the damaged log
    lost_lsns: list[str] = field(default_factory=list)  # "a-b" ranges of LSNs lost
    lost: list[str] = field(default_factory=list)  # records lost: tenant/kind/key, tenant/kind/#kid, lsn N
    damaged_ranges: list[str] = field(default_factory=list)  # "segment @offset+bytes"
    quarantined: list[str] = field(default_factory=list)  # paths set aside (relative to the root)
    evidence: str | None = None  # the lost/ file fsck reports until acknowledged

    def to_json(self) -> dict:
        return dict(self.__dict__)


@dataclass
class _Seg:
    path: str
    generation: int
    frames: list[tuple[int, dict]]  # (lsn, body) in file order
    damaged: list[tuple[int, int, list[tuple[int, dict]]]]  # (offset, end, (lsn, body) readable inside it)


_FIELD = re.compile(rb'"(tenant|kind|key|kid|op)":"((?:[^"\\]|\\.){1,1100})"')


def _fields(raw: bytes) -> dict:
    """A body that no longer parses as JSON (a damaged byte in its meta, say): the identity
    fields that still read as JSON strings. Never used to serve anything, only to name it."""
    out: dict = {}
    for m in _FIELD.finditer(raw):
        try:
            out.setdefault(m.group(1).decode(), json.loads(b'"' + m.group(2) + b'"'))
        except ValueError:
            continue
    return out if {"tenant", "kind"} <= out.keys() and ("key" in out or "kid" in out) else {}


def _readable(data: bytes, off: int, end: int) -> list[tuple[int, dict]]:
    """(lsn, body) still readable in a damaged range: a frame header whose length fits, then
    its JSON, or failing that the identity fields that still read."""
    out = []
    pos = off
    while pos + FRAME_SIZE <= end:
        length, _crc, lsn = FRAME.unpack_from(data, pos)
        if not 0 < length <= end - pos - FRAME_SIZE:
            break
        raw = data[pos + FRAME_SIZE:pos + FRAME_SIZE + length]
        try:
            body = json.loads(raw)
        except ValueError:
            body = _fields(raw)
        if isinstance(body, dict) and body:
            out.append((lsn, body))
        pos += FRAME_SIZE + length
    return out


def _read_lenient(fs: FileSystem, path: str, generation: int) -> _Seg:
    data = fs.read_bytes(path)
    seg = _Seg(path, generation, [], [])
    if len(data) < HEADER_SIZE:
        if any(data):
            seg.damaged.append((0, len(data), []))
        return seg
    salt = HEADER.unpack_from(data, 0)[4]  # a damaged header may still hold the salt; frames prove it
    view, off = memoryview(data), HEADER_SIZE
    while off < len(data):
        try:
            lsn, end = check_frame(view, off, salt)
            body = json.loads(view[off + FRAME_SIZE:end].tobytes())
            if not isinstance(body, dict) or "op" not in body:
                raise ValueError("not a mutation")
        except (BadFrame, ValueError):
            nxt = next(valid_frames_after(data, off, salt, 0), None)
            stop = nxt[0] if nxt is not None else len(data)
            if any(data[off:stop]):  # a zero-filled tail is a torn write, not damage
                seg.damaged.append((off, stop, _readable(data, off, stop)))
            off = stop
            continue
        seg.frames.append((lsn, body))
        off = end
    return seg


def _name(codec: Codec, body: dict, lsn: int) -> str | None:
    if "tenant" not in body or "kind" not in body:
        return None
    if "kid" in body:
        try:
            return f"{body['tenant']}/{body['kind']}/{codec.open_mutation(body, lsn)['key']}"
        except (Unauthenticated, KeyError, TypeError, ValueError):
            return f"{body['tenant']}/{body['kind']}/#{body.get('kid')}"
    return f"{body['tenant']}/{body['kind']}/{body.get('key')}"


def _ranges(lsns: list[int]) -> list[str]:
    out: list[str] = []
    for n in sorted(set(lsns)):
        if out and int(out[-1].split("-")[-1]) == n - 1:
            out[-1] = f"{out[-1].split('-')[0]}-{n}"
        else:
            out.append(str(n))
    return out


def salvage(config: StoreConfig, *, defences: Defences | None = None) -> SalvageReport:
    """Salvage the store `config` names (see the module docstring). StoreError if it cannot run."""
    if config.read_only:
        raise StoreError("salvage writes: open the store without read_only")
    fs = config.fs if config.fs is not None else LocalFS()
    layout = Layout(os.fspath(config.root))
    if not fs.exists(layout.marker):
        raise StoreError(f"{layout.root} is not a GRM store (no marker): nothing to salvage")
    try:
        keyring, lock = open_root(fs, layout, sync=config.syncs, master_key=config.master_key,
                                  timeout=config.lock_timeout)
    except OSError as e:
        raise StoreError(f"cannot open store {layout.root}: {e}") from e
    codec = Codec(keyring, config.compress, defences or Defences())
    try:
        try:
            state = _state(codec)
            rec = recover(fs, layout, state, state.decode_row, read_only=True)
            return SalvageReport(False, len(rec.state), rec.last_lsn, 0)
        except CorruptionError:
            pass
        return _salvage(fs, layout, codec, config.syncs)
    except OSError as e:
        raise StoreError(f"salvage of {layout.root} failed: {e}") from e
    finally:
        lock.release()


def _state(codec: Codec) -> HostState:
    if codec.encrypted:
        return HostState(codec.open_text, codec.open_mutation, codec.open_row)
    return HostState()


def _salvage(fs: FileSystem, layout: Layout, codec: Codec, sync: bool) -> SalvageReport:
    state = _state(codec)
    ckpt_lsn, bad_ckpts = 0, []
    names = sorted(((n, lsn) for n in (fs.listdir(layout.checkpoint_dir) if fs.exists(layout.checkpoint_dir) else [])
                    if (lsn := parse_checkpoint_name(n)) is not None), key=lambda x: -x[1])
    for name, named in names:
        path = os.path.join(layout.checkpoint_dir, name)
        try:
            lsn, rows, mode = read_checkpoint(fs, path, state.decode_row)
            if lsn != named:
                raise CheckpointInvalid(f"holds lsn {lsn}")
        except (CheckpointInvalid, ValueError, KeyError, IndexError, TypeError):
            bad_ckpts.append(path)
            continue
        for r in rows:
            state.put(r)
        state.mode, ckpt_lsn = mode, lsn
        break
    gens = sorted((g, n) for n in fs.listdir(layout.log_dir) if (g := parse_segment_name(n)) is not None)
    segs = [_read_lenient(fs, os.path.join(layout.log_dir, n), g) for g, n in gens]

    kept: list[tuple[int, dict]] = []
    lost_bodies: list[tuple[int, dict]] = []
    last = ckpt_lsn
    for seg in segs:
        for lsn, body in seg.frames:
            if lsn <= ckpt_lsn:
                continue
            if lsn <= last:  # out of sequence: another writer's frame, or a stale copy
                lost_bodies.append((lsn, body))
                continue
            kept.append((lsn, body))
            last = lsn
    applied, pending, lost_lsns = 0, [], []
    expect = ckpt_lsn + 1
    for lsn, body in kept:
        if lsn != expect or (pending and body.get("txn") != pending[0][1].get("txn")):
            lost_lsns += range(expect, lsn)
            lost_bodies += pending
            pending = []
        expect = lsn + 1
        if body["op"] != "commit":
            pending.append((lsn, body))
            continue
        if body.get("count") == len(pending) and all(b.get("txn") == body.get("txn") for _, b in pending):
            for plsn, b in pending:
                state.apply(b, plsn)
            applied += len(pending) + 1
        else:
            lost_bodies += pending
            lost_lsns.append(lsn)
        pending = []
    lost_bodies += pending
    lost_lsns += [lsn for lsn, _ in lost_bodies]
    top = max([last, *(lsn for lsn, _ in lost_bodies)])

    lost_names = {n for lsn, b in lost_bodies if b.get("op") != "commit" and (n := _name(codec, b, lsn))}
    for seg in segs:
        for _off, _end, bodies in seg.damaged:  # frames the checkpoint holds are not lost
            lost_names |= {n for lsn, b in bodies if lsn > ckpt_lsn and b.get("op") not in (None, "commit")
                           and (n := _name(codec, b, lsn))}
    lost_names |= _catalog_names(fs, layout, set(lost_lsns), last, codec)
    named_lsns = set(lost_lsns)
    if not lost_names and named_lsns:
        lost_names = {f"lsn {n}" for n in sorted(named_lsns)}

    stamp = f"{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{os.urandom(3).hex()}"
    qdir = os.path.join(layout.root, "quarantine", stamp)
    ensure_dir(fs, qdir, sync=sync)
    report = SalvageReport(True, 0, top, applied, _ranges(lost_lsns), sorted(lost_names))
    data_of = {seg.path: fs.read_bytes(seg.path) for seg in segs if seg.damaged}
    for seg in segs:
        for off, end, _ in seg.damaged:
            dst = os.path.join(qdir, f"{os.path.basename(seg.path)}@{off}-{end}.bin")
            atomic_write(fs, dst, data_of[seg.path][off:end], sync=sync)
            report.damaged_ranges.append(f"{layout.relative(seg.path)} @{off}+{end - off}")
            report.quarantined.append(layout.relative(dst))
    if report.lost or report.damaged_ranges or bad_ckpts:
        report.evidence = record_loss(
            fs, layout, reason=f"salvage of a damaged log: LSNs {', '.join(report.lost_lsns) or 'none'} lost",
            log_lsn=last, evidence_lsn=top, records=report.lost, kept=[layout.relative(qdir)], sync=sync)
    write_checkpoint(fs, layout.checkpoint(top), top, state.iter_all(), sync=sync, mode=state.mode,
                     encode_row=codec.seal_row)
    moving = [seg.path for seg in segs] + bad_ckpts
    if isinstance(fs, OsPaths) and fs.exists(layout.catalog):
        moving += [layout.catalog + s for s in ("", "-wal") if fs.exists(layout.catalog + s)]
    for path in moving:
        dst = os.path.join(qdir, os.path.basename(path))
        fs.rename(path, dst)
        report.quarantined.append(layout.relative(dst))
    if fs.exists(layout.catalog + "-shm"):
        fs.remove(layout.catalog + "-shm")
    if sync:
        for folder in (qdir, layout.log_dir, layout.checkpoint_dir, layout.root):
            fs.fsync_dir(folder)
    gen = (gens[-1][0] if gens else 0) + 1
    LogWriter.create(fs, layout.segment(gen), gen, top + 1, os.urandom(8), sync).close()
    report.records = len(state)
    return report


def _catalog_names(fs: FileSystem, layout: Layout, lsns: set[int], last: int, codec: Codec) -> set[str]:
    """Rows the stored catalog (plain stores) last saw written at one of `lsns`, or after the
    last LSN the log still holds (a damaged tail)."""
    if codec.encrypted or not isinstance(fs, OsPaths) or not fs.exists(layout.catalog):
        return set()
    cat = Catalog(fs, fs.os_path(layout.catalog), read_only=True)
    try:
        return {r.ident for r in cat.rows() if r.lsn in lsns or r.lsn > last}
    except (sqlite3.DatabaseError, ValueError):  # a damaged catalog names nothing; salvage goes on
        return set()
    finally:
        cat.close()
