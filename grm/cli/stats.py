"""`grm stats` (what is stored, for one tenant) and `grm fsck` (verify every record)."""

from __future__ import annotations

import argparse
import dataclasses

from grm.cli.common import emit, open_store, require_store, store_config, store_root
from grm.cli.terminal import json_text, say

# fsck report fields that are information, not damage: they never make the exit status 1.
FSCK_INFO = ("records", "orphans", "repaired")


def add_parser(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("stats", parents=[common], help="what is stored",
                       description="The store's settings and log, and the tenant's records per kind "
                       "(other tenants are not shown). Never creates a store.")
    p.set_defaults(handler=run_stats)
    p = sub.add_parser("fsck", parents=[common], help="verify every record",
                       description="Verify every record and print every field of the report. Exit 0: nothing "
                       "damaged; 1: damage found (damaged or already-damaged records, records lost, a catalog "
                       "that disagrees with the log unless --repair rebuilt it); 2: cannot run. Orphan payload "
                       "files (from a crash) are reported, not damage.")
    p.add_argument("--repair", action="store_true", help="repair what is provably safe to repair")
    p.add_argument("--salvage", action="store_true",
                   help="a store whose log is damaged: keep every intact record, set the damaged bytes aside "
                   "(quarantine/), name the records lost (exit 1 if any), leave a store that opens")
    p.set_defaults(handler=run_fsck)


def tenant_stats(stats: dict, tenant: str) -> dict:
    """`Store.stats()` narrowed to one tenant: the store-wide settings and log figures, and only
    `tenant`'s records (no other tenant's name or sizes)."""
    kinds = stats.get("tenants", {}).get(tenant, {})
    out = {k: v for k, v in stats.items() if k not in ("tenants", "records")}
    return {"tenant": tenant, "records": sum(s["records"] for s in kinds.values()), **out, "kinds": kinds}


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def stats_table(st: dict) -> list[str]:
    """The lines `grm stats` prints without --json."""
    on = {True: "yes", False: "no"}
    lines = [f"store       {st.get('root')}",
             f"durability  {st.get('durability')}",
             f"encrypted   {on.get(st.get('encrypted'), st.get('encrypted'))}    "
             f"compressed {on.get(st.get('compressed'), st.get('compressed'))}"]
    if "log_bytes" in st:
        lines.append(f"log         {st.get('log_segments')} segment(s), {_size(st['log_bytes'])}, last LSN "
                     f"{st.get('last_lsn')} (durable {st.get('durable_lsn')}, checkpoint {st.get('checkpoint_lsn')})")
    if st.get("poisoned"):
        lines.append("poisoned    yes: a durability failure happened; reopen the store")
    lines.append(f"tenant      {st['tenant']}: {st['records']} record(s)")
    kinds = st["kinds"]
    if kinds:
        cols = ("records", "active", "superseded", "damaged")
        width = max(len("kind"), *(len(k) for k in kinds))
        lines.append(f"  {'kind':<{width}}" + "".join(f"  {c:>10}" for c in cols) + f"  {'payload':>10}")
        for kind in sorted(kinds):
            s = kinds[kind]
            lines.append(f"  {kind:<{width}}" + "".join(f"  {s.get(c, 0):>10}" for c in cols)
                         + f"  {_size(s.get('payload_bytes', 0)):>10}")
    return lines


def tier_lines(t: dict) -> list[str]:
    """The tiers part of `grm stats` (grm/store/tiering.py Inventory.to_json + the budget)."""
    budget = t.get("budget")
    lines = [f"footprint   {_size(t['footprint_bytes'])} of "
             f"{'no budget (grm tier --store-budget SIZE)' if budget is None else _size(budget) + ' budget'}"]
    for name, row in t["tiers"].items():
        lines.append(f"  {name:<8} {row['spans']:>8} span(s) {row['tokens']:>10} tokens  {_size(row['bytes']):>10}")
    lines.append(f"  {'kept':<8} {_size(t['kept_bytes']):>38}  (documents, facts, sinks, codebooks)")
    if t["documents"]:
        width = min(40, max(len("document"), *(len(d) for d in t["documents"])))
        lines.append(f"  {'document':<{width}}  {'exact':>10}  {'archive':>10}  spans exact/archive/text")
        for doc, row in t["documents"].items():
            lines.append(f"  {doc[-width:]:<{width}}  {_size(row['exact_bytes']):>10}  {_size(row['archive_bytes']):>10}"
                         f"  {row['exact']}/{row['archive']}/{row['text']}")
    return lines


def run_stats(args: argparse.Namespace) -> int:
    from grm.store.tiering import inventory, stored_budget

    with open_store(args, read_only=True) as store:
        st = tenant_stats(store.stats(), args.tenant)
        st["tiers"] = {**inventory(store).to_json(args.tenant), "budget": stored_budget(store)}
    if args.json:
        say(json_text(st))
    else:
        say("\n".join(stats_table(st) + tier_lines(st["tiers"])))
    return 0


def fsck_fields(report: object) -> dict:
    """Every field of an fsck report (its own to_json when it has one)."""
    if hasattr(report, "to_json"):
        return report.to_json()
    return dataclasses.asdict(report)  # type: ignore[call-overload]


def fsck_status(fields: dict, repaired: bool) -> int:
    """1 when the report shows damage: a non-empty list field other than FSCK_INFO (damaged,
    already_damaged, lost, ...), or a catalog that disagrees and was not rebuilt; else 0."""
    damage = any(isinstance(v, (list, tuple, dict)) and v for k, v in fields.items() if k not in FSCK_INFO)
    return 1 if damage or (fields.get("catalog_ok") is False and not repaired) else 0


def run_fsck(args: argparse.Namespace) -> int:
    if args.salvage:
        from grm.store.salvage import salvage

        require_store(store_root(args))
        fields = salvage(store_config(args)).to_json()
        emit(fields, args.json)
        return fsck_status(fields, False)
    with open_store(args, read_only=not args.repair) as store:
        report = store.fsck(repair=args.repair)
    fields = fsck_fields(report)
    emit(fields, args.json)
    return fsck_status(fields, args.repair)
