"""Where the store and the model cache are: the one place their defaults are read from the
environment ($GRM_HOME, $GRM_CACHE); and the model opened when none is named
(`DEFAULT_MODEL`). Imports nothing heavy, so a CLI call that only needs the
store's location (one sent to a running `grm serve`) does not load torch."""

from __future__ import annotations

import os
from pathlib import Path

from grm.models.registry import DEFAULT_MODEL  # noqa: F401  (the faces' --model default)
from grm.store.opener import is_redis


def default_store_dir() -> Path:
    """$GRM_HOME, else ~/.grm."""
    return Path(os.environ.get("GRM_HOME") or Path.home() / ".grm").expanduser()


def default_cache_dir() -> Path:
    """$GRM_CACHE, else ~/.cache/grm (where materialized models live)."""
    return Path(os.environ.get("GRM_CACHE") or Path.home() / ".cache" / "grm").expanduser()


def store_location(store: str | Path | None) -> Path | str:
    """A store location as given: a Redis URL stays a string (a Path would fold its '//'), a
    folder is expanded; None is the default folder."""
    if store is None:
        return default_store_dir()
    return store if is_redis(store) else Path(store).expanduser()
