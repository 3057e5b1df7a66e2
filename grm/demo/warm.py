"""The demo's second process: `python -m grm.demo.warm JOB.json` (written by `grm demo`) opens the
store the first process wrote and asks the same prompts warm; one JSON object per line on stdout."""

from __future__ import annotations

import sys

from grm.errors import GrmError


def main() -> int:
    from grm.demo.run import warm_phase

    if len(sys.argv) != 2:
        print("usage: python -m grm.demo.warm JOB.json (written by `grm demo`)", file=sys.stderr)
        return 2
    try:
        return warm_phase(sys.argv[1])
    except GrmError as exc:
        print(f"grm: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
