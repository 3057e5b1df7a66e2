"""Block fingerprints: SHA-256 over (model identity, tenant, parent fingerprint, bytes, token ids).

Each field is length-prefixed (u64 little-endian) so no two different field tuples hash the same
bytes; token ids are u32 little-endian. Deterministic in any process on any machine (invariant 6):
no Python hash(), no dict ordering, no platform-dependent widths.
"""

from __future__ import annotations

import hashlib
import struct

import numpy as np

FINGERPRINT_DOMAIN = b"grm.block.v1"


def _field(h: "hashlib._Hash", data: bytes) -> None:
    h.update(struct.pack("<Q", len(data)))
    h.update(data)


def fingerprint(identity: str, tenant: str, parent: str, data: bytes, token_ids: list[int]) -> str:
    """The hex fingerprint of a block read after `parent` (the parent's fingerprint, or "")."""
    h = hashlib.sha256()
    _field(h, FINGERPRINT_DOMAIN)
    _field(h, identity.encode())
    _field(h, tenant.encode())
    _field(h, parent.encode())
    _field(h, data)
    _field(h, np.asarray(token_ids, dtype="<u4").tobytes())
    return h.hexdigest()
