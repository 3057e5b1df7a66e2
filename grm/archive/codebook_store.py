"""Codebooks in the store: one record per trained codebook set, shared by every tenant's archive.

Record layout (the store treats all of it as opaque):
  tenant  "_system"            codebooks belong to a model identity, not to a tenant
  kind    "codebook"
  key     "<identity>:<version>"   version = RVQCodebooks.version (content digest, 16 hex)
  parent  "<identity>"          so every codebook set of one model is one `children` lookup
  payload RVQCodebooks.to_bytes() (safetensors; format in grm/archive/rvq.py)
  meta    {"identity", "version", "format", "k", "key_stages", "value_stages", "storage", "nbytes",
           "train_tokens"}

Reading fails closed: a payload that does not verify (store digest), does not parse, or names
another identity or version is a miss (None), never served.
"""

from __future__ import annotations

from grm.archive.rvq import RVQ_FORMAT, RVQCodebooks
from grm.store import Record, kinds
from grm.store.backend import StoreBackend
from grm.store.tenant import SYSTEM_TENANT

TENANT = SYSTEM_TENANT
KIND = kinds.CODEBOOK


def codebook_key(identity: str, version: str) -> str:
    return f"{identity}:{version}"


def save_codebooks(store: StoreBackend, books: RVQCodebooks) -> Record:
    """Write (or rewrite, same bytes) the record of `books`; returns it as committed."""
    cfg = books.config
    meta = {"identity": books.identity, "version": books.version, "format": RVQ_FORMAT, "k": cfg.k,
            "key_stages": cfg.key_stages, "value_stages": cfg.value_stages, "storage": cfg.storage_dtype,
            "nbytes": books.nbytes,
            "train_tokens": int(books.train.get("tokens", 0))}
    return store.put(TENANT, KIND, codebook_key(books.identity, books.version), meta=meta,
                     payload=books.to_bytes(), parent=books.identity)


def load_codebooks(store: StoreBackend, identity: str, version: str) -> RVQCodebooks | None:
    """The codebooks of `identity` at `version`, or None (missing, damaged or not what the key says)."""
    rec = store.get(TENANT, KIND, codebook_key(identity, version))
    if rec is None or rec.state != "active":
        return None
    data = store.read_payload(rec)
    if data is None:
        return None
    try:
        books = RVQCodebooks.from_bytes(data, identity=identity)
    except ValueError:
        return None
    return books if books.version == version else None


def codebook_versions(store: StoreBackend, identity: str) -> list[str]:
    """Versions of the active codebook sets stored for `identity`, oldest first."""
    return [str(r.meta.get("version")) for r in store.children(TENANT, KIND, identity)]


def archive_stats(store: StoreBackend) -> dict:
    """What the archive tier holds: every stored codebook set, from the catalog (no payload reads)."""
    rows = []
    for r in sorted(store.records(TENANT, KIND), key=lambda r: r.lsn):
        m = r.meta
        rows.append({"identity": m.get("identity"), "version": m.get("version"), "state": r.state,
                     "k": m.get("k"), "key_stages": m.get("key_stages"), "value_stages": m.get("value_stages"),
                     "storage": m.get("storage", "float16"),
                     "codebook_bytes": m.get("nbytes"), "payload_bytes": r.payload_size,
                     "train_tokens": m.get("train_tokens")})
    return {"codebooks": rows, "count": len(rows),
            "models": len({row["identity"] for row in rows}),
            "payload_bytes": sum(row["payload_bytes"] for row in rows)}
