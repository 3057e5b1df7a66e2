"""Fixtures for the policy tests: a store on the in-memory file system (reopenable) and a
PolicyMemory factory over it."""

from __future__ import annotations

from pathlib import Path

import pytest

from grm.policy import PolicyConfig, PolicyMemory
from grm.store import MemoryFS, Store, StoreConfig


class Stores:
    """Opens (and reopens, for restart tests) one store on one MemoryFS."""

    def __init__(self) -> None:
        self.fs = MemoryFS()
        self.config = StoreConfig(root=Path("/mem/policy"), fs=self.fs)
        self.store = Store.open(self.config)

    def restart(self) -> Store:
        self.store.close()
        self.store = Store.open(self.config)
        return self.store


@pytest.fixture
def stores():
    s = Stores()
    yield s
    s.store.close()


@pytest.fixture
def make_mem(stores):
    """make_mem(**PolicyConfig fields, extractor=..., culler=..., grafter=...) -> PolicyMemory."""

    def make(extractor=None, culler=None, grafter=None, **cfg) -> PolicyMemory:
        return PolicyMemory(stores.store, PolicyConfig(**cfg), extractor=extractor, culler=culler, grafter=grafter)

    return make


@pytest.fixture
def mem(make_mem):
    return make_mem()


def snapshot(store: Store) -> list[tuple]:
    """Every row of the store, as a comparable value (what "changes nothing" compares)."""
    return sorted((r.tenant, r.kind, r.key, r.parent, repr(sorted(r.meta.items())), r.text, r.state)
                  for r in store.records())
