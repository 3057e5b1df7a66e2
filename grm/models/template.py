"""A model's chat template, cut into the fixed pieces GRM lays memory between.

An instruct model is asked through its own template. GRM renders the template once with marker
strings in place of the contents and cuts the result where the markers stand, so every piece is
the template's own bytes (nothing is written by hand per model family):

    start   system   system_end             user         user_end              reply   reply_end
    <|im_start|>system\\n You are ... <|im_end|>\\n<|im_start|>user\\n  ...  <|im_end|>\\n<|im_start|>assistant\\n  ...  <|im_end|>\\n

`head` = start + system + system_end is what every request with the runtime's system message
starts with: GRM reads it as the sinks (stored once per model identity and system message), so
documents, sections and chat turns are stored as user content after it, and a request rendered by
the same template with the same system message (the server puts the runtime's in a chat that has
none of its own) starts with the same bytes and hits them. `system` is the template's own default
until the runtime sets its own (`with_system`, RuntimeConfig.system).

A template that does not render the probe conversations as such a sequence (no system role, or a
system text moved into the first user turn, as Gemma's does) is not used: the model is asked in
the plain format.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

_SYS, _USER, _REPLY, _USER2 = "\x00GRM-S\x00", "\x00GRM-U\x00", "\x00GRM-R\x00", "\x00GRM-V\x00"


@dataclass(frozen=True)
class ChatTemplate:
    start: str  # before the system message's content
    system: str  # the system message the head holds (the template's default until `with_system`)
    system_end: str  # after a system message's content, up to a user message's content
    user_end: str  # after a user message's content, up to the assistant's reply (the generation prompt)
    reply_end: str  # after the assistant's reply, up to the next user message's content

    @property
    def head(self) -> str:
        """The text before the first user message's content, with the system message it holds."""
        return self.start + self.system + self.system_end

    def with_system(self, text: str) -> "ChatTemplate":
        """The same template with `text` as the system message of every request."""
        return replace(self, system=text)

    def user_turn(self, text: str) -> str:
        """`text` as the user's message after the head, with the generation prompt after it."""
        return text + self.user_end

    def exchange(self, user: str, reply: str) -> str:
        """A finished exchange as it stands in a later prompt (up to the next user content)."""
        return user + self.user_end + reply + self.reply_end


def derive(hf_tokenizer: Any) -> ChatTemplate | None:
    """The template of `hf_tokenizer` cut into pieces, or None if it has none or it does not render
    as the module's docstring says (then the model is asked in the plain format)."""
    if not getattr(hf_tokenizer, "chat_template", None):
        return None

    def render(messages: list[dict[str, str]], prompt: bool = True) -> str:
        return hf_tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=prompt)

    try:
        with_system = render([{"role": "system", "content": _SYS}, {"role": "user", "content": _USER}])
        default = render([{"role": "user", "content": _USER}])
        two = render([{"role": "system", "content": _SYS}, {"role": "user", "content": _USER},
                      {"role": "assistant", "content": _REPLY}, {"role": "user", "content": _USER2}])
    except Exception:  # a template that raises on a system role or on plain strings
        return None
    if with_system.count(_SYS) != 1 or not with_system.endswith(with_system[with_system.index(_USER) + len(_USER):]):
        return None
    start, rest = with_system.split(_SYS)
    system_end, user_end = rest.split(_USER)
    head, tail = default.split(_USER) if default.count(_USER) == 1 else ("", "")
    if not start or tail != user_end or not head.startswith(start) or not head.endswith(system_end):
        return None
    system = head[len(start):len(head) - len(system_end)] if len(head) >= len(start) + len(system_end) else None
    prefix = start + _SYS + system_end + _USER + user_end + _REPLY
    if system is None or not two.startswith(prefix) or _USER2 not in two:
        return None
    reply_end = two[len(prefix):two.index(_USER2)]
    if not reply_end or not two.endswith(_USER2 + user_end):
        return None
    return ChatTemplate(start, system, system_end, user_end, reply_end)
