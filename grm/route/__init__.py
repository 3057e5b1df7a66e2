"""Routing: which stored memory a query needs: a lexical channel (BM25 + identifiers), a dense
channel (position-free key centroids of the model's own K) and their combination."""

from grm.route.channels import Channels
from grm.route.lexical import CHANNELS, Hit, LexicalConfig, combine, identifiers, search

__all__ = ["CHANNELS", "Channels", "Hit", "LexicalConfig", "combine", "identifiers", "search"]
