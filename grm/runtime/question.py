"""A question as the model reads it after memory: the question template (or the chat template's
user turn), and the answer's lead: begun from the question's own words where a rule covers it
(grm/runtime/lead.py), fitted to the texts mounted before it (`fit_lead`), off for a model asked
through its own chat template (`lead_for`). The answer pipeline (answer.py `question_read`) and the
chat (chat.py `turn_read`) frame questions through here."""

from __future__ import annotations

import re
from collections.abc import Iterable

from grm.models import LoadedModel
from grm.models.template import ChatTemplate
from grm.runtime.lead import answer_lead, asked_label

QUESTION_TEMPLATE = "\n\nQuestion: {q}\nAnswer:"
# a user's turn as memory keeps it (a chat turn harvested "user", a served exchange): the words,
# labelled, read alone after the sinks; read so before it is routed (`GraftMemory.read_said`)
USER_WORDS = "User: {text}\n\n"


def question_text(question: str, lead: bool = True, template: ChatTemplate | None = None) -> str:
    """The text read after memory: the question template, with the answer started from the
    question's own words where a rule covers it (grm/runtime/lead.py: "What is the X?" -> "The X
    is"; bench/results/questions.md: SmolLM2 12/20 plain, 20/20 so led, same text in context);
    a question that already starts its own answer ("...?\nAnswer: The X is") is kept as it is
    (through a chat template: that start begins the assistant's reply)."""
    q = question.strip()
    if "\nAnswer:" in q:
        if template is not None:
            asked, _, start = q.partition("\nAnswer:")
            return led(asked.strip(), start.strip() or None, template)
        return f"\n\nQuestion: {q}"
    return led(q, answer_lead(q) if lead else None, template)


def led(question: str, lead: str | None, template: ChatTemplate | None = None) -> str:
    """The question template with `lead` (if any) begun after "Answer:"; through a chat template,
    the question ends the user's message (after a blank line, below what memory put there) and the
    lead begins the assistant's reply."""
    if template is not None:
        return "\n\n" + template.user_turn(question) + (lead or "")
    return QUESTION_TEMPLATE.format(q=question) + (f" {lead}" if lead else "")


_LEAD_PREP = ("in", "on", "at")
_FIT_PREP = re.compile(r"\s+(in|on|at|with|from|by|near|under|behind|inside|beside)\b", re.IGNORECASE)


def lead_for(lm: LoadedModel) -> str:
    """What RuntimeConfig.lead "auto" is for `lm`: "off" where the model is asked through its own
    chat template (an instruct model that reads a plain question), else "model" (the rules, then
    the model). On Qwen2.5-Coder-1.5B, sets written blind, from memory, the leads never beat the
    plain question: FRESH-17 7/30 with and without (bench/results/fidelity-fresh17-*), recurring-b
    20/20 with rules, rules-then-model and none, recurring-a 18/20 with and without (reading-*)."""
    return "off" if lm.tokenizer.template is not None else "model"


def rules_for(lm: LoadedModel) -> str:
    """What RuntimeConfig.rules "auto" is for `lm`: "off" where the model is asked through its own
    chat template (an instruct model reads memory as routed), "on" otherwise (SmolLM2 does not read
    a plain question: the leads lift it from 29/40 to 38/40 on SEALED-7's blind first run). On
    Qwen2.5-Coder-1.5B, 60 plain-words updates written blind (FRESH-20 and FRESH-21, first runs of
    the same code side by side), the latest value from memory 19/60 with the rules off vs 15/60
    on (20 of the 60 answerable questions abstained by the floor; in context 27/60):
    bench/results/fidelity-fresh2{0,1}-qwen2.5-coder-1.5b-rules-{on,off}.md."""
    return "off" if lm.tokenizer.template is not None else "on"


