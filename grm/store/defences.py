"""Defences: the checks that keep wrong bytes from being served, as switches the attack tests
turn off one at a time (to prove each attack test can fail) and back on. Production code never
changes them; a Store has one `Defences()` with everything on.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Defences:
    digest_check: bool = True  # payload bytes must re-hash to the record's digest (or keyed id)
    tenant_binding: bool = True  # tenant in the key derivation and in the AEAD associated data
    authentication: bool = True  # AES-GCM tag checked (off: decrypt as bare CTR, tag ignored)
