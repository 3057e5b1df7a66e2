"""Model registry and loading (packaged GGUF -> cached HF folder), and model identity.

The registry is importable without torch (the CLI names the default model in its help before it
knows whether it will load one); the loader is imported on first use of its names."""

from grm.models.registry import DEFAULT_MODEL, MODELS, ModelSpec

__all__ = ["DEFAULT_MODEL", "MODELS", "LoadedModel", "ModelSpec", "load_model"]


def __getattr__(name: str):
    if name in ("LoadedModel", "load_model"):
        from grm.models import loader

        return getattr(loader, name)
    raise AttributeError(f"module 'grm.models' has no attribute {name!r}")
