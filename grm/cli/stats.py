"""`grm stats` (what is stored, for one tenant) and `grm fsck` (verify every record)."""

from __future__ import annotations

import argparse

from grm.cli.common import emit, human_bytes, master_key, open_store, store_root
from grm.cli.terminal import json_text, say

# fsck report fields that are information, not damage: they never make the exit status 1.
FSCK_INFO = ("records", "orphans", "repaired")


def add_parser(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("stats", parents=[common], help="what is stored",
                       description="The store's settings, log and footprint (every tenant: what --store-budget "
                       "counts, as the sum of its parts), then the tenant's records per kind and its K/V by tier "
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


def stats_table(st: dict) -> list[str]:
    """The store and tenant lines `grm stats` prints without --json (each figure says what it
    counts: the store-wide ones say so, the tenant's table holds only that tenant's rows)."""
    yes = {True: "", False: "not "}
    lines = [f"store       {st.get('root')} ({st.get('backend', 'local')})",
             f"settings    durability {st.get('durability')}, {yes.get(bool(st.get('encrypted')))}encrypted, "
             f"{yes.get(bool(st.get('compressed')))}compressed"]
    if "log_bytes" in st:
        checkpoint = st.get("checkpoint_lsn") or 0
        lines.append(f"log         {st.get('log_segments')} segment(s), {human_bytes(st['log_bytes'])}; last write "
                     f"LSN {st.get('last_lsn')}; last checkpoint "
                     + (f"at LSN {checkpoint}" if checkpoint else "none yet (`grm gc` writes one)"))
    if st.get("poisoned"):
        lines.append("poisoned    yes: a durability failure happened; reopen the store")
    if "tiers" in st:
        lines += footprint_lines(st["tiers"])
    kinds = st["kinds"]
    total = sum(s.get("payload_bytes", 0) for s in kinds.values())
    lines.append(f"tenant      {st['tenant']}: {st['records']} record(s) naming {human_bytes(total)} of payload files "
                 "(other tenants are not shown)")
    if kinds:
        cols = ("records", "active", "superseded", "damaged")
        width = max(len("kind"), *(len(k) for k in kinds))
        lines.append(f"  {'kind':<{width}}" + "".join(f"  {c:>10}" for c in cols) + f"  {'payload bytes':>13}")
        for kind in sorted(kinds):
            s = kinds[kind]
            lines.append(f"  {kind:<{width}}" + "".join(f"  {s.get(c, 0):>10}" for c in cols)
                         + f"  {human_bytes(s.get('payload_bytes', 0)):>13}")
        lines.append(f"  {'all':<{width}}" + "".join(f"  {sum(s.get(c, 0) for s in kinds.values()):>10}" for c in cols)
                     + f"  {human_bytes(total):>13}")
        if "graft" in kinds:
            lines.append("  (a document graft names its block's payload file: its bytes are counted with the block)")
    if "tiers" in st:
        lines += tier_lines(st["tiers"])
    return lines


def footprint_lines(t: dict) -> list[str]:
    """The store's footprint (grm/store/tiering.py Inventory.to_json + the budget) as the sum of
    its parts, every tenant's."""
    budget = t.get("budget")
    spans = t["footprint_bytes"] - t["kept_bytes"] - t["log_bytes"] - t["row_bytes"]
    return [f"footprint   {human_bytes(t['footprint_bytes'])}, every tenant, what --store-budget counts: "
             f"{'no budget set (grm tier --store-budget SIZE)' if budget is None else human_bytes(budget) + ' budget'}",
             f"  = K/V spans {human_bytes(spans)} + other payloads {human_bytes(t['kept_bytes'])} (documents, facts, "
             f"sinks, codebooks) + log {human_bytes(t['log_bytes'])} + rows {human_bytes(t['row_bytes'])} (checkpoint "
             "and catalog, estimated)"]


def tier_lines(t: dict) -> list[str]:
    """This tenant's K/V spans by tier (grm/store/tiering.py Inventory.to_json)."""
    lines = ["K/V spans of this tenant by tier (exact: K/V as computed; archive: compressed, lossy; text: re-read; "
             "per document: `grm documents list`)"]
    for name, row in t["tiers"].items():
        lines.append(f"  {name:<8} {row['spans']:>8} span(s) {row['tokens']:>10} tokens  {human_bytes(row['bytes']):>10}")
    return lines


def run_stats(args: argparse.Namespace) -> int:
    from grm.runtime.admin import tenant_stats

    with open_store(args, read_only=True) as store:
        st = tenant_stats(store, args.tenant)
    if args.json:
        say(json_text(st))
    else:
        say("\n".join(stats_table(st)))
    return 0


def fsck_status(fields: dict, repaired: bool) -> int:
    """1 when the report shows damage: a non-empty list field other than FSCK_INFO (damaged,
    already_damaged, lost, ...), or a catalog that disagrees and was not rebuilt; else 0."""
    damage = any(isinstance(v, (list, tuple, dict)) and v for k, v in fields.items() if k not in FSCK_INFO)
    return 1 if damage or (fields.get("catalog_ok") is False and not repaired) else 0


def run_fsck(args: argparse.Namespace) -> int:
    from grm.runtime import admin

    if args.salvage:
        admin.require_store(store_root(args))
        admin.check_tenant(args.tenant)  # every command checks --tenant (salvage itself is store-wide)
        fields = admin.salvage(store_root(args), durability=args.durability, master_key=master_key(args),
                               compress=args.compress)
        emit(fields, args.json)
        return fsck_status(fields, False)
    with open_store(args, read_only=not args.repair) as store:
        fields = admin.fsck(store, repair=args.repair)
    emit(fields, args.json)
    return fsck_status(fields, args.repair)
