"""The loop that ties the parts: ingest, ask (and later chat turns).

`Runtime` and `Answer` are imported on first use: a submodule that needs no model
(`grm.runtime.locations`, `grm.runtime.files`) is imported without torch."""

from __future__ import annotations

__all__ = ["Answer", "Runtime"]


def __getattr__(name: str) -> object:
    if name == "Runtime":
        from grm.runtime.runtime import Runtime

        return Runtime
    if name == "Answer":
        from grm.runtime.generate import Answer

        return Answer
    raise AttributeError(name)
