"""The loop that ties the parts: ingest, ask (and later chat turns)."""

from grm.runtime.generate import Answer
from grm.runtime.runtime import Runtime

__all__ = ["Answer", "Runtime"]
