"""A graft: a span's K/V that can be mounted at any seats, with its text, routing keys and lineage.

Catalog record (the store treats all of it as opaque):
  tenant   the owner; kind "graft"; key = graft id (32 hex of SHA-256 over identity, tenant,
           graft kind, origin seat, text, token ids and a salt: the turn's session and number,
           or the block's key, so the same bytes harvested twice in one chat stay two grafts)
  parent   the graft it was sliced from (lineage), else None
  text     the span's source text (indexed by FTS5: the lexical routing channel)
  payload  the K/V as safetensors (grm/kv/payload.py), bound like an exact block: identity,
           tenant, fingerprint = graft id, parent = "graft", seat, text, token ids. None when the
           graft shares the payload of an exact block (`block` below): nothing is stored twice.
  meta     {"identity": model identity (other models' grafts are never routed or mounted),
            "kind": evidence | document | fact | digest,
            "seat": origin seat of the payload's keys (keys are stored as read, after rotary at
                    these seats; mounting at seat b is ONE rotation by b - seat, none when b ==
                    seat: rotating back to seat 0 and forward again would be two rotations, which
                    moved logits by 2.7e-5 in fp32 and is not what invariant 3 allows),
            "tokens", "ids": token ids, "created": unix seconds,
            "sources": ids of what it was made from (turns, documents, parent grafts),
            "span": [start, end) in the parent graft's tokens, for slices,
            "block": key of the exact block whose payload it shares, for document grafts,
            "dense": routing keys (grm/route/dense.py, fp16 base64; computed from the span read
                     ALONE after the sinks, so context does not pollute them),
            "session", "turn": where a chat turn came from,
            "retired": true once folded into a digest (kept, never routed)}
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from grm.store import Record
from grm.store.kinds import GRAFT

KIND = GRAFT
GRAFT_KINDS = ("evidence", "document", "fact", "digest")
PAYLOAD_PARENT = "graft"  # the `parent` bound into a graft's own payload


def graft_id(identity: str, tenant: str, kind: str, seat: int, text: str, ids: list[int], salt: str) -> str:
    h = hashlib.sha256()
    for part in (identity, tenant, kind, str(seat), text, json.dumps(list(ids)), salt):
        data = part.encode()
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return h.hexdigest()[:32]


@dataclass(frozen=True)
class Graft:
    id: str
    kind: str
    text: str
    ids: tuple[int, ...]
    seat: int  # origin seat of the payload's keys
    created: float
    sources: tuple[str, ...]
    parent: str | None  # the graft it was sliced from
    span: tuple[int, int] | None  # [start, end) in the parent's tokens
    block: str | None  # exact block whose payload it shares
    retired: bool
    record: Record

    @property
    def tokens(self) -> int:
        return len(self.ids)

    @classmethod
    def from_record(cls, rec: Record) -> "Graft":
        m = rec.meta
        span = m.get("span")
        return cls(
            id=rec.key, kind=m.get("kind", "evidence"), text=rec.text or "", ids=tuple(m.get("ids", ())),
            seat=int(m.get("seat", 0)), created=float(m.get("created", 0.0)), sources=tuple(m.get("sources", ())),
            parent=rec.parent, span=(int(span[0]), int(span[1])) if span else None, block=m.get("block"),
            retired=bool(m.get("retired", False)), record=rec,
        )

    def summary(self) -> dict:
        """What `grm grafts list/show` prints."""
        return {"id": self.id, "kind": self.kind, "tokens": self.tokens, "seat": self.seat,
                "created": self.created, "sources": list(self.sources), "parent": self.parent,
                "span": list(self.span) if self.span else None, "shares_block": self.block,
                "retired": self.retired, "state": self.record.state,
                # codebook version when the exact K/V were dropped for the archive (mounts are lossy)
                "archived": self.record.meta.get("archived"),
                "text": self.text if len(self.text) <= 200 else self.text[:197] + "..."}
