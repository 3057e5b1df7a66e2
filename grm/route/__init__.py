"""Routing: which stored memory a query needs (lexical channel now; dense keys with grafts)."""

from grm.route.lexical import Hit, LexicalConfig, identifiers, search

__all__ = ["Hit", "LexicalConfig", "identifiers", "search"]
