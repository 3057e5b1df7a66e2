"""The meaning channel: what a short text is about, as the model's own last hidden state after a
prompt that asks it for the text's topic in one word, centred on the tenant's turns, by cosine.

Why a third channel: the lexical channel (BM25) and the dense one (key centroids) find a turn that
shares the question's words. A plain-words update often shares none with its statement or with the
question ("My bank is Chase." ... "Ally has my paycheck now." ... "Who do I bank with?"). On
Qwen2.5-Coder-1.5B, 90 questions of three update sets against their 180 turns, pooled
(bench/results/update-reading-fresh20-fresh21-fresh22-routing.md): the statement in the top 5 by
BM25 45/90, by this vector 84/90; the update 21/90 and 48/90; this channel's top 2 for the
question, each with the later turn nearest it, hold the statement and its update both for 47/90
(BM25's top 4: 17/90). The key centroids give every short turn a cosine of 0.86-0.97.

The vector (PromptEOL, Jiang et al. 2023, "Scaling Sentence Embeddings with Large Language
Models", asked for the topic rather than the meaning: "means in one word" found the statement
75/90 but the turn after it nearest it was its update 8/90 times, the topic's 30/90; the prompt
was chosen on those three sets, read for it): `text` read alone inside `PROMPT`, the last token's
last-layer hidden state, [hidden] fp32. One short forward pass per stored turn and per query; only
for spans of at most `MAX_TOKENS` tokens (chat turns and facts, not document sections).
Stored in the graft's meta as `meaning`: base64 of fp16 little-endian numbers, as dense keys are
(grm.route.dense.encode_key; 4 KB of text on Qwen-1.5B).
Scores are cosines after subtracting the mean vector of the tenant's indexed turns (the raw states
of one model all point one way: raw cosines sit near 1); below `MIN_CENTRED` rows, raw cosines.

Lifecycle: GraftMemory computes a turn's vector when it stores it (through `QueryVectors`, so a
chat turn routed as a query a moment before is not read again), builds one
`MeaningIndex` that watches its DenseIndex (so it is told each routable row as the store's LSN
moves), and asks it `scores` for a query's vector (`QueryVectors` keeps the last few).
"""

from __future__ import annotations

import re
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np
import torch

from grm.route.dense import decode_fp16
from grm.store import Record

PROMPT = 'This sentence: "{text}" is about the topic of one word:"'
MAX_TOKENS = 256  # spans longer than this get no vector (a document section: the other channels route it)
MIN_CENTRED = 8  # centre only over at least this many rows: the mean of a handful is mostly their own content
_LABEL = re.compile(r"^\s*(?:User|Assistant):\s*", re.MULTILINE)


def said(text: str) -> str:
    """A stored turn's words without its speaker labels ("User: My bank is Chase.\\n\\n" -> "My bank
    is Chase."): the vector is of what was said."""
    return " ".join(_LABEL.sub("", text).split())


def meaning_vector(model: torch.nn.Module, tokenizer, text: str) -> torch.Tensor | None:
    """[hidden] fp32: the last-layer state of the prompt's last token; None for an empty text or one
    over MAX_TOKENS tokens."""
    words = said(text)
    if not words or len(tokenizer.encode(words)) > MAX_TOKENS:
        return None
    ids = tokenizer.encode(PROMPT.format(text=words))
    with torch.no_grad():
        out = model(input_ids=torch.tensor([ids], device=model.device), output_hidden_states=True,
                    use_cache=False, logits_to_keep=1)
    return out.hidden_states[-1][0, -1].float().cpu()


def decode_vector(text: object) -> np.ndarray | None:
    """A stored vector (written by grm.route.dense.encode_key) as fp32 [hidden]; None if absent or
    not decodable."""
    arr = decode_fp16(text)
    return None if arr is None else arr.astype(np.float32)


@dataclass(frozen=True)
class Row:
    """What the index keeps of one routable graft with a vector."""

    key: str
    kind: str
    created: float
    asks: bool  # a turn that only asks (grm/grafts/floor.only_asks): never mounted for its meaning


class MeaningIndex:
    """The vectors of one tenant's routable grafts, kept in step by watching a DenseIndex
    (grm/route/index.Watcher: told each routable row as it is admitted, each dropped, each full
    re-read). Nothing here is authoritative: a row it names is read again from the store."""

    def __init__(self, asks) -> None:
        """`asks(text)`: whether a turn only asks (kept per row, so a query does not read texts)."""
        self.asks = asks
        self.reset()

    # ----- Watcher ------------------------------------------------------------------------------
    def reset(self) -> None:
        self.rows: dict[str, tuple[Row, np.ndarray]] = {}
        self._mat: tuple[list[Row], np.ndarray, np.ndarray] | None = None  # (rows, centred unit rows, mean)

    def put(self, rec: Record) -> None:
        vec = decode_vector(rec.meta.get("meaning"))
        self.rows.pop(rec.key, None)
        if vec is not None:
            kind = rec.meta.get("kind")
            self.rows[rec.key] = (Row(rec.key, kind if isinstance(kind, str) else "", float(rec.meta.get("created", 0.0)),
                                      self.asks(rec.text or "")), vec)
        self._mat = None

    def drop(self, key: str) -> None:
        if self.rows.pop(key, None) is not None:
            self._mat = None

    # ----- reading (the caller syncs the DenseIndex first) ---------------------------------------
    def _matrix(self) -> tuple[list[Row], np.ndarray, np.ndarray]:
        if self._mat is None:  # one model's rows (the DenseIndex admits one identity): one width
            rows = [r for r, _ in self.rows.values()]
            mat = np.stack([v for _, v in self.rows.values()]) if rows else np.zeros((0, 0), np.float32)
            mean = mat.mean(0) if len(rows) >= MIN_CENTRED else np.zeros(mat.shape[1], np.float32)
            unit = mat - mean
            unit /= np.maximum(np.linalg.norm(unit, axis=1, keepdims=True), 1e-12)
            self._mat = (rows, unit, mean)
        return self._mat

    def scores(self, vec: np.ndarray | torch.Tensor) -> list[tuple[Row, float]]:
        """Every row's centred cosine with `vec`, best first."""
        rows, unit, mean = self._matrix()
        q = np.asarray(vec, dtype=np.float32).reshape(-1)
        if not rows or q.size != unit.shape[1]:
            return []
        q = q - mean
        q = q / max(float(np.linalg.norm(q)), 1e-12)
        cos = unit @ q
        order = np.argsort(-cos, kind="stable")
        return [(rows[i], float(cos[i])) for i in order.tolist()]

    def vector(self, key: str) -> np.ndarray | None:
        got = self.rows.get(key)
        return None if got is None else got[1]


class QueryVectors:
    """The vectors of the last `size` texts read, by their words (`said`): a question routed twice
    in one request (route, then the later-turn links) is read through the model once, and so is
    a chat turn, routed as a query and then stored as a turn ("What is my bank?" and "User: What
    is my bank?\n\n" are the same words, the same prompt, the same vector)."""

    def __init__(self, size: int = 64) -> None:
        self.size = size
        self._vecs: OrderedDict[str, torch.Tensor | None] = OrderedDict()

    def get(self, model: torch.nn.Module, tokenizer, text: str) -> torch.Tensor | None:
        key = said(text)
        if key in self._vecs:
            self._vecs.move_to_end(key)
            return self._vecs[key]
        vec = self._vecs[key] = meaning_vector(model, tokenizer, text)
        while len(self._vecs) > self.size:
            self._vecs.popitem(last=False)
        return vec
