"""One tenant's memory as the server's REST, chats and inspector see it: the policy plane, its
documents and its ingest jobs, over the one runtime's view of that tenant (`Runtime.for_tenant`).
It runs on the engine's model worker only (grm/serve/engine.py).
"""

from __future__ import annotations

import hashlib
import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

from grm.errors import GrmError
from grm.runtime.admin import graft_bytes, payload_bytes
from grm.runtime.config import CHAIN_LAYOUTS, SECTION_LAYOUTS
from grm.serve.errors import from_grm
from grm.serve.slices import Stopped

if TYPE_CHECKING:
    from grm.serve.engine import Engine, Job

log = logging.getLogger("grm.serve")


@dataclass
class IngestJob:
    id: str
    tenant: str
    name: str
    layout: str
    status: str = "queued"  # queued | running | cancelling | done | failed | cancelled
    done: int = 0  # blocks stored or found so far
    total: int = 0
    document: str | None = None  # the document id once done
    error: str | None = None
    # once done: what `grm ingest` reports of it (tokens, blocks, computed, stored_bytes, truncated_bytes)
    result: dict | None = None
    created: float = field(default_factory=time.time)
    handle: "Job | None" = None  # the worker's job (cancel)

    def to_json(self) -> dict:
        return {"id": self.id, "object": "job", "status": self.status, "name": self.name, "layout": self.layout,
                "progress": {"done": self.done, "total": self.total}, "document": self.document,
                "error": self.error, "result": self.result, "created": int(self.created)}


class TenantMemory:
    """One tenant's memory as the server's REST and inspector see it. Runs on the worker only."""

    def __init__(self, engine: "Engine", tenant: str) -> None:
        self.engine, self.tenant = engine, tenant
        self._glue = None

    @property
    def rt(self) -> Any:
        return self.engine.view(self.tenant)

    @property
    def store(self) -> Any:
        return self.rt.store

    @property
    def policy(self) -> Any:
        """The tenant's one PolicyMemory (with fact grafts made by the model)."""
        if self._glue is None:
            self._glue = self.rt.policy_glue()
            # the store is every tenant's: its durability mode is the operator's (grm serve --durability)
            self._glue.policy.configure(store_settings=False)
        return self._glue.policy

    def commands(self, text: str, rid: str) -> dict | None:
        """Execute each memory command line of `text` (as `grm chat` does); None if there is none."""
        results = []
        for i, line in enumerate(l for l in text.splitlines() if l.strip()):
            res = self.policy.handle(line.strip(), evidence_id=f"{rid}#{i}")
            if res is not None:
                results.append(res.to_json())
        if not results:
            return None
        return {"text": "\n".join(r["text"] for r in results), "changed": any(r["changed"] for r in results),
                "results": results}

    def observe(self, text: str, rid: str) -> None:
        self.policy.observe(text, evidence_id=rid)

    def grafts(self) -> list[Any]:
        return self.rt.grafts.grafts(include_retired=True)

    def graft_bytes(self, g: Any) -> int:
        """Payload bytes behind a graft (a document graft shares its block's payload)."""
        return graft_bytes(self.store, self.tenant, g.record)

    def store_stats(self) -> dict:
        """This tenant's records and payload bytes per kind (never another tenant's)."""
        st = self.store.stats()
        return {"kinds": st["tenants"].get(self.tenant, {}), "durability": st["durability"],
                "encrypted": st["encrypted"], "compressed": st["compressed"]}

    # documents: the runtime's one copy of this logic (grm/runtime/documents.py)
    def documents(self) -> list[Any]:
        return self.rt.documents().list()

    def document(self, doc_id: str) -> Any:
        return self.rt.documents().get(doc_id)

    def document_grafts(self, doc: Any) -> list[Any]:
        docs = self.rt.documents()
        keys = {r.key for r in docs.grafts_of(docs.blocks_of(doc))}
        return [g for g in self.rt.grafts.grafts(include_retired=True) if g.id in keys]

    def delete_document(self, doc_id: str) -> dict | None:
        """Remove the document, its blocks no other document of this tenant uses, and the grafts of
        those blocks, in one transaction. Nothing else (facts, turns, other documents) changes."""
        out = self.rt.documents().delete(doc_id)
        return None if out is None else out.to_json()

    def payload_bytes(self) -> int:
        """Payload bytes of this tenant, a payload shared within a kind counted once (the figure
        `grm ingest` reports the growth of)."""
        return payload_bytes(self.store, self.tenant)

    def stored_bytes(self) -> int:
        """Payload bytes this tenant's rows name (its byte quota counts these)."""
        return sum(r.payload_size for r in self.store.records(self.tenant))

    def ingest_text(self, job: IngestJob, text: str, pause: Callable[[], None] = lambda: None) -> None:
        """Ingest one text held in memory (Runtime.ingest_text), reporting progress on the job and
        calling `pause()` after each block (grm/serve/slices.py: the worker may serve others there,
        or the job is stopped). A stopped ingest removes what it stored that no document uses."""
        rt = self.rt
        job.status = "running"
        chain, sections = job.layout in CHAIN_LAYOUTS, job.layout in SECTION_LAYOUTS
        try:
            if self.engine.config.tenant_bytes is not None and (why := self.engine._quota_reached(self.tenant)):
                raise Stopped(why)
            pause()  # past its deadline already, or cancelled: stop before the first block
            job.total = rt.plan_ingest(text, job.layout)

            def progress(n: int) -> None:
                job.done = min(job.total, job.done + n)
                pause()

            before = self.payload_bytes()
            res = rt.ingest_text(text, job.name, job.layout, progress=progress)
            job.result = {"tokens": res.tokens, "blocks": res.blocks, "computed": res.computed,
                          "stored_bytes": self.payload_bytes() - before, "truncated_bytes": res.truncated_bytes}
            job.document = hashlib.sha256(text.encode()).hexdigest()
            job.done, job.status = job.total, "done"
            self.engine.after_write(job.tenant)
        except Stopped as e:
            owned = set(rt.exact.match(text)[1] if chain else ()) | set(
                rt.sections.keys(text) if sections else ())
            removed = rt.documents().remove_blocks(owned)[0]
            job.status = "cancelled" if str(e) == "cancelled" else "failed"
            job.error = f"{e}; {removed} block(s) it stored were removed"
        except GrmError as e:
            job.status, job.error = "failed", from_grm(e, self.engine.hidden).message
        except Exception as e:  # reported on the job; the server stays up
            log.exception("ingest job %s failed", job.id)
            job.status, job.error = "failed", f"internal error: {type(e).__name__}"
