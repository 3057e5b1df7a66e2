"""Recovery: checkpoint + log -> host state, and a log whose tail is safe to append to.

Steps (each idempotent: recovering a recovered store changes nothing):
1. Remove leftover temporaries (`*.tmp.*`) of the log and checkpoint folders: a crash before
   their rename means they were never part of the store.
2. Load the newest checkpoint that validates (format in `grm.store.checkpoint`); damaged ones are
   reported and skipped for an older one. No checkpoint = empty state at LSN 0.
3. Read every segment (format in `grm.store.log`), oldest generation first. Segments whose frames
   the checkpoint already holds are "covered" (deleted once the store has a tail to write to).
   The others must continue the LSN sequence from checkpoint + 1 without a gap or overlap, or
   `CorruptionError` is raised: an acknowledged write would be missing.
4. Replay frames after the checkpoint, applying a transaction only at its commit frame.
   A newest segment that is shorter than its header or all zero bytes is a creation that never
   completed (only possible without fsync: volatile mode); it holds no frame and is removed.
5. In the last segment, drop everything after the last commit: a torn frame, trailing garbage or
   zeros, and complete frames of a transaction that never committed. The file is truncated there
   through the file system (so a later append cannot land behind garbage). Anything of that kind
   in a segment that is not the last is damage, never a tail: `CorruptionError`. What counts as
   a tail and what as damage in the middle of a segment is `grm.store.log`'s durability rule.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from grm.errors import CorruptionError
from grm.store.checkpoint import Checkpoint, CheckpointInvalid, checkpoint_rows, open_checkpoint
from grm.store.fs import FileSystem
from grm.store.layout import Layout, is_tmp, parse_checkpoint_name, parse_segment_name
from grm.store.log import HEADER_SIZE, Segment, read_segment
from grm.store.record import Record
from grm.store.state import HostState

log = logging.getLogger("grm.store")


@dataclass
class Recovered:
    state: HostState
    last_lsn: int  # last committed LSN (or the checkpoint's)
    checkpoint_lsn: int
    tail: Segment | None  # segment to keep appending to; None = start a new generation
    max_generation: int  # highest generation seen (0 if none)
    covered: list[str] = field(default_factory=list)  # segment paths the checkpoint holds
    torn_dropped: int = 0  # frames dropped from the tail (a torn partial frame counts as one)
    invalid_checkpoints: list[str] = field(default_factory=list)
    unfinished_segments: int = 0  # newest segments removed because their header never landed
    checkpoint: Checkpoint | None = None  # the one loaded (or, with load_rows=False, validated)


def _listdir(fs: FileSystem, path: str) -> list[str]:
    return fs.listdir(path) if fs.exists(path) else []


def _remove_temporaries(fs: FileSystem, folder: str) -> None:
    for name in _listdir(fs, folder):
        if is_tmp(name):
            fs.remove(os.path.join(folder, name))


def _load_checkpoint(fs: FileSystem, layout: Layout, state: HostState, invalid: list[str],
                     decode_row: Callable[[list[Any]], Record], load_rows: bool) -> Checkpoint | None:
    """The newest checkpoint that validates (every byte under its CRC), its rows put into
    `state` if `load_rows`. Rows stream in after validation; one that then fails to decode is
    damage no older checkpoint can stand in for (the state already holds rows): CorruptionError."""
    names = [(lsn, n) for n in _listdir(fs, layout.checkpoint_dir)
             if (lsn := parse_checkpoint_name(n)) is not None]
    for named_lsn, name in sorted(names, reverse=True):
        path = os.path.join(layout.checkpoint_dir, name)
        try:
            ckpt = open_checkpoint(fs, path)
            if ckpt.lsn != named_lsn:
                raise CheckpointInvalid(f"holds lsn {ckpt.lsn} but is named {named_lsn}")
        except (CheckpointInvalid, ValueError, KeyError, IndexError, TypeError) as e:
            log.warning("skipping damaged checkpoint %s: %s", path, e)
            invalid.append(f"{layout.relative(path)}: {e}")
            continue
        if load_rows:
            try:
                for v in checkpoint_rows(fs, ckpt):
                    state.put(decode_row(v))
            except (CheckpointInvalid, ValueError, KeyError, IndexError, TypeError) as e:
                raise CorruptionError(path, 0, "rows that decode", str(e), "checkpoint") from e
            state.mode = ckpt.mode
        return ckpt
    return None


def _unfinished(fs: FileSystem, path: str) -> bool:
    data = fs.read_bytes(path)
    return len(data) < HEADER_SIZE or not any(data)


def recover(fs: FileSystem, layout: Layout, state: HostState | None = None,
            decode_row: Callable[[list[Any]], Record] = Record.from_list, *,
            read_only: bool = False, load_rows: bool = True, state_lsn: int = 0) -> Recovered:
    """Recover into `state` (a fresh HostState by default; an encrypted store passes one that
    can open sealed texts, and a `decode_row` for its checkpoint rows). `read_only`: change no
    file (a reader beside a live writer, or read-only media): temporaries and unfinished
    segments are skipped rather than removed, a torn tail is dropped in memory only.
    `load_rows=False`: `state` already holds the rows through `state_lsn` (a catalog-backed
    state at its LSN; the caller checks checkpoint_lsn <= state_lsn <= last_lsn), or holds only
    what the log does after the checkpoint (OverlayState, state_lsn 0): the checkpoint is
    validated, not loaded, and frames up to max(checkpoint, state_lsn) are not applied."""
    if not read_only:
        _remove_temporaries(fs, layout.log_dir)
        _remove_temporaries(fs, layout.checkpoint_dir)
    state = state if state is not None else HostState()
    invalid: list[str] = []
    loaded = _load_checkpoint(fs, layout, state, invalid, decode_row, load_rows)
    ckpt = loaded.lsn if loaded is not None else 0
    applied = max(ckpt, state_lsn)
    note = f" (damaged checkpoints skipped: {'; '.join(invalid)})" if invalid else ""

    gens = sorted((g, n) for n in _listdir(fs, layout.log_dir) if (g := parse_segment_name(n)) is not None)
    unfinished = 0
    while gens and _unfinished(fs, os.path.join(layout.log_dir, gens[-1][1])):
        if not read_only:
            log.warning("removing unfinished newest log segment %s", gens[-1][1])
            fs.remove(os.path.join(layout.log_dir, gens[-1][1]))
        gens.pop()
        unfinished += 1
    segments: list[Segment] = []
    for gen, name in gens:
        seg = read_segment(fs, os.path.join(layout.log_dir, name))
        if seg.header.generation != gen:
            raise CorruptionError(seg.path, 16, f"generation {gen}", seg.header.generation)
        segments.append(seg)

    # Classify: covered segments (all frames <= ckpt) may only precede the live ones.
    chain_next = ckpt + 1
    covered: list[Segment] = []
    live: list[Segment] = []
    for i, seg in enumerate(segments):
        is_last = i == len(segments) - 1
        if not live and seg.next_lsn <= ckpt + 1:
            covered.append(seg)  # a torn tail here is moot: the checkpoint holds all of it
            continue
        if seg.header.first_lsn > chain_next or (live and seg.header.first_lsn != chain_next):
            raise CorruptionError(seg.path, 32, f"first lsn {chain_next}", seg.header.first_lsn,
                                  "log sequence has a gap or overlap" + note)
        if seg.torn and not is_last:
            raise CorruptionError(seg.path, seg.valid_end, "end of segment",
                                  f"{seg.size - seg.valid_end} invalid bytes before the next segment")
        chain_next = seg.next_lsn
        live.append(seg)

    # Replay committed transactions after the checkpoint.
    last_lsn = ckpt
    pending: list[tuple[dict, int]] = []
    pending_txn: object = None
    for seg in live:
        if pending:
            raise CorruptionError(seg.path, HEADER_SIZE, f"commit of txn {pending_txn}",
                                  "a new segment", "uncommitted transaction before a later segment")
        for fr in seg.frames:
            if fr.lsn <= ckpt:
                continue
            body = fr.body
            if body["op"] == "commit":
                if (pending and body.get("txn") != pending_txn) or body.get("count") != len(pending):
                    raise CorruptionError(seg.path, fr.offset,
                                          f"commit of txn {pending_txn} with {len(pending)} frames",
                                          f"txn {body.get('txn')} with {body.get('count')}")
                if fr.lsn > applied:
                    for b, lsn in pending:
                        state.apply(b, lsn)
                pending, pending_txn, last_lsn = [], None, fr.lsn
            else:
                if pending and body.get("txn") != pending_txn:
                    raise CorruptionError(seg.path, fr.offset, f"txn {pending_txn}", body.get("txn"),
                                          "interleaved transactions")
                pending_txn = body.get("txn")
                pending.append((body, fr.lsn))

    out = Recovered(state, last_lsn, ckpt, None, gens[-1][0] if gens else 0,
                    covered=[s.path for s in covered], invalid_checkpoints=invalid,
                    unfinished_segments=unfinished, checkpoint=loaded)
    if not segments:
        return out
    tail = segments[-1]
    keep = [fr for fr in tail.frames if fr.lsn <= last_lsn]
    keep_end = keep[-1].end if keep else HEADER_SIZE
    if keep_end < tail.size:
        out.torn_dropped = (len(tail.frames) - len(keep)) + (1 if tail.torn else 0)
        if read_only:  # a writer may be appending right now: nothing to report, nothing to cut
            out.torn_dropped = 0
            return out
        log.warning("dropping %d bytes (%d frames) after the last commit of %s",
                    tail.size - keep_end, out.torn_dropped, tail.path)
        fs.truncate(tail.path, keep_end)
        tail.frames, tail.size, tail.valid_end = keep, keep_end, keep_end
    if tail.next_lsn == last_lsn + 1:
        out.tail = tail
        if tail.path in out.covered:
            out.covered.remove(tail.path)
    return out


def remove_covered(fs: FileSystem, paths: list[str], *, sync: bool) -> None:
    """Delete segments a durable checkpoint holds; then sync their folder."""
    for p in paths:
        if fs.exists(p):
            fs.remove(p)
    if paths and sync:
        fs.fsync_dir(os.path.dirname(paths[0]))
