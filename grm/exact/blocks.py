"""Cutting a document into blocks of at most `budget` tokens, along the text's structure.

The document is tokenized ONCE, whole, and blocks are cut at boundaries of that reading, so the
blocks' token ids concatenated are exactly the document's token ids: a prompt that starts with
the document reads the same tokens whether its blocks come from memory or not. Cuts are placed,
coarse to fine, after a run of whitespace that holds a newline (paragraphs, lines), before the
space after a sentence end, before any space, and only as a last resort at any token boundary;
never inside a token and never inside a UTF-8 character. Concatenating the blocks' texts gives
the document back byte for byte.

Tokenizers that cannot name each token's bytes (`piece_bytes` is None) fall back to tokenizing
each structural piece on its own; their blocks then match prompts only piecewise.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from grm.models.tokenizer import Tokenizer

# Each pattern marks character positions where a new block may start; lower level = better cut.
_LEVELS = (
    re.compile(r"(?<=\n)(?=\S)"),  # after a whitespace run with a newline, before the next text
    re.compile(r"(?<=[.!?;:])(?=\s)"),  # sentence ends: the space goes with the next sentence
    re.compile(r"(?=\s)"),  # words: the space goes with the next word (BPE attaches it there)
)
_ANY = len(_LEVELS)  # any token boundary on a character boundary


@dataclass(frozen=True)
class Block:
    text: str
    ids: tuple[int, ...]


def split_blocks(text: str, tok: Tokenizer, budget: int) -> list[Block]:
    """Blocks of at most `budget` tokens whose texts and ids concatenate to the document's."""
    if budget < 1:
        raise ValueError("block budget must be >= 1 token")
    if not text:
        return []
    ids = tok.encode(text)
    pieces = tok.piece_bytes(ids)
    data = text.encode("utf-8")
    if pieces is None or b"".join(pieces) != data:
        return _split_piecewise(text, tok, budget)
    # Byte offset where each token starts; offsets[len(ids)] = len(data).
    offsets = [0]
    for p in pieces:
        offsets.append(offsets[-1] + len(p))
    level = _cut_levels(text)
    blocks: list[Block] = []
    start = 0
    while start < len(ids):
        end = min(start + budget, len(ids))
        if end < len(ids):
            end = _best_cut(start, end, offsets, data, level)
        chunk = data[offsets[start] : offsets[end]]
        blocks.append(Block(chunk.decode("utf-8"), tuple(ids[start:end])))
        start = end
    return blocks


def _cut_levels(text: str) -> dict[int, int]:
    """Byte offset -> best structural level of a cut there."""
    char_to_byte = {}
    pos = 0
    for i, ch in enumerate(text):
        char_to_byte[i] = pos
        pos += len(ch.encode("utf-8"))
    char_to_byte[len(text)] = pos
    level: dict[int, int] = {}
    for lv in range(len(_LEVELS) - 1, -1, -1):
        for m in _LEVELS[lv].finditer(text):
            level[char_to_byte[m.start()]] = lv
    return level


def _best_cut(start: int, end: int, offsets: list[int], data: bytes, level: dict[int, int]) -> int:
    """The token index in (start, end] to cut at: the latest one at the best structural level."""
    best, best_level = None, _ANY + 1
    for j in range(end, start, -1):
        off = offsets[j]
        if off >= len(data) or data[off] & 0xC0 == 0x80:
            continue  # inside a UTF-8 character
        lv = level.get(off, _ANY)
        if lv < best_level:
            best, best_level = j, lv
            if lv == 0:
                break
    if best is None:
        return end  # no clean boundary at all (a token run inside one character): cut anyway
    return best


def _split_piecewise(text: str, tok: Tokenizer, budget: int) -> list[Block]:
    """Fallback: cut the text structurally and tokenize each block on its own."""
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


def _cut(text: str, level: int) -> list[str]:
    if level >= len(_LEVELS):
        return list(text)
    points = [m.start() for m in _LEVELS[level].finditer(text) if 0 < m.start() < len(text)]
    bounds = [0, *points, len(text)]
    return [text[a:b] for a, b in zip(bounds, bounds[1:]) if b > a]


def _pieces(text: str, tok: Tokenizer, budget: int, level: int) -> list[tuple[str, int]]:
    out: list[tuple[str, int]] = []
    for piece in _cut(text, level):
        n = len(tok.encode(piece))
        if n <= budget or level >= len(_LEVELS):
            out.append((piece, n))
        else:
            out.extend(_pieces(piece, tok, budget, level + 1))
    return out


def _seal(text: str, tok: Tokenizer, budget: int) -> list[Block]:
    ids = tok.encode(text)
    if len(ids) <= budget or len(text) <= 1:
        return [Block(text, tuple(ids))]
    mid = len(text) // 2
    return _seal(text[:mid], tok, budget) + _seal(text[mid:], tok, budget)
