"""Server configuration: one frozen dataclass; `grm serve` fills it from flags."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from pathlib import Path

from grm.errors import UserInputError

LOOPBACK_NAMES = ("localhost",)


def is_loopback(host: str) -> bool:
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class ServeConfig:
    host: str = "127.0.0.1"  # interface to listen on
    port: int = 8420  # TCP port (0: any free port, for tests)
    keys: Path | None = None  # API keys file (tenant + SHA-256 of the key per line; grm/serve/auth.py)
    no_auth: bool = False  # every request is `tenant` without a key: only on a loopback host
    tenant: str = "default"  # the tenant of unauthenticated requests (--no-auth)
    queue: int = 16  # requests one API key may have waiting for the model worker; one more is its 429
    queue_total: int = 256  # requests waiting across all keys; one more gets 503 (the server is full)
    slice_s: float = 0.25  # a long job (document ingest) gives the worker back after this long, at its next block
    job_timeout_s: float = 3600.0  # an ingest job not done this long after it was queued is stopped
    tenant_bytes: int | None = None  # payload bytes one API key may store (429 for its writes past it); None: no quota
    timeout_s: float = 300.0  # a request not answered by then gets 504 (its generation is cancelled)
    max_body_bytes: int = 8 << 20  # request bodies above this get 413
    max_tokens: int = 256  # generation limit when a request gives no max_tokens
    trace_len: int = 100  # requests kept per tenant for the inspector's trace
    drain_s: float = 30.0  # on SIGTERM, how long in-flight requests may take to finish
    store_budget: int | None = None  # bytes the store is kept under (grm/store/tiering.py); None: the stored one
    batch: int = 8  # answers generated together, one forward call a token for all (1: one at a time)
    # prompt tokens the worker reads of joining answers between two decoding steps of the batch
    # (whole forward calls of a lone read, up to 512 tokens: a longer one alone); 0: each prompt
    # read whole before it joins, the batch waiting
    prefill_chunk: int = 512

    def __post_init__(self) -> None:
        if not 0 <= self.port <= 65535:
            raise UserInputError(f"bad port {self.port}: 0-65535")
        if self.queue < 1 or self.queue_total < self.queue:
            raise UserInputError("--queue must be >= 1, and the server's total at least one key's")
        if self.slice_s <= 0 or self.job_timeout_s <= 0:
            raise UserInputError("--slice and --job-timeout must be > 0 seconds")
        if self.tenant_bytes is not None and self.tenant_bytes < 1:
            raise UserInputError("--tenant-bytes must be at least 1 byte")
        if self.timeout_s <= 0:
            raise UserInputError("--timeout must be > 0 seconds")
        if self.max_body_bytes < 1024 or self.max_tokens < 1 or self.trace_len < 1 or self.drain_s < 0:
            raise UserInputError("body limit must be >= 1024 bytes, max tokens and trace length >= 1, drain >= 0")
        if self.batch < 1:
            raise UserInputError("--batch must be at least 1")
        if self.prefill_chunk < 0:
            raise UserInputError("--prefill-chunk must be >= 0 tokens (0: read each prompt whole)")
        if self.store_budget is not None and self.store_budget < 1:
            raise UserInputError("--store-budget must be at least 1 byte")
        if self.no_auth and self.keys is not None:
            raise UserInputError("give either --keys FILE or --no-auth, not both")
        if not self.no_auth and self.keys is None:
            raise UserInputError("the server needs API keys: --keys FILE (make one with `grm serve --add-key "
                                 "TENANT --keys FILE`), or --no-auth on a loopback host")
        if self.no_auth and not is_loopback(self.host):
            raise UserInputError(f"--no-auth is allowed only on a loopback host (127.0.0.1, ::1, localhost), "
                                 f"not {self.host!r}")
