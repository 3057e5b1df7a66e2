"""Record kinds: the `kind` of every row GRM writes, named once. The store treats a kind as an
opaque name (grm.store.record.check_name); the planes that write each kind say what its rows
hold (the module named beside it). A new kind is added here first, so two planes never share a
kind by accident and no caller spells one by hand.
"""

from __future__ import annotations

# exact / sections (grm.exact.memory, grm.sections.memory)
SINKS = "sinks"  # the fixed prefix's K/V, once per model identity, under the system tenant
BLOCK = "block"  # a block's K/V after its parent chain (chain and sections layouts)
DOCUMENT = "document"  # an ingested document's exact bytes

# grafts (grm.grafts.graft)
GRAFT = "graft"  # a position-free K/V span with text, routing keys and lineage

# archive (grm.archive.tier, grm.archive.codebook_store)
ARCHIVE = "archive"  # a demoted span: RVQ codes + exact window
CODEBOOK = "codebook"  # RVQ codebooks of one model identity, under the system tenant

# tiering (grm.store.tiering): the store's byte budget (system tenant) and each tenant's use counts
TIERING = "tiering"

# policy (grm.policy.ledger, .review, .fold, .commands)
FACT = "fact"
FACT_SUPPORT = "fact_support"
FACT_LINEAGE = "fact_lineage"
FACT_TOMBSTONE = "fact_tombstone"
FACT_GRAFT = "fact_graft"
REVIEW = "review"
FOLD_NODE = "node"
FOLD_ABORT = "fold_abort"
RETIRED = "retired"
FORGET_CONFIRM = "forget_confirm"

ALL = (SINKS, BLOCK, DOCUMENT, GRAFT, ARCHIVE, CODEBOOK, TIERING, FACT, FACT_SUPPORT, FACT_LINEAGE,
       FACT_TOMBSTONE, FACT_GRAFT, REVIEW, FOLD_NODE, FOLD_ABORT, RETIRED, FORGET_CONFIRM)
