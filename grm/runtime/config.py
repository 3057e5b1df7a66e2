"""Runtime configuration: one frozen dataclass; the CLI and `Runtime.open` fill it."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from grm.errors import UserInputError
from grm.models import DEFAULT_MODEL
from grm.models.placement import check_names
from grm.grafts.floor import ABSTAIN_LINE, DEFAULT_FLOOR
from grm.grafts.graft import GRAFT_KINDS  # noqa: F401  (re-exported: the kinds `grm grafts list --kind` offers)
from grm.route import CHANNELS
from grm.runtime.locations import default_cache_dir, default_store_dir, store_location  # noqa: F401  (re-exported)
from grm.store.config import DURABILITY_MODES
from grm.store.tenant import check_tenant

ASK_MODES = ("auto", "exact", "exact-section", "grafts", "none", "rag-text")
REREAD = ("auto", "never", "always")  # mount or re-read a routed graft (grm/grafts/reread.py)
LEADS = ("auto", "rules", "model", "off")  # how a plain question's answer is begun (grm/runtime/lead.py, model_lead.py)
ORDERS = ("relevance", "time")  # routed grafts in the arena (RuntimeConfig.order)
EXTRACTORS = ("rule", "model", "both")  # who reads plain-words updates (RuntimeConfig.extractor)
RULES = ("auto", "on", "off")  # the English layer, one switch (RuntimeConfig.rules)
MEANINGS = ("auto", "on", "off")  # the meaning routing channel (RuntimeConfig.meaning)
MEANING_PICKS = 2  # grafts mounted for their meaning beside the lexical route when it is on (RouteConfig.meaning)
# seen (default): sections, and a document's chain blocks stored when a prompt first reads it (one
# layout's bytes: bench/results/bytes-per-token.md); both: chain blocks and sections at ingest,
# sharing the first block; chain; sections
LAYOUTS = ("seen", "both", "chain", "sections")
DEFAULT_LAYOUT = LAYOUTS[0]
CHAIN_LAYOUTS = ("chain", "both", "seen")  # layouts that store chain blocks (`seen`: its first at ingest)
SECTION_LAYOUTS = ("sections", "both", "seen")  # layouts that store sections
FIRST_BLOCKS = {"seen": 1}  # chain blocks a layout stores at ingest where not all (Runtime.plan_ingest)
DURABILITY = DURABILITY_MODES  # defined by the store plane
# The system message of a model asked through its chat template (RuntimeConfig.system "memory").
# An instruct model told only its template's default ("You are Qwen, created by Alibaba Cloud...")
# refuses questions about the user's own life ("as an AI language model, I don't have access to
# your personal information") even with the answer in context: fidelity-fresh19-qwen2.5-coder-1.5b-*.md
# in bench/results, memory vs model system message side by side.
MEMORY_SYSTEM = ("You are a helpful assistant with a memory. What you read here, the user's earlier messages "
                 "and any documents, is what you remember: answer from it. When the user has changed something "
                 "they told you before, the most recent version is the one that holds.")
SYSTEMS = {"memory": MEMORY_SYSTEM, "model": None}  # named system messages (None: the template's own default)


@dataclass(frozen=True)
class RuntimeConfig:
    store: Path | str  # the store directory (created on first write), or redis://HOST:PORT/NAMESPACE
    cache_dir: Path = field(default_factory=default_cache_dir)  # model cache ($GRM_CACHE, ~/.cache/grm)
    model: str = DEFAULT_MODEL  # registry name or HF folder path
    tenant: str = "default"  # owner of every record this runtime reads or writes
    threads: int | None = None  # torch threads; None = all cores
    durability: str = "normal"  # store durability mode
    block_tokens: int = 512  # token budget of one exact block (chain layout)
    section_tokens: int = 512  # token budget of one section (sections layout)
    graft_k: int = 3  # sections composed in `grafts` mode
    max_new_tokens: int = 48  # greedy generation limit
    master_key: bytes | None = field(default=None, repr=False)  # 32 bytes: encryption at rest
    compress: bool = False  # zstandard-compress payload files (before encryption)
    device_budget: int = 64 << 20  # bytes of graft K/V kept on the device plane between turns
    # bytes of verified exact blocks kept in host RAM between requests (page-locked on CUDA), so a
    # repeated context mounts from RAM (grm/exact/tier.py); 0 = off: every load reads the store
    host_budget: int = 0
    seat_budget: int = 1536  # seats of mounted grafts per question or turn
    repair: int = 0  # boundary repair: recompute the first N tokens of each mounted graft in context
    # composition repair (grm/grafts/blend.py): recompute this share of the tokens of two or more
    # grafts mounted side by side, those whose K/V deviate most from a joint read; 0 = off
    blend: float = 0.0
    # per graft: "auto" reads a chat turn's or fact's text for a model asked through its chat
    # template (grm/runtime/question.reread_turns_for), and any graft's where that costs no more than
    # mounting its K/V (costs measured once per model and machine, composition risk counted);
    # "never" mounts; "always" reads
    reread: str = "auto"
    # the answer begun from the question's words: "model" (the rules, then the model for a question
    # they do not cover; bench/results/questions-smollm2-135m.md), "rules", "off" (plain); "auto"
    # (default): "off" for a model asked through its chat template (an instruct model reads a plain
    # question; from memory the leads tie it on blind sets: grm/runtime/question.lead_for), "model"
    # for one without (SmolLM2 does not read a plain question)
    lead: str = "auto"
    channel: str = "combined"  # graft routing channel: combined | lexical | dense
    # routed grafts in the arena: "relevance" (least relevant first, the best next to the question)
    # or "time" (oldest first: what was said last is read last, as a conversation reads)
    order: str = "relevance"
    # abstention (grm/grafts/floor.py): a question routed memory holds nothing on is answered with
    # `abstain_line` ("abstained": true), not generated; 0 turns it off
    abstain_floor: float = DEFAULT_FLOOR
    abstain_line: str = ABSTAIN_LINE
    # who reads a plain-words update of a fact held: "rule" (grm/policy/updates.py, align.py),
    # "model" (the model shown the turn and the facts held, grm/policy/model_extract.py), "both"
    # (the rules, then the model where they read none); facts stated plainly are the rules' in all
    extractor: str = "rule"
    # the English layer, one switch: the answer leads (grm/runtime/lead.py), the rules reading facts
    # and updates from plain turns (grm/policy/extract.py, updates.py, align.py), the abstain floor
    # and its related-words fallback (grm/grafts/floor.py). "off": each family left at its default is
    # off, so the model reads memory as routed (lead off, no floor, no fact read from a turn by rule;
    # memory commands stay; a family's own option given still applies, e.g. `--extractor model`);
    # "on": each family as its own option says; "auto" (default): off for a model asked through
    # its chat template, on otherwise (grm/runtime/question.rules_for, measured on blind update sets)
    rules: str = "auto"
    # later mentions (grm/grafts/memory.py GraftMemory.later): per routed graft, this many evidence
    # turns written after it that name one of its rare words, mounted after it; 0 = off
    later: int = 1
    # the meaning channel (grm/route/meaning.py): chat turns and facts routed by the model's own
    # reading of what they say, beside their words, and each routed turn bringing the later turn
    # nearest it in meaning (a plain-words update that shares no word with its statement); one
    # short forward pass per stored turn and per question. "auto" (default): on for a model asked
    # through its chat template (a reader whose hidden states separate meanings), off otherwise
    meaning: str = "auto"
    # with the meaning channel on: a turn or fact routed by its words alone is mounted only where its
    # meaning is near the question too, or it holds one of the question's names or numbers
    # (grm/grafts/memory.py RouteConfig.agree): fewer turns beside a statement and its update
    agree: bool = False
    # with the meaning channel on: mount only the best routed turn that has a later turn linked to
    # it in meaning, and that turn after it (grm/grafts/memory.py RouteConfig.pair)
    pair: bool = False
    # with the meaning channel on: a routed turn with a later turn linked to it in meaning is left out
    # and that turn mounted in its place (grm/grafts/memory.py RouteConfig.replace)
    replace: bool = False
    device: str = "auto"  # auto | cpu | cuda | cuda:N (auto: the first CUDA device if any, else cpu)
    dtype: str = "auto"  # auto | float32 | bfloat16 | float16 (auto: float32 on CPU, bfloat16 on CUDA)
    # the system message a model asked through its chat template reads first in every request (in
    # the sinks, so what is stored under one is not served under another): "memory" (MEMORY_SYSTEM),
    # "model" (the template's own default) or the text itself; a model without a template ignores it
    system: str = "memory"

    @classmethod
    def from_options(cls, store: str | Path | None = None, cache_dir: str | Path | None = None,
                     model: str | None = None, **fields: object) -> "RuntimeConfig":
        """A config from plain options: paths expanded, defaults filled ($GRM_HOME, $GRM_CACHE)."""
        known = {f for f in cls.__dataclass_fields__ if f not in ("store", "cache_dir", "model")}
        unknown = sorted(set(fields) - known)
        if unknown:
            raise UserInputError(f"unknown runtime option(s): {', '.join(unknown)}")
        return cls(store=store_location(store),
                   cache_dir=Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir(),
                   model=model or DEFAULT_MODEL, **fields)  # type: ignore[arg-type]

    def __post_init__(self) -> None:
        object.__setattr__(self, "store", store_location(self.store))  # `RuntimeConfig(store="~/x")` works
        object.__setattr__(self, "cache_dir", Path(self.cache_dir).expanduser())
        check_tenant(self.tenant)
        if self.threads is not None and self.threads < 1:
            raise UserInputError("--threads must be >= 1")
        if self.durability not in DURABILITY:
            raise UserInputError(f"bad durability {self.durability!r}: one of {', '.join(DURABILITY)}")
        if self.block_tokens < 8:
            raise UserInputError("block size must be >= 8 tokens")
        if self.section_tokens < 8 or self.graft_k < 1:
            raise UserInputError("section size must be >= 8 tokens and graft count >= 1")
        if self.max_new_tokens < 1:
            raise UserInputError("--max-new-tokens must be >= 1")
        if self.device_budget < 0 or self.host_budget < 0 or self.seat_budget < 1 or self.repair < 0:
            raise UserInputError("device and host budgets must be >= 0 bytes, seat budget >= 1, repair >= 0 tokens")
        if not 0 <= self.blend <= 1:
            raise UserInputError("--blend must be a share of tokens in [0, 1] (0: off)")
        if self.reread not in REREAD:
            raise UserInputError(f"bad reread choice {self.reread!r}: one of {', '.join(REREAD)}")
        if self.lead not in LEADS:
            raise UserInputError(f"bad lead choice {self.lead!r}: one of {', '.join(LEADS)}")
        if self.order not in ORDERS:
            raise UserInputError(f"bad mount order {self.order!r}: one of {', '.join(ORDERS)}")
        if self.channel not in CHANNELS:
            raise UserInputError(f"bad routing channel {self.channel!r}: one of {', '.join(CHANNELS)}")
        if not 0 <= self.abstain_floor <= 1 or not self.abstain_line.strip():
            raise UserInputError("abstain floor must be in [0, 1] and the abstain line not empty")
        if self.meaning not in MEANINGS:
            raise UserInputError(f"bad meaning choice {self.meaning!r}: one of {', '.join(MEANINGS)}")
        if self.rules not in RULES:
            raise UserInputError(f"bad rules choice {self.rules!r}: one of {', '.join(RULES)}")
        if self.later < 0:
            raise UserInputError("--later must be >= 0")
        if self.extractor not in EXTRACTORS:
            raise UserInputError(f"bad extractor {self.extractor!r}: one of {', '.join(EXTRACTORS)}")
        if not self.system.strip():
            raise UserInputError("the system message must not be empty (memory, model, or a text)")
        check_names(self.device, self.dtype)  # a CUDA device that is not there: ModelError at load

    def system_text(self, default: str) -> str:
        """The system message this config asks for, where the template's own is `default`."""
        return SYSTEMS.get(self.system, self.system) or default
