"""`grm memory LINE...`: one memory command per call, no model loaded.

    grm memory "remember permanently: my locker code is 1234"
    grm memory forget: locker code          (the words are joined with spaces: quoting is optional)
    grm memory confirm forget c-1a2b3c4d5e6f
    grm memory list | reviews | folds       active facts / pending reviews / digests, eras, aborts

Exit status: 0 the command did what it said; 1 it ran but changed nothing it was asked to (no
match, several matches, refused, not available); 2 not a memory command or malformed (one line on
stderr, like every user error). `--json` prints one object: the CommandResult's fields, or for
list/reviews/folds {"facts"|"reviews"|"nodes": [...]}. A store is created by the first command
that writes; reading commands on a missing store fail with exit 2. Words that are not UTF-8 text
are a user error (exit 2).
"""

from __future__ import annotations

import argparse
import sys
import time

from grm.cli.common import check_text, open_store
from grm.cli.terminal import json_text, say


def add_parser(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("memory", parents=[common], help="memory commands: remember, forget, correct, review, ...",
                       description="Run one memory command (the chat grammar) on the store, without a model: "
                       "remember permanently: S | remember this for the project: S | forget: WHAT | "
                       "confirm forget TOKEN | correct memory: OLD => NEW | pin: / unpin: WHAT | "
                       "mark immutable: / mark mutable: WHAT | approve|reject review ID | edit review ID: S | "
                       "show memory [about: WHAT] | why do you remember: WHAT | set durability: MODE. "
                       "Or: list (active facts), reviews (pending), folds (digests, eras, aborts).")
    p.add_argument("line", nargs="+", metavar="WORD", help="the command line (its words are joined with spaces)")
    p.add_argument("--project", default=None, metavar="NAME", help="the current project, for project facts (default: none)")
    p.add_argument("--session", default=None, metavar="NAME", help="the current session, for session facts (default: none)")
    p.set_defaults(handler=run)


def _lines(obj: dict) -> list[str]:
    rows = obj.get("facts", obj.get("reviews"))
    if rows is not None:
        return [f"{r['id']}: {r['statement']}" + (f" (contradicts {r['conflicts']})" if "conflicts" in r else "")
                for r in rows] or ["(none)"]
    return ([f"{n['id']}: {n['type']} of {len(n['children'])}, coverage {n['coverage']}" for n in obj["nodes"]]
            + [f"{a['id']}: aborted at coverage {a['coverage']:.2f}" for a in obj["aborts"]]) or ["(none)"]


def run(args: argparse.Namespace) -> int:
    from grm.runtime.commands import LISTINGS, listing, memory_config, parse_line, policy_memory

    text = check_text(" ".join(args.line).strip(), "the memory command")
    config = memory_config(args.tenant, args.project, args.session)
    now = time.time()
    if text.casefold() in LISTINGS:
        with open_store(args, read_only=True) as store:  # beside a live writer (a running chat) too
            obj = listing(policy_memory(store, config), text.casefold(), now)
        say(json_text(obj) if args.json else "\n".join(_lines(obj)))
        return 0
    line = parse_line(text)
    with open_store(args, create=not line.reading, read_only=line.reading) as store:
        res = policy_memory(store, config).execute(
            line.command, evidence_id=f"cli-{int(now * 1000)}", now=now)
    say(json_text(res.to_json()) if args.json else res.text)
    if line.durability is not None:
        print("grm: note: every grm command opens the store in its --durability mode (default normal); "
              f"pass --durability {line.durability} to keep this one", file=sys.stderr)
    return 0 if res.ok else 1
