"""GRM's policy plane: what memory means (facts vs evidence, conflicts, supersession, review,
the command grammar, folding with a fidelity gate, descent). Model-free: it talks only to the
store. Start at `PolicyMemory` (`grm.policy.memory`), whose docstring says what the runtime
calls and when."""

from grm.policy.config import PolicyConfig
from grm.policy.extract import Extractor, NoExtractor, RuleExtractor, canonical, parse_statement
from grm.policy.fact import INTENTS, LIFETIMES, Evidence, Fact, FactProposal, Scope
from grm.policy.fold import Folder, FoldResult, Node, SourceTurn
from grm.policy.grammar import Command, Malformed, parse
from grm.policy.memory import CommandResult, Outcome, PolicyMemory
from grm.policy.review import ReviewItem
from grm.policy.rules import Candidate, Decision, decide

__all__ = [
    "INTENTS", "LIFETIMES", "Candidate", "Command", "CommandResult", "Decision", "Evidence", "Extractor", "Fact",
    "FactProposal", "FoldResult", "Folder", "Malformed", "NoExtractor", "Node", "Outcome", "PolicyConfig", "PolicyMemory",
    "ReviewItem", "RuleExtractor", "Scope", "SourceTurn", "canonical", "decide", "parse", "parse_statement",
]
