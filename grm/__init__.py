"""GRM: a memory runtime for frozen language models that stores K/V and brings it back."""

from __future__ import annotations

__version__ = "0.1.0"
__all__ = ["Answer", "Runtime", "RuntimeConfig", "__version__"]


def __getattr__(name: str) -> object:
    # Lazy: `import grm` (and the store's recovery path) must not pull in torch.
    if name in ("Runtime", "Answer"):
        from grm import runtime

        return getattr(runtime, name)
    if name == "RuntimeConfig":
        from grm.runtime.config import RuntimeConfig

        return RuntimeConfig
    raise AttributeError(name)
