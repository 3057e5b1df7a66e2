"""Claiming a store root: the one-writer lock and the marker that says "this is a GRM store".

Order (a writer, `open_root`): make the folder, take the lock on it, and only then look at the
marker and create it if absent. The lock is `FileSystem.try_lock` on the root folder itself
(fcntl.flock on the directory for LocalFS): an inode the store never removes, so deleting or
replacing a file in the root cannot let a second writer in, and two processes creating the same
store cannot both write a marker (the second waits for, or is refused by, the lock and then finds
the first one's marker). `<root>/LOCK` holds the holder's pid, only so the refused opener can name
it. A writer re-checks before every append that its lock still guards the root it opened.

A store is created only in a missing or empty folder (an empty folder may hold a LOCK file or a
marker temporary from an interrupted creation). The marker `GRM-STORE` is written with
`atomic_write`, so a folder either has a whole marker or is still "empty"; a folder with other
contents and no marker is refused. The marker is canonical JSON {"format": "grm-store",
"version": N}; a version newer than this code is refused rather than misread.

An encrypted store (created with a master key) has version 2 and
    "encryption": {"cipher": "AES-256-GCM", "kdf": "HKDF-SHA256", "salt": 16 bytes hex,
                   "check": key verifier hex (grm.store.crypt)}
Opening it without a key, with another key, or opening a plain store with a key, is refused
with a StoreError that says which; nothing is read or written before that check.

Readers (`check_root`, a read-only open) take no lock and write nothing: the store must exist.
"""

from __future__ import annotations

import contextlib
import json
import os
import time

from grm.errors import StoreError, StoreLocked
from grm.store.crypt import Keyring, key_check, keyring_for, new_kdf_salt
from grm.store.fs import FileSystem, LockHandle, atomic_write, ensure_dir
from grm.store.layout import (
    ENCRYPTED_FORMAT_VERSION,
    FORMAT_NAME,
    FORMAT_VERSION,
    PLAIN_FORMAT_VERSION,
    LOCK_NAME,
    MARKER_NAME,
    Layout,
    is_tmp,
)
from grm.store.record import canonical_json


def open_root(fs: FileSystem, layout: Layout, *, sync: bool, master_key: bytes | None,
              timeout: float) -> tuple[Keyring | None, LockHandle]:
    """A writer's open: make the root folder, lock it, then create or check the marker.
    Returns (keyring or None, lock). OSError escapes."""
    root = layout.root
    if fs.exists(root) and not fs.is_dir(root):
        raise StoreError(f"{root} is not a GRM store (it is not a directory)")
    ensure_dir(fs, root, sync=sync)
    lock = take_lock(fs, layout, timeout)
    try:
        keyring = claim_root(fs, layout, sync=sync, master_key=master_key)
    except BaseException:
        lock.release()
        raise
    # The pid is only a hint for the error message of the next opener: not synced, and nothing
    # depends on the file (removing it changes nothing; the lock is on the folder).
    with contextlib.suppress(OSError):
        handle = fs.open_write(layout.lock)
        try:
            handle.write(f"{os.getpid()}\n".encode())
        finally:
            handle.close()
    return keyring, lock


def check_root(fs: FileSystem, layout: Layout, master_key: bytes | None) -> Keyring | None:
    """A reader's open: the root must already be a GRM store; nothing is written."""
    if not fs.is_dir(layout.root) or MARKER_NAME not in fs.listdir(layout.root):
        raise StoreError(f"{layout.root} is not a GRM store (no {MARKER_NAME} marker; "
                         f"a read-only open never creates one)")
    return _check_marker(fs, layout, master_key)


def claim_root(fs: FileSystem, layout: Layout, *, sync: bool, master_key: bytes | None = None) -> Keyring | None:
    """Under the root lock: create the store in an empty folder, or check that it is one;
    returns the keyring of an encrypted store (None for a plain one). OSError escapes."""
    root = layout.root
    names = fs.listdir(root)
    if MARKER_NAME in names:
        keyring = _check_marker(fs, layout, master_key)
    else:
        stray = [n for n in names if n != LOCK_NAME and not (n.startswith(MARKER_NAME) and is_tmp(n))]
        if stray:
            raise StoreError(f"{root} is not a GRM store (not empty, and no {MARKER_NAME} marker)")
        doc: dict = {"format": FORMAT_NAME, "version": PLAIN_FORMAT_VERSION}
        keyring = None
        if master_key is not None:
            salt = new_kdf_salt()
            keyring = Keyring(master_key, salt)
            doc = {"format": FORMAT_NAME, "version": ENCRYPTED_FORMAT_VERSION,
                   "encryption": {"cipher": "AES-256-GCM", "kdf": "HKDF-SHA256", "salt": salt.hex(),
                                  "check": key_check(master_key, salt)}}
        atomic_write(fs, layout.marker, (canonical_json(doc) + "\n").encode(), sync=sync)
    for folder in (layout.log_dir, layout.checkpoint_dir, layout.payload_dir):
        ensure_dir(fs, folder, sync=sync)
    return keyring


def _check_marker(fs: FileSystem, layout: Layout, master_key: bytes | None) -> Keyring | None:
    try:
        doc = json.loads(fs.read_bytes(layout.marker))
        fmt, version = doc["format"], doc["version"]
    except (ValueError, KeyError, TypeError):
        raise StoreError(f"{layout.root} is not a GRM store (its {MARKER_NAME} marker is unreadable)") from None
    if fmt != FORMAT_NAME:
        raise StoreError(f"{layout.root} is not a GRM store (marker format {fmt!r})")
    if not isinstance(version, int) or version > FORMAT_VERSION:
        raise StoreError(f"{layout.root} has store format version {version}; this GRM reads up to {FORMAT_VERSION}")
    enc, section = doc.get("encryption"), None
    if enc is not None:
        try:
            section = (bytes.fromhex(enc["salt"]), str(enc["check"]))
        except (KeyError, TypeError, ValueError):
            raise StoreError(f"{layout.root} has an unreadable encryption section in its {MARKER_NAME} marker") from None
    return keyring_for(section, master_key, f"store {layout.root}")


def take_lock(fs: FileSystem, layout: Layout, timeout: float) -> LockHandle:
    deadline = time.monotonic() + timeout
    while True:
        handle = fs.try_lock(layout.root)
        if handle is not None:
            return handle
        if time.monotonic() >= deadline:
            pid = _holder(fs, layout)
            raise StoreLocked(f"store {layout.root} is in use by another process (pid {pid})", layout.root, pid)
        time.sleep(0.05)


def lock_holder(fs: FileSystem, layout: Layout) -> str | None:
    """Who holds the store's writer lock: its pid (or "unknown"), or None when nobody does. A
    probe (the lock is taken and released at once), so a command can refuse a held store before
    it loads a model; the open that follows still takes the lock for real."""
    if not fs.is_dir(layout.root):
        return None
    handle = fs.try_lock(layout.root)
    if handle is None:
        return _holder(fs, layout)
    handle.release()
    return None


def _holder(fs: FileSystem, layout: Layout) -> str:
    try:
        return str(int(fs.read_bytes(layout.lock).decode().strip()))
    except (OSError, ValueError):
        return "unknown"
