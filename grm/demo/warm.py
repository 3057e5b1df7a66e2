"""The demo's second process: open the store the first one wrote and ask the same prompts warm.
Prints one JSON answer per line on stdout."""

from __future__ import annotations

import argparse
import json
import sys

from grm.demo.run import prompts
from grm.errors import GrmError
from grm.runtime import Runtime


def main() -> int:
    p = argparse.ArgumentParser(prog="python -m grm.demo.warm")
    p.add_argument("--store", required=True)
    p.add_argument("--tenant", default="default")
    p.add_argument("--model", default=None)
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--max-new-tokens", type=int, default=16)
    args = p.parse_args()
    try:
        with Runtime.open(store=args.store, model=args.model, tenant=args.tenant, threads=args.threads) as rt:
            for prompt in prompts():
                print(json.dumps(rt.ask(prompt, mode="exact", max_new_tokens=args.max_new_tokens).to_json()))
    except GrmError as exc:
        print(f"grm: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
