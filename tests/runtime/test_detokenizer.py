"""grm/runtime/generate.Detokenizer: the answer's text as it grows equals decoding every id so far,
at every step, while each token is decoded once (a bounded window), not the whole answer again."""

from __future__ import annotations

from grm.runtime.generate import Detokenizer


class Counting:
    """A tokenizer wrapper that counts the ids it decodes."""

    def __init__(self, tok) -> None:
        self.tok, self.decoded = tok, 0

    def decode(self, ids: list[int]) -> str:
        self.decoded += len(ids)
        return self.tok.decode(ids)


class CleansSpaces:
    """Decodes words and drops the space before a comma, as HF's clean_up_tokenization_spaces
    does: a later token changes earlier text."""

    WORDS = ["hello", " ", ",", " world", "."]

    def decode(self, ids: list[int]) -> str:
        return "".join(self.WORDS[i] for i in ids).replace(" ,", ",")


def grow(tok, ids: list[int]) -> list[str]:
    d = Detokenizer(tok)
    return [d.push(i) for i in ids]


def test_text_equals_the_whole_decoding_at_every_step(tiny_models):
    tok = tiny_models["llama"].tokenizer
    text = "Caf\u00e9 na\u00efve \u65e5\u672c\u8a9e \U0001f697, and  two  spaces.\n\nA new paragraph."
    ids = tok.encode(text)
    for n, got in enumerate(grow(tok, ids), 1):
        full = tok.decode(ids[:n])
        assert got.rstrip("\ufffd") == full.rstrip("\ufffd")  # a half-written character may show as pending


def test_each_token_is_decoded_in_a_bounded_window(tiny_models):
    tok = Counting(tiny_models["llama"].tokenizer)
    ids = tiny_models["llama"].tokenizer.encode("word " * 400)
    grow(tok, ids)
    assert tok.decoded <= 2 * (Detokenizer.CONTEXT + 2) * len(ids)  # linear; the whole answer per token is ~n^2/2


def test_a_later_token_that_changes_earlier_text_resynchronizes():
    tok = CleansSpaces()
    steps = grow(tok, [0, 1, 2, 3, 4])
    assert steps == [tok.decode([0, 1, 2, 3, 4][:n]) for n in range(1, 6)]
    assert steps[-1] == "hello, world."
