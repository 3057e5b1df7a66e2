"""English words, written once for every plane that reads text by rule (no tagger, no model).

- `words`: the closed word classes (determiners, pronouns, prepositions, be, modals, wh-words),
  the one stop-word list built from them (`STOP_WORDS`), and the one plural/possessive fold
  (`stem`).
- `dates`: the one set of patterns for a time, a date, a weekday, a month and a year said in text.
- `verbs`: common verbs and their regular and irregular forms (the answer lead's rules).
- `person`: first person said back as second ("my" -> "your"), for leads and facts said back.

Pure functions and constants over strings: this package imports nothing of grm and no tensors,
so the policy plane and the mechanics may both use it (ARCHITECTURE.md, layer 0).
"""
