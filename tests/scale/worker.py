"""A second GRM process for the shared-store tests: `python -m tests.scale.worker ACTION STORE ...`
prints one JSON line per result on stdout (flushed), so the test reads what it acknowledged.

Actions:
  remember STORE STATEMENT     a runtime writes a fact through the chat grammar; prints its graft
  ask STORE PROMPT             exact ask with memory and without; prints both answers and counts
  route STORE QUESTION         grafts ask; prints the mounted ids
  hold STORE TENANT            writes one row (takes the tenant's lease), prints, waits for stdin
  writer STORE SECONDS         puts rows with payloads for SECONDS; prints each acknowledged key;
                               a failed write (server down) is retried, reopening on a lost lease;
                               the store is encrypted when GRM_MASTER_KEY is set
"""

from __future__ import annotations

import json
import os
import sys
import time


def out(**obj) -> None:
    print(json.dumps(obj), flush=True)


def runtime(store: str):
    from grm.runtime import Runtime

    return Runtime.open(store=store, model="tiny-random-llama", threads=1, max_new_tokens=4)


def main(action: str, store: str, arg: str) -> None:
    if action == "remember":
        with runtime(store) as rt:
            reply = rt.chat(clear_context=True).send(arg)
            facts = rt.policy_glue().policy.facts()
            out(changed=reply.changed, grafts=[f.graft for f in facts], statements=[f.statement for f in facts])
    elif action == "ask":
        with runtime(store) as rt:
            warm = rt.ask(arg, mode="exact", max_new_tokens=4)
            cold = rt.ask(arg, mode="exact", max_new_tokens=4, memory=False)
            out(warm=warm.answer, cold=cold.answer, from_memory=warm.tokens_from_memory,
                computed=warm.tokens_computed, cold_computed=cold.tokens_computed)
    elif action == "route":
        with runtime(store) as rt:
            out(mounted=[m["id"] for m in rt.ask(arg, mode="grafts", max_new_tokens=2).mounted])
    elif action == "hold":
        from grm.store.opener import open_backend

        with open_backend(store) as s:
            s.put(arg, "note", "held", text="held by the worker")
            out(held=arg)
            sys.stdin.readline()
    elif action == "writer":
        writer(store, float(arg))
    else:
        raise SystemExit(f"unknown action {action}")


def writer(store: str, seconds: float) -> None:
    from grm.errors import StoreError
    from grm.store.opener import open_backend

    from grm.store import load_master_key

    key = load_master_key(None, os.environ.get("GRM_MASTER_KEY"))  # as the CLI: encrypted when set
    s, i, failures = open_backend(store, master_key=key), 0, 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        key = f"k{i:06d}"
        try:
            s.put("default", "note", key, payload=f"payload {key} ".encode() * 8, text=f"row {key}")
        except StoreError as e:
            failures += 1
            if "reopen" in str(e) or "lease" in str(e):
                s.close()
                s = open_backend(store, master_key=key)
            time.sleep(0.05)
            continue  # not acknowledged: the same key is tried again
        out(ack=key)
        i += 1
    s.close()
    out(done=i, failures=failures)


if __name__ == "__main__":
    main(*sys.argv[1:4])
