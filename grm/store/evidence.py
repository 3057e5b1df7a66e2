"""Evidence of lost records, kept until an operator acknowledges it.

Recovery drops a torn log tail: right after a crash that is the promise at work (nothing
acknowledged was in it). But when the derived catalog is AHEAD of the log (its LSN is past the
log's last commit), acknowledged records were lost - a truncated or damaged log, or a power cut
under a mode that promised less - and `grm fsck --salvage` loses the records of a damaged range
on purpose. Neither may pass silently: each loss is written here, and fsck reports every record
named in here (`lost`, exit 1) until `fsck --repair` acknowledges it (the file moves to
`lost/acknowledged/`; nothing is deleted).

    <root>/lost/<utc time>-<random>.json   canonical JSON {"reason": one line, "log_lsn": N,
        "evidence_lsn": N (the catalog's, or the last LSN salvage saw), "records": ["tenant/kind/key"
        or "tenant/kind/#kid" (encrypted) or "lsn N" (nothing readable), ...], "kept": [paths of
        the bytes set aside, relative to the root]}
    <root>/lost/acknowledged/...           the same files, once acknowledged
"""

from __future__ import annotations

import json
import os
import time

import logging
from typing import TYPE_CHECKING

from grm.store.fs import FileSystem, atomic_write, ensure_dir
from grm.store.layout import Layout, is_tmp
from grm.store.record import canonical_json

if TYPE_CHECKING:
    from grm.store.catalog import Catalog
    from grm.store.state import HostState

log = logging.getLogger("grm.store")

ACK = "acknowledged"


def lost_dir(layout: Layout) -> str:
    return os.path.join(layout.root, "lost")


def record_loss(fs: FileSystem, layout: Layout, *, reason: str, log_lsn: int, evidence_lsn: int,
                records: list[str], kept: list[str], sync: bool) -> str:
    """Write one evidence file; returns its path relative to the root."""
    folder = lost_dir(layout)
    ensure_dir(fs, folder, sync=sync)
    name = f"{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{os.urandom(3).hex()}.json"
    doc = {"reason": reason, "log_lsn": log_lsn, "evidence_lsn": evidence_lsn, "records": records,
           "kept": kept}
    path = os.path.join(folder, name)
    atomic_write(fs, path, (canonical_json(doc) + "\n").encode("utf-8"), sync=sync)
    return layout.relative(path)


def _files(fs: FileSystem, layout: Layout) -> list[str]:
    folder = lost_dir(layout)
    if not fs.exists(folder):
        return []
    return sorted(os.path.join(folder, n) for n in fs.listdir(folder)
                  if n.endswith(".json") and not is_tmp(n))


def lost_records(fs: FileSystem, layout: Layout) -> list[str]:
    """Every record named by unacknowledged evidence (an unreadable file names itself)."""
    out: list[str] = []
    for path in _files(fs, layout):
        try:
            doc = json.loads(fs.read_bytes(path))
            out += [str(r) for r in doc["records"]] or [f"(no record named) {doc['reason']}"]
        except (OSError, ValueError, KeyError, TypeError):
            out.append(f"(unreadable evidence {layout.relative(path)})")
    return out


def acknowledge(fs: FileSystem, layout: Layout, *, sync: bool) -> list[str]:
    """Move every evidence file to lost/acknowledged/; returns their new relative paths."""
    files = _files(fs, layout)
    if not files:
        return []
    target = os.path.join(lost_dir(layout), ACK)
    ensure_dir(fs, target, sync=sync)
    moved = []
    for path in files:
        dst = os.path.join(target, os.path.basename(path))
        fs.rename(path, dst)
        moved.append(layout.relative(dst))
    if sync:
        fs.fsync_dir(target)
        fs.fsync_dir(lost_dir(layout))
    return moved


def catalog_losses(catalog: Catalog, state: HostState, lsn: int) -> tuple[int, list[str]] | None:
    """(the catalog's LSN, the records it holds that the log lost) if the stored catalog is ahead
    of the log at `lsn`: rows it has at a later LSN, or that the log lacks or holds at another
    LSN, named `tenant/kind/key` (or "lsn N" for each LSN when no row says more). None otherwise."""
    ahead = catalog.ahead_of(lsn)
    if ahead is None:
        return None
    cat_lsn, rows = ahead
    lost = sorted(r.ident for r in rows
                  if r.lsn > lsn or (cur := state.get(r.tenant, r.kind, r.key)) is None or cur.lsn != r.lsn)
    return cat_lsn, lost or [f"lsn {n}" for n in range(lsn + 1, cat_lsn + 1)]


def keep_catalog_evidence(fs: FileSystem, layout: Layout, catalog: Catalog, state: HostState, lsn: int, *,
                          sync: bool) -> str | None:
    """At open, before the catalog is rebuilt: if the stored catalog is ahead of the log, name
    the records it holds that the log lost (`catalog_losses`), move the catalog files aside into
    lost/ and write the evidence. Returns the evidence path."""
    found = catalog_losses(catalog, state, lsn) if catalog.path is not None else None
    if found is None:
        return None
    cat_lsn, lost = found
    catalog.close()
    ensure_dir(fs, lost_dir(layout), sync=sync)
    kept = []
    stem = f"catalog-lsn{cat_lsn}-{os.urandom(3).hex()}.sqlite"
    for suffix in ("", "-wal"):
        if fs.exists(catalog.path + suffix):
            dst = os.path.join(lost_dir(layout), stem + suffix)
            fs.rename(catalog.path + suffix, dst)
            kept.append(layout.relative(dst))
    if fs.exists(catalog.path + "-shm"):
        fs.remove(catalog.path + "-shm")
    reason = (f"the catalog reflected log LSN {cat_lsn} but the log ends at LSN {lsn}: acknowledged "
              f"records are missing from the log (truncated or damaged log, or a power cut in a mode "
              f"that promised less)")
    log.error("store %s: %s; %d record(s) lost: %s", layout.root, reason, len(lost), ", ".join(lost[:10]))
    return record_loss(fs, layout, reason=reason, log_lsn=lsn, evidence_lsn=cat_lsn, records=lost, kept=kept,
                       sync=sync)
