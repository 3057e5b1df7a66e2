"""Cutting a document into blocks of at most `budget` tokens, along the text's structure.

Cuts are tried coarse to fine: after a run of whitespace that holds a newline (paragraphs, lines),
before the space after a sentence end, before any space (words), and only as a last resort between
characters. A cut never lands inside a token because each block is tokenized on its own: the
block's token ids are the reading of exactly its bytes, and the same bytes anywhere later read the
same way. Concatenating the blocks' texts gives the document back byte for byte.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from grm.models.tokenizer import Tokenizer

# Each pattern marks positions where a new piece may start.
_LEVELS = (
    re.compile(r"(?<=\n)(?=\S)"),  # after a whitespace run with a newline, before the next text
    re.compile(r"(?<=[.!?;:])(?=\s)"),  # sentence ends: the space goes with the next sentence
    re.compile(r"(?=\s)"),  # words: the space goes with the next word (BPE attaches it there)
)


@dataclass(frozen=True)
class Block:
    text: str
    ids: tuple[int, ...]


def _cut(text: str, level: int) -> list[str]:
    if level >= len(_LEVELS):
        return list(text)
    points = [m.start() for m in _LEVELS[level].finditer(text) if 0 < m.start() < len(text)]
    if not points:
        return [text]
    bounds = [0, *points, len(text)]
    return [text[a:b] for a, b in zip(bounds, bounds[1:]) if b > a]


def _pieces(text: str, tok: Tokenizer, budget: int, level: int) -> list[tuple[str, int]]:
    """Split `text` into (piece, tokens) each within budget, using the coarsest cuts that do."""
    out: list[tuple[str, int]] = []
    for piece in _cut(text, level):
        n = len(tok.encode(piece))
        if n <= budget or level >= len(_LEVELS):
            out.append((piece, n))
        else:
            out.extend(_pieces(piece, tok, budget, level + 1))
    return out


def split_blocks(text: str, tok: Tokenizer, budget: int) -> list[Block]:
    """Blocks of at most `budget` tokens (a single character can exceed it only if it alone does)."""
    if budget < 1:
        raise ValueError("block budget must be >= 1 token")
    blocks: list[Block] = []
    current, current_n = "", 0
    for piece, n in _pieces(text, tok, budget, 0):
        if current and current_n + n > budget:
            blocks.extend(_seal(current, tok, budget))
            current, current_n = "", 0
        current += piece
        current_n += n
    if current:
        blocks.extend(_seal(current, tok, budget))
    return blocks


def _seal(text: str, tok: Tokenizer, budget: int) -> list[Block]:
    """A block from `text`; pieces can merge across their seam, so re-check and halve if needed."""
    ids = tok.encode(text)
    if len(ids) <= budget or len(text) <= 1:
        return [Block(text, tuple(ids))]
    mid = len(text) // 2
    return _seal(text[:mid], tok, budget) + _seal(text[mid:], tok, budget)
