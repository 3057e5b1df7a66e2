"""Model registry and loading (packaged GGUF -> cached HF folder), and model identity."""

from grm.models.loader import LoadedModel, load_model
from grm.models.registry import DEFAULT_MODEL, MODELS, ModelSpec

__all__ = ["DEFAULT_MODEL", "MODELS", "LoadedModel", "ModelSpec", "load_model"]
