"""The archive tier as the faces drive it by hand (`grm archive stats|train|demote`): what the
tier holds, codebooks trained for a runtime's model and saved in its store, and stored records
demoted with them. grm/archive/tier.py is the tier itself; grm/runtime/tiering.py moves spans
there automatically under a budget.

The faces build `TrainConfig` and `ArchiveConfig` from their flags (the archive plane's own
dataclasses, validated there) and offer the choices named here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from grm.archive import archived, rvq, salient
from grm.archive.codebook_store import codebook_versions, save_codebooks
from grm.archive.tier import DEMOTABLE_KINDS, ArchiveConfig, DemoteReport, tier_stats
from grm.archive.train import TrainConfig, train_codebooks
from grm.errors import UserInputError
from grm.store.backend import StoreBackend

__all__ = ["ArchiveConfig", "CODEBOOK_STORAGES", "CODECS", "DEMOTABLE_KINDS", "SALIENT_RULES", "SALIENT_STORAGES",
           "TrainConfig", "demote", "resolve", "stats", "train"]

SALIENT_RULES = salient.RULES  # tokens of an archived span kept beside its codes
SALIENT_STORAGES = salient.STORAGES  # how those tokens' rows are stored
CODEBOOK_STORAGES = rvq.STORAGES  # how codebooks are stored
CODECS = tuple(archived.CODECS)  # index stream codecs

Progress = Callable[[int, int], None]  # (done, total)


def stats(store: StoreBackend, tenant: str) -> dict:
    """What the tier holds for `tenant`, from the catalog only (no model)."""
    return tier_stats(store, tenant)


def train(rt: Any, text: str, config: TrainConfig, progress: Progress | None = None) -> dict:
    """Codebooks for `rt`'s model trained on `text` and saved in its store; what was saved. A text
    of blanks only is a UserInputError."""
    if not text.strip():
        raise UserInputError("no text to train on: give PATH... or ingest documents into this tenant first")
    books = train_codebooks(rt.lm, rt.dialect, text, config, progress)
    rec = save_codebooks(rt.store, books)
    return {"model": rt.lm.name, "identity": books.identity, "version": books.version, "k": books.config.k,
            "key_stages": books.config.key_stages, "value_stages": books.config.value_stages,
            "train_tokens": int(books.train.get("tokens", 0)), "storage": books.config.storage_dtype,
            "codebook_bytes": rec.payload_size}


def resolve(store: StoreBackend, tenant: str, keys: list[str], kind: str) -> list[str]:
    """Full keys of active records of `kind` named by KEY or a unique prefix of one; UserInputError
    for a key that names none, or several."""
    active = [r.key for r in store.records(tenant, kind) if r.state == "active"]
    out = []
    for key in keys:
        hits = [k for k in active if k.startswith(key)] if key else []
        if key in active:
            hits = [key]
        if not hits:
            raise UserInputError(f"no stored {kind} {key!r} in tenant {tenant!r}")
        if len(hits) > 1:
            raise UserInputError(f"{kind} key prefix {key!r} is ambiguous ({len(hits)} {kind}s)")
        out.append(hits[0])
    return out


def demote(rt: Any, keys: list[str] | None, kind: str, config: ArchiveConfig, *, version: str | None = None,
           keep_newest: int = 0, progress: Progress | None = None) -> tuple[str, DemoteReport]:
    """Archive `rt`'s tenant's records of `kind` named by `keys` (full keys or unique prefixes;
    None: every one) with codebooks `version` of its model (None: the newest). (version, report);
    UserInputError when the model has no such codebooks, or they are damaged."""
    name = rt.lm.name
    versions = codebook_versions(rt.store, rt.lm.identity)
    if not versions:
        raise UserInputError(f"no codebooks for model {name} in this store: run `grm archive train` first")
    version = version or versions[-1]
    if version not in versions:
        raise UserInputError(f"no codebooks {version!r} for model {name} (stored: {', '.join(versions)})")
    tier = rt.archive
    books = tier.codebooks(version)
    if books is None:
        raise UserInputError(f"codebooks {version} of model {name} are damaged: train them again")
    tenant = rt.config.tenant
    named = None if keys is None else resolve(rt.store, tenant, keys, kind)
    report = tier.demote(tenant, books, keys=named, kinds=(kind,), keep_newest=keep_newest, config=config,
                         progress=progress)
    return version, report
