"""Fixtures for the store tests (helpers live in tests/store/helpers.py)."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """Where a test's store lives (not created: Store.open creates it)."""
    return tmp_path / "store"
