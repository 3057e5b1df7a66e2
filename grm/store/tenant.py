"""Tenant names: the one rule, and the one reserved name.

A tenant owns every record it writes; the store keeps tenants apart. `SYSTEM_TENANT` holds what
belongs to a model rather than to a user (attention sinks, archive codebooks): GRM writes it,
users never name it. Every place that takes a tenant from a user (RuntimeConfig, PolicyConfig,
the CLI's store opener, the server) checks it with `check_tenant`.
"""

from __future__ import annotations

import re

from grm.errors import UserInputError

SYSTEM_TENANT = "_system"
# 1-64 characters; a leading letter or digit, so every name starting with '_' stays GRM's.
TENANT_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


def check_tenant(name: object) -> str:
    """`name` if a user may use it as a tenant, else UserInputError (one line, for the CLI)."""
    if not isinstance(name, str) or not TENANT_RE.fullmatch(name):
        raise UserInputError(f"bad tenant name {name!r}: 1-64 of letters, digits, '_', '.', '-', "
                             f"not starting with '_' ({SYSTEM_TENANT!r} is GRM's own)")
    return name
