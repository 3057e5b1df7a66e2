"""Tokenizers behind one small interface: the HF tokenizer of a real model, and a byte tokenizer.

GRM never lets a tokenizer add special tokens on its own: every token that enters a context is
placed there on purpose (sinks, block text, question), so prompts are reproducible byte for byte.
"""

from __future__ import annotations

from typing import Protocol

from grm.models.template import ChatTemplate, derive


class Tokenizer(Protocol):
    """What GRM needs of a tokenizer: exact encode/decode and the end-of-turn tokens."""

    eos_ids: frozenset[int]  # tokens that end a generated answer
    sink_ids: tuple[int, ...]  # the fixed prefix read first in every context (>= 4 tokens)
    template: ChatTemplate | None  # the chat template the model is asked through (None: plain format)

    def encode(self, text: str) -> list[int]: ...

    def decode(self, ids: list[int]) -> str: ...

    def use_system(self, text: str) -> None:
        """With a template: `text` becomes the system message every request reads (the sinks)."""
        ...

    def piece_bytes(self, ids: list[int]) -> list[bytes] | None:
        """The exact bytes each token stands for (joined: the encoded text), or None if this
        tokenizer cannot say. Lets blocks be cut at token boundaries of one whole reading."""
        ...


# ChatML, the template a tiny test model may be asked through (`tiny-random-llama-chat`): the
# templated request path runs in the unit tests without a real model.
CHATML = ChatTemplate(start="<|im_start|>system\n", system="You are a test model.",
                      system_end="<|im_end|>\n<|im_start|>user\n", user_end="<|im_end|>\n<|im_start|>assistant\n",
                      reply_end="<|im_end|>\n<|im_start|>user\n")


class ByteTokenizer:
    """Every UTF-8 byte is one token (ids 0..255); 256 = BOS, 257 = EOS. For tiny test models.
    With a `template`, the sinks are BOS then the template's head (as HFTokenizer's are the head)."""

    vocab_size = 258
    bos_id = 256
    eos_id = 257

    def __init__(self, template: ChatTemplate | None = None) -> None:
        self.eos_ids = frozenset({self.eos_id})
        self.template = template
        self.sink_ids = self._sinks()

    def _sinks(self) -> tuple[int, ...]:
        return (self.bos_id,) * 4 + (tuple(self.encode(self.template.head)) if self.template else ())

    def use_system(self, text: str) -> None:
        """Ask through the template with `text` as the system message: the sinks read it."""
        if self.template is not None:
            self.template = self.template.with_system(text)
            self.sink_ids = self._sinks()

    def encode(self, text: str) -> list[int]:
        return list(text.encode("utf-8"))

    def decode(self, ids: list[int]) -> str:
        return bytes(i for i in ids if i < 256).decode("utf-8", errors="replace")

    def piece_bytes(self, ids: list[int]) -> list[bytes] | None:
        return [bytes([i]) if i < 256 else b"" for i in ids]

    def files_digest_parts(self) -> list[bytes]:
        return [b"byte-tokenizer-v1"] + ([repr(self.template).encode()] if self.template else [])


def _byte_level_alphabet() -> dict[str, int]:
    """GPT-2's reversible byte -> printable character map, inverted (char -> byte)."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    chars = list(keep)
    n = 0
    for b in range(256):
        if b not in keep:
            keep.append(b)
            chars.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(keep, chars)}


class HFTokenizer:
    """Wraps a transformers tokenizer; never adds BOS/EOS by itself. `chat`: ask the model through
    its chat template (grm/models/template.py); then the sinks are the template's head (the
    default system message and the user turn's opening), read first in every context."""

    def __init__(self, hf_tokenizer: object, sink_text: str | None = None, chat: bool = False) -> None:
        self._tok = hf_tokenizer
        self.template = derive(hf_tokenizer) if chat else None
        if self.template is not None:
            sink_text = self.template.head
        eos: set[int] = set()
        for name in ("eos_token_id", "pad_token_id"):
            value = getattr(hf_tokenizer, name, None)
            if isinstance(value, int):
                eos.add(value)
        for special in ("<|im_end|>", "<|endoftext|>", "<end_of_turn>", "<eos>"):
            tid = hf_tokenizer.convert_tokens_to_ids(special)
            # An unknown token maps to unk: keep the id only if it really is this special token.
            if isinstance(tid, int) and tid >= 0 and hf_tokenizer.convert_ids_to_tokens(tid) == special:
                eos.add(tid)
        self.eos_ids = frozenset(eos)
        self.sink_ids = self._sinks(sink_text)
        decoder = type(getattr(getattr(hf_tokenizer, "backend_tokenizer", None), "decoder", None)).__name__
        self._byte_map = _byte_level_alphabet() if decoder == "ByteLevel" else None

    def _sinks(self, sink_text: str | None) -> tuple[int, ...]:
        bos = getattr(self._tok, "bos_token_id", None)
        if sink_text is not None:
            ids = tuple(self.encode(sink_text))
        elif isinstance(bos, int):
            ids = (bos,)
        else:
            ids = ()
        if isinstance(bos, int) and (not ids or ids[0] != bos) and sink_text is None:
            ids = (bos,) + ids
        # Pad with the first sink token so there are always >= 4 sink tokens (attention sinks).
        while len(ids) < 4:
            ids = ids + (ids[0] if ids else 0,)
        return ids

    def use_system(self, text: str) -> None:
        """Ask through the template with `text` as the system message: the sinks read it."""
        if self.template is not None:
            self.template = self.template.with_system(text)
            self.sink_ids = self._sinks(self.template.head)

    def encode(self, text: str) -> list[int]:
        return list(self._tok.encode(text, add_special_tokens=False))

    def decode(self, ids: list[int]) -> str:
        return self._tok.decode(ids, skip_special_tokens=True)

    def piece_bytes(self, ids: list[int]) -> list[bytes] | None:
        if self._byte_map is None:
            return None
        out = []
        special = set(getattr(self._tok, "all_special_ids", ()))
        for tid, piece in zip(ids, self._tok.convert_ids_to_tokens(ids)):
            if tid in special or piece is None or any(ch not in self._byte_map for ch in piece):
                return None
            out.append(bytes(self._byte_map[ch] for ch in piece))
        return out
