"""Fingerprints are deterministic across processes (invariant 6) and bind every field."""

from __future__ import annotations

import subprocess
import sys

from grm.exact.fingerprint import fingerprint

ARGS = ("a" * 64, "alice", "b" * 64, "Grüße, world!\n".encode(), [1, 2, 300, 70000])
SNIPPET = (
    "from grm.exact.fingerprint import fingerprint;"
    "print(fingerprint('a'*64, 'alice', 'b'*64, 'Grüße, world!\\n'.encode(), [1, 2, 300, 70000]))"
)


def test_fingerprints_are_identical_across_fresh_processes():
    # Different hash seeds per process: Python's hash() would differ, SHA-256 must not.
    outs = set()
    for seed in ("0", "12345"):
        env = {"PYTHONHASHSEED": seed, "PATH": ""}
        out = subprocess.run([sys.executable, "-c", SNIPPET], capture_output=True, text=True, env=env,
                             cwd=str(__import__("pathlib").Path(__file__).resolve().parents[2]), check=True)
        outs.add(out.stdout.strip())
    assert outs == {fingerprint(*ARGS)}


def test_every_field_changes_the_fingerprint():
    base = fingerprint(*ARGS)
    variants = [
        ("c" * 64, *ARGS[1:]),
        (ARGS[0], "bob", *ARGS[2:]),
        (*ARGS[:2], "", *ARGS[3:]),
        (*ARGS[:3], b"Grusse, world!\n", ARGS[4]),
        (*ARGS[:4], [1, 2, 300, 70001]),
    ]
    assert len({fingerprint(*v) for v in variants} | {base}) == len(variants) + 1


def test_fields_are_length_prefixed_so_boundaries_cannot_shift():
    assert fingerprint("ab", "c", "", b"", []) != fingerprint("a", "bc", "", b"", [])
