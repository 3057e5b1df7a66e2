"""Byte-exact block memory: block chains, fingerprints, fail-closed load."""

from grm.exact.blocks import Block, split_blocks
from grm.exact.fingerprint import fingerprint
from grm.exact.memory import SYSTEM_TENANT, ExactConfig, ExactMemory, IngestResult, Prefix

__all__ = ["SYSTEM_TENANT", "Block", "ExactConfig", "ExactMemory", "IngestResult", "Prefix", "fingerprint", "split_blocks"]
