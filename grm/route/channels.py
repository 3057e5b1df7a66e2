"""How a query is scored against stored spans: one config shared by section selection
(grm/sections) and graft routing (grm/grafts), each with its own default channel."""

from __future__ import annotations

from dataclasses import dataclass

from grm.route.dense import DenseConfig
from grm.route.lexical import CHANNELS, LexicalConfig


@dataclass(frozen=True)
class Channels:
    channel: str = "combined"  # combined | lexical | dense
    lexical: LexicalConfig = LexicalConfig()  # BM25 over content words + identifiers
    dense: DenseConfig = DenseConfig()  # position-free key centroids of the model's own K
    dense_weight: float = 0.5  # combined = lexical / best lexical + dense_weight * dense in [0, 1]

    def __post_init__(self) -> None:
        if self.channel not in CHANNELS:
            raise ValueError(f"channel must be one of {CHANNELS}")
        if self.dense_weight < 0:
            raise ValueError("dense_weight must be >= 0")
