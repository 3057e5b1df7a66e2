"""`grm serve`: the OpenAI-compatible memory server (grm/serve).

    grm serve --keys keys.txt [--host 127.0.0.1] [--port 8420] [--queue N] [--timeout S] [--tenant-bytes SIZE]
              [--host-budget SIZE]
    grm serve --no-auth                         (loopback host only; every request is --tenant)
    grm serve --add-key TENANT --keys keys.txt  (prints a new key once; stores its SHA-256)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from grm.cli.common import (add_mount_flags, byte_count, check_unlocked, mount_options, named_holder, positive_int,
                            runtime_config)
from grm.cli.tier import add_budget_flag

DEFAULT_HOST_BUDGET = 1 << 30  # the server's host tier (RuntimeConfig.host_budget; one-shot commands keep none)


def add_parser(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("serve", parents=[common], help="an OpenAI-compatible HTTP server with memory",
                       description="Serve /v1/chat/completions, /v1/completions and /v1/models (the OpenAI API), "
                       "memory REST (/v1/memories, /v1/review, /v1/documents), /metrics (Prometheus), /healthz, "
                       "/readyz and a web memory inspector at /ui. API keys map to tenants (--keys FILE; make "
                       "one with --add-key TENANT). SIGTERM finishes in-flight requests, then exits. On a local "
                       "store it keeps an endpoint file (SERVE.json, mode 0600, with a local token) while it runs: "
                       "`grm ask` and `grm ingest` on the same store are sent to it instead of loading the model.")
    p.add_argument("--host", default="127.0.0.1", help="interface to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8420, help="TCP port (default 8420)")
    p.add_argument("--keys", metavar="FILE", help="API keys file: one 'TENANT sha256:HEX' a line (no default: give it, or --no-auth)")
    p.add_argument("--no-auth", action="store_true",
                   help="no API keys: every request is --tenant (only with a loopback --host)")
    p.add_argument("--add-key", metavar="TENANT",
                   help="make a key for TENANT, add its hash to --keys FILE, print the key, exit (default: none, serve)")
    p.add_argument("--queue", type=positive_int, default=16, metavar="N",
                   help="requests one API key may have waiting for the model; one more gets 429 for that key "
                   "only (default 16)")
    p.add_argument("--queue-total", type=positive_int, default=256, metavar="N",
                   help="requests waiting across all keys; one more gets 503 (default 256)")
    p.add_argument("--slice", type=float, default=0.25, metavar="S",
                   help="a document ingest gives the model back to waiting requests after S seconds, at its "
                   "next block (default 0.25)")
    p.add_argument("--job-timeout", type=float, default=3600.0, metavar="S",
                   help="an ingest job not done S seconds after it was queued is stopped (default 3600)")
    p.add_argument("--tenant-bytes", type=byte_count, default=None, metavar="SIZE",
                   help="bytes of K/V and documents one API key may store, e.g. 2GB; its writes past it get "
                   "429 (default: no quota)")
    p.add_argument("--timeout", type=float, default=300.0, metavar="S",
                   help="seconds before a request gets 504 and its generation stops (default 300)")
    p.add_argument("--max-tokens", type=positive_int, default=256, metavar="N",
                   help="generation limit when a request gives no max_tokens (default 256)")
    p.add_argument("--batch", type=positive_int, default=8, metavar="N",
                   help="answers generated together: up to N chats or completions decode in one forward call a "
                   "token, each read alone first (memory as without a batch), joining and leaving between "
                   "tokens; 1 generates one answer at a time; a sliding-window model, or one in bf16 or fp16 on a "
                   "CPU, is never batched, since its batched answers could differ from the answers alone "
                   "(default 8)")
    p.add_argument("--prefill-chunk", type=int, default=512, metavar="N",
                   help="chunked prefill: a request joining the batch reads its prompt N tokens at a time, one "
                   "decoding step of the batch between two chunks, so running answers keep streaming while a "
                   "long prompt is read (chunks are whole forward calls of the read alone, up to 512 tokens: "
                   "the same K/V and answer); 0 reads each prompt whole first (default 512)")
    p.add_argument("--host-budget", type=byte_count, default=DEFAULT_HOST_BUDGET, metavar="SIZE",
                   help="bytes of verified exact K/V kept in host RAM between requests (page-locked with a GPU), "
                        "so a repeated context mounts from RAM without a store read; shared fairly between "
                        "tenants, least recently used out first; 0 turns it off (default 1G)")
    add_mount_flags(p)
    add_budget_flag(p)
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from grm.errors import UserInputError
    from grm.serve.auth import add_key
    from grm.serve.config import ServeConfig

    if args.add_key:
        if not args.keys:
            raise UserInputError("--add-key needs --keys FILE (where the key's hash is kept)")
        key = add_key(Path(args.keys), args.add_key)
        print(key)
        print(f"grm: added a key for tenant {args.add_key} to {args.keys}; it is shown only now", file=sys.stderr)
        return 0
    config = ServeConfig(host=args.host, port=args.port, keys=Path(args.keys).expanduser() if args.keys else None,
                         no_auth=args.no_auth, tenant=args.tenant, queue=args.queue, queue_total=args.queue_total,
                         slice_s=args.slice, job_timeout_s=args.job_timeout, tenant_bytes=args.tenant_bytes,
                         timeout_s=args.timeout, max_tokens=args.max_tokens, store_budget=args.store_budget,
                         batch=args.batch, prefill_chunk=args.prefill_chunk)
    from grm.serve.server import serve

    rc = runtime_config(args, host_budget=args.host_budget, **mount_options(args))
    check_unlocked(rc.store)  # a second server on a held store fails before loading its model
    with named_holder():
        return serve(rc, config)
