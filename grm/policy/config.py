"""PolicyConfig: who the memory belongs to, where the conversation is, and the policy's numbers."""

from __future__ import annotations

from dataclasses import dataclass

from grm.errors import UserInputError
from grm.policy.fact import LIFETIMES, Scope
from grm.store.tenant import check_tenant


def _positive(name: str, v: object, *, integer: bool = False) -> None:
    kinds = (int,) if integer else (int, float)
    if isinstance(v, bool) or not isinstance(v, kinds) or v <= 0:
        raise UserInputError(f"{name} must be a positive {'integer' if integer else 'number'}, got {v!r}")


@dataclass(frozen=True)
class PolicyConfig:
    tenant: str = "default"  # whose memory (a store tenant name)
    project: str | None = None  # the current project (`--project`): scope of "for the project" facts
    session: str | None = None  # the current session (a chat): scope of session and volatile facts
    command_lifetime: str = "permanent"  # lifetime of `remember: S` (no lifetime said)
    extracted_lifetime: str = "permanent"  # lifetime of facts the extractor proposes
    volatile_ttl_s: float = 3600.0  # a volatile fact expires this long after it is written
    confirm_ttl_s: float = 600.0  # a `confirm forget TOKEN` must come within this many seconds
    max_listed: int = 20  # facts named in one command answer before "... and N more"
    fold_window: int = 5  # source turns per digest (fold_pending)
    fold_keep_recent: int = 4  # the newest turns fold_pending never folds
    era_fanout: int = 4  # digests per era (fold_pending)
    min_coverage: float = 0.70  # a fold that keeps a smaller share of its sources' facts aborts
    digest_max_chars: int = 1500  # the extractive digest's budget (facts first, then sentences)
    # whether `set durability:` may change the store's mode: True for the one user of `grm chat` and
    # `grm memory`; False where API tenants share the store (grm serve), whose mode is the operator's
    store_settings: bool = True
    # a turn of at least this many characters reads as a pasted document: only its claims about the
    # user ("I ...", "my ...", "we ...", "our ...") become facts; the rest are the document's, not the user's
    paste_chars: int = 1500

    def __post_init__(self) -> None:
        check_tenant(self.tenant)
        Scope(self.project, self.session)  # validates the names
        for name in ("command_lifetime", "extracted_lifetime"):
            if getattr(self, name) not in LIFETIMES:
                raise UserInputError(f"{name} must be one of {', '.join(LIFETIMES)}, got {getattr(self, name)!r}")
        for name in ("volatile_ttl_s", "confirm_ttl_s"):
            _positive(name, getattr(self, name))
        for name in ("max_listed", "fold_window", "era_fanout", "digest_max_chars", "paste_chars"):
            _positive(name, getattr(self, name), integer=True)
        if isinstance(self.fold_keep_recent, bool) or not isinstance(self.fold_keep_recent, int) or self.fold_keep_recent < 0:
            raise UserInputError(f"fold_keep_recent must be an integer >= 0, got {self.fold_keep_recent!r}")
        if self.era_fanout < 2:
            raise UserInputError("era_fanout must be at least 2 (an era indexes several digests)")
        if not isinstance(self.store_settings, bool):
            raise UserInputError(f"store_settings must be True or False, got {self.store_settings!r}")
        c = self.min_coverage
        if isinstance(c, bool) or not isinstance(c, (int, float)) or not 0.0 <= c <= 1.0:
            raise UserInputError(f"min_coverage must be in [0, 1], got {c!r}")

    @property
    def scope(self) -> Scope:
        """The context commands and lookups act in."""
        return Scope(self.project, self.session)
