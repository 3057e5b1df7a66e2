"""One module per model family: geometry, rotary math, sliding windows, graftability profile."""

from __future__ import annotations

import torch

from grm.dialects import gemma3, gpt2, llama
from grm.dialects.base import PROFILES, REMOUNTABLE, SAME_POSITION_ONLY, SINGLE_PREFIX_ONLY, Dialect
from grm.dialects.selftest import SelfTestResult, kept_self_test, measure as measure_selftest, self_test
from grm.errors import DialectError

_BUILDERS = {fam: mod.build for mod in (llama, gemma3, gpt2) for fam in mod.FAMILIES}
DIALECT_FAMILIES = frozenset(_BUILDERS)  # transformers model_types GRM can serve


def dialect_for(model: torch.nn.Module) -> Dialect:
    """The dialect of a loaded transformers model; DialectError if its family is unknown."""
    family = getattr(model.config, "model_type", "?")
    builder = _BUILDERS.get(family)
    if builder is None:
        raise DialectError(f"no dialect for model family {family!r} (known: {', '.join(sorted(_BUILDERS))})")
    return builder(model)


def position_law(config: object) -> str:
    """The position law named in the model identity ("rope:<type>", "absolute")."""
    family = getattr(config, "model_type", "?")
    if family in gpt2.FAMILIES:
        return "absolute"
    rope = getattr(config, "rope_parameters", None) or {}
    if "rope_type" in rope:
        return f"rope:{rope['rope_type']}"
    return "rope:" + ",".join(f"{k}={v.get('rope_type')}" for k, v in sorted(rope.items()) if v)


__all__ = [
    "DIALECT_FAMILIES", "PROFILES", "REMOUNTABLE", "SAME_POSITION_ONLY", "SINGLE_PREFIX_ONLY",
    "Dialect", "DialectError", "SelfTestResult", "dialect_for", "kept_self_test", "measure_selftest", "position_law", "self_test",
]