def meaning_for(lm: LoadedModel) -> str:
    """What RuntimeConfig.meaning "auto" is for `lm`: "on" where the model is asked through its own
    chat template (an instruct model: its hidden states after the one-word topic prompt put a
    statement in the top 5 for its question 84/90 where BM25 does 45/90,
    bench/results/update-reading-fresh20-fresh21-fresh22-routing.md), "off" otherwise (a model
    that cannot read a plain question is not asked for a topic either)."""
    return "on" if lm.tokenizer.template is not None else "off"


def reread_turns_for(lm: LoadedModel) -> bool:
    """Whether RuntimeConfig.reread "auto" reads routed chat turns and facts (short spans a user
    said) as text for `lm`, whatever their mount would cost: yes where the model is asked through
    its own chat template. On Qwen2.5-Coder-1.5B the turns memory routes are right, but mounted side
    by side (each computed alone) they are read wrong where the same turns read as text are read
    right, decided by a rule written before its runs (bench/results/reread-decision-rule.md): the
    200-turn held-out chat 16/16 read as text vs 10/16 mounted (13/16 with the needle turn in
    context; 32.0 vs 25.8 s per turn), the 51-turn chats 16/16 and 16/16 vs 12/16 and 13/16, and
    FRESH-25 (written blind; its first run, mounted, gave 7/30 latest) 10/30 read as text (stale
    14 vs 12; in context 14/30). A model without a template keeps the cost rule (not measured this
    way). Document sections stay mounted or re-read by their measured cost."""
    return lm.tokenizer.template is not None


def fit_lead(lead: str | None, read: Iterable[str], question: str = "") -> str | None:
    """`lead` fitted to the texts read before the question:

    - `question` asks a label's value ("Which room of the X Hotel is reserved for ...?",
      grm/runtime/lead.asked_label) and a text read says that label before a value ("Room 5986
      of the X Hotel"): the lead is the label alone ("Room"). SmolLM2 then says the value where a
      lead in the question's words drifted ("The room is reserved for the keynote speaker"; the
      label led 12/12 on the three such templates of bench/data/sealed/questions-sealed6.json,
      the rules' leads 7/12: read after that split's blind run, so tuned on it; on SEALED-2..5,
      which never informed it, 21/24 against 13/24: bench/results/questions-fitted.md).
    - `lead` ending in a preposition the rules guessed ("Where is the printer?" -> "The printer
      is in") takes the one a text read says after the same words instead ("The printer is on
      floor 5" -> "The printer is on"): a small model follows the lead's "in" away from a fact
      said with "on".

    The first text (best routed) that says the words decides; none: unchanged. `read` is
    iterated only this far: a lazy one costs nothing for a lead with neither."""
    if question and asked_label(question):
        read = list(read)
        if label := label_lead(question, read):
            return label
    words = (lead or "").split()
    if len(words) < 3 or words[-1].casefold() not in _LEAD_PREP:
        return lead
    stem = " ".join(words[:-1])
    said = re.compile(re.escape(stem).replace(r"\ ", r"\s+") + _FIT_PREP.pattern, re.IGNORECASE)
    for text in read:
        if m := said.search(text):
            return f"{stem} {m[1].casefold()}"
    return lead


def label_lead(question: str, read: Iterable[str]) -> str | None:
    """The label `question` asks the value of (grm/runtime/lead.asked_label), capitalized, where a
    text `read` says it before a value ("Room" for "Which room ...?" after "Room 6493 of ..."),
    else None (`fit_lead`)."""
    label = asked_label(question)
    if not label:
        return None
    said = re.compile(rf"\b{re.escape(label.split()[-1])}\s*[:#]?\s*[A-Za-z]{{0,3}}-?\d", re.IGNORECASE)
    return label[0].upper() + label[1:] if any(said.search(text) for text in read) else None


def with_lead(lead: str | None, text: str) -> str:
    """The generated text after the lead it continues (nothing generated: nothing)."""
    if not lead or not text:
        return text
    return lead + ("" if text[0] in ",.;:!?'" else " ") + text
