"""The SQLite catalog: an index derived from the host state (which recovery derives from the
log), never trusted over it. If it is missing, unreadable, of another schema, or at another LSN
than the log, it is deleted (through the store's file system) and rebuilt.

Schema (version 1; WAL journal, synchronous=NORMAL - FULL in durability full/strict - losing its
last commits to a power cut is fine because the LSN check then rebuilds it):

    catalog_meta(k TEXT PRIMARY KEY, v TEXT)      -- "schema" = "1", "lsn" = last LSN reflected
    rows(id INTEGER PRIMARY KEY, tenant, kind, key, tag, parent, meta, payload, payload_size,
         text, state, lsn, UNIQUE(tenant, kind, key))
         -- tag = sha256(tenant)[:16], one FTS token that narrows matches to a tenant;
         -- meta is canonical JSON
    rows_parent index on (tenant, kind, parent)
    rows_fts: FTS5(tag, text), external content = rows, kept in step by triggers

With a file system that has no OS paths (MemoryFS), or in an encrypted store (whose catalog
would hold stored text in the clear), the catalog lives in ":memory:" and is filled from the
host state on every open.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Iterable

from grm.store.fs import FileSystem
from grm.store.layout import tenant_dir_name
from grm.store.record import Record, canonical_json

log = logging.getLogger("grm.store")

SCHEMA_VERSION = "1"
# Routing on big catalogs (Catalog._selective): measured in bench/results/scale.md.
SELECTIVE_MIN_ROWS = 20_000  # catalogs this small are searched exactly as asked
SAMPLE_ROWS = 4_096  # newest rows a token's share is estimated on
COMMON_SHARE = 0.01  # a token in more than this share of the rows is skipped while a rarer one remains
MAX_POSTINGS = 20_000  # rows scored for a query whose every token is common
_SCHEMA = """
CREATE TABLE IF NOT EXISTS catalog_meta(k TEXT PRIMARY KEY, v TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS rows(
  id INTEGER PRIMARY KEY, tenant TEXT NOT NULL, kind TEXT NOT NULL, key TEXT NOT NULL,
  tag TEXT NOT NULL, parent TEXT, meta TEXT NOT NULL, payload TEXT, payload_size INTEGER NOT NULL,
  text TEXT, state TEXT NOT NULL, lsn INTEGER NOT NULL, UNIQUE(tenant, kind, key));
CREATE INDEX IF NOT EXISTS rows_parent ON rows(tenant, kind, parent);
CREATE VIRTUAL TABLE IF NOT EXISTS rows_fts USING fts5(tag, text, content='rows', content_rowid='id');
CREATE TRIGGER IF NOT EXISTS rows_ai AFTER INSERT ON rows BEGIN
  INSERT INTO rows_fts(rowid, tag, text) VALUES (new.id, new.tag, new.text);
END;
CREATE TRIGGER IF NOT EXISTS rows_ad AFTER DELETE ON rows BEGIN
  INSERT INTO rows_fts(rows_fts, rowid, tag, text) VALUES ('delete', old.id, old.tag, old.text);
END;
CREATE TRIGGER IF NOT EXISTS rows_au AFTER UPDATE ON rows
WHEN old.text IS NOT new.text OR old.tag IS NOT new.tag BEGIN
  INSERT INTO rows_fts(rows_fts, rowid, tag, text) VALUES ('delete', old.id, old.tag, old.text);
  INSERT INTO rows_fts(rowid, tag, text) VALUES (new.id, new.tag, new.text);
END;
"""
_COLUMNS = "tenant, kind, key, parent, meta, payload, payload_size, text, state, lsn"
_UPSERT = """
INSERT INTO rows(tenant, kind, key, tag, parent, meta, payload, payload_size, text, state, lsn)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT(tenant, kind, key) DO UPDATE SET tag=excluded.tag, parent=excluded.parent,
  meta=excluded.meta, payload=excluded.payload, payload_size=excluded.payload_size,
  text=excluded.text, state=excluded.state, lsn=excluded.lsn
"""


def _row(r: Record) -> tuple:
    return (r.tenant, r.kind, r.key, tenant_dir_name(r.tenant), r.parent, canonical_json(r.meta),
            r.payload, r.payload_size, r.text, r.state, r.lsn)


class Catalog:
    """Not thread-safe: the store calls it under its lock. sqlite3.DatabaseError escapes every
    method; the store answers it with `rebuild`."""

    def __init__(self, fs: FileSystem, path: str | None, full_sync: bool = False, *,
                 read_only: bool = False) -> None:
        self.fs = fs
        self.path = path  # None = in memory
        self.full_sync = full_sync  # synchronous=FULL (durability full/strict) instead of NORMAL
        self.read_only = read_only  # inspect a stored catalog without changing it (read-only fsck)
        self._conn: sqlite3.Connection | None = None

    @property
    def conn(self) -> sqlite3.Connection:
        if self._conn is None:
            self._conn = self._connect()
        return self._conn

    def _connect(self) -> sqlite3.Connection:
        if self.read_only and self.path is not None:
            return sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, isolation_level=None,
                                   check_same_thread=False)
        conn = sqlite3.connect(self.path or ":memory:", isolation_level=None, check_same_thread=False)
        try:
            if self.path is not None:
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute(f"PRAGMA synchronous={'FULL' if self.full_sync else 'NORMAL'}")
            else:  # in memory (encrypted stores): never let SQLite spill rows to temp files
                conn.execute("PRAGMA temp_store=MEMORY")
            conn.executescript(_SCHEMA)
        except BaseException:
            conn.close()
            raise
        return conn

    def set_full_sync(self, full: bool) -> None:
        self.full_sync = full
        if self._conn is not None and self.path is not None:
            self._conn.execute(f"PRAGMA synchronous={'FULL' if full else 'NORMAL'}")

    def open(self, records: Iterable[Record], lsn: int) -> bool:
        """Make the catalog reflect `records` at `lsn`; True if a stored catalog was missing,
        damaged or stale and had to be rebuilt (what `catalog_rebuilds` counts)."""
        existed = self.path is not None and self.fs.exists(self.path)
        try:
            meta = dict(self.conn.execute("SELECT k, v FROM catalog_meta").fetchall())
            if meta.get("schema") == SCHEMA_VERSION and meta.get("lsn") == str(lsn):
                return False
            reason = f"catalog at lsn {meta.get('lsn')}, schema {meta.get('schema')}; log at lsn {lsn}"
        except sqlite3.DatabaseError as e:
            reason = f"catalog unreadable: {e}"
        counted = self.path is not None and (existed or lsn > 0)
        if counted:
            log.warning("rebuilding catalog %s (%s)", self.path, reason)
        self.rebuild(records, lsn)
        return counted

    def rebuild(self, records: Iterable[Record], lsn: int) -> None:
        self.close()
        if self.path is not None:
            for suffix in ("", "-wal", "-shm", "-journal"):
                if self.fs.exists(self.path + suffix):
                    self.fs.remove(self.path + suffix)
        conn = self.conn
        conn.execute("BEGIN")
        try:
            conn.executemany(_UPSERT, (_row(r) for r in records))
            conn.executemany("INSERT OR REPLACE INTO catalog_meta(k, v) VALUES (?, ?)",
                             [("schema", SCHEMA_VERSION), ("lsn", str(lsn))])
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    def apply(self, upserts: list[Record], deletes: list[tuple[str, str, str]], lsn: int) -> None:
        conn = self.conn
        conn.execute("BEGIN")
        try:
            conn.executemany(_UPSERT, [_row(r) for r in upserts])
            conn.executemany("DELETE FROM rows WHERE tenant = ? AND kind = ? AND key = ?", deletes)
            conn.execute("INSERT OR REPLACE INTO catalog_meta(k, v) VALUES ('lsn', ?)", (str(lsn),))
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise

    def search(self, tenant: str, tokens: list[str], kind: str | None, limit: int) -> list[tuple[str, str, float]]:
        """(kind, key, score) of active rows of `tenant` matching any token, best first.
        Tokens are quoted here, so no user text is ever parsed as FTS5 syntax. On a big catalog
        the commonest tokens may be skipped (`_selective`)."""
        tokens, window = self._selective(tokens)
        phrases = " OR ".join('"' + t.replace('"', '""') + '"' for t in tokens)
        match = f'text : ({phrases})'
        where, args = "", []
        if window is not None:
            where, args = " AND rowid > ?", [window]
        filt, fargs = "r.tenant = ? AND r.state = 'active'", [tenant]
        if kind is not None:
            filt += " AND r.kind = ?"
            fargs.append(kind)
        # Rank in the FTS index alone first (no row lookup per match), then filter the best
        # `inner` rows: exact whenever `limit` of them pass the filter, as in a one-tenant store.
        # Otherwise rank with the filter joined in (the tenant is filtered by the join, not by
        # `tag : T AND (...)` in the MATCH: that walks the tenant's whole posting list; scores
        # are the same, bm25's statistics are the table's).
        inner = limit * 4
        try:
            hits = self.conn.execute(
                f"SELECT r.kind, r.key, f.s FROM (SELECT rowid AS id, bm25(rows_fts, 0.0, 1.0) AS s "
                f"FROM rows_fts WHERE rows_fts MATCH ?{where} ORDER BY s LIMIT ?) f "
                f"JOIN rows r ON r.id = f.id WHERE {filt} ORDER BY f.s LIMIT ?",
                [match, *args, inner, *fargs, limit]).fetchall()
            if len(hits) < limit and self.conn.execute(
                    f"SELECT count(*) FROM (SELECT rowid FROM rows_fts WHERE rows_fts MATCH ?{where} LIMIT ?)",
                    [match, *args, inner + 1]).fetchone()[0] > inner:
                hits = self.conn.execute(
                    f"SELECT r.kind, r.key, bm25(rows_fts, 0.0, 1.0) AS s FROM rows_fts "
                    f"JOIN rows r ON r.id = rows_fts.rowid WHERE rows_fts MATCH ?{where.replace('rowid', 'rows_fts.rowid')} "
                    f"AND {filt} ORDER BY s LIMIT ?", [match, *args, *fargs, limit]).fetchall()
        except sqlite3.OperationalError as e:
            if "fts5" not in str(e):
                raise
            # Quoting should make this unreachable; a query is still never an error.
            log.warning("FTS5 rejected query %r: %s", match, e)
            return []
        # bm25() is lower-is-better; the store's contract is higher-is-better.
        return [(k, key, -s) for k, key, s in hits]

    def _selective(self, tokens: list[str]) -> tuple[list[str], int | None]:
        """The tokens worth scoring, and a rowid floor (None: every row). BM25 scores every row
        holding any query token, so one very common token makes a query cost a scan of a large
        share of the catalog while adding almost nothing to the ranking (its idf is
        ln((N - n + 0.5) / (n + 0.5)): 4.6 at 1% of the rows, against 9.2 at 0.01%). On a
        catalog of more than SELECTIVE_MIN_ROWS rows (smaller ones are never changed), a token
        found in more than COMMON_SHARE of the newest SAMPLE_ROWS rows is skipped when a rarer
        one remains. Never all of them: if every token is common, the rarest is kept and only
        the newest rows expected to hold MAX_POSTINGS of it are scored (recent memory first)."""
        top = self.conn.execute("SELECT max(id) FROM rows").fetchone()[0] or 0
        if top <= SELECTIVE_MIN_ROWS or len(self.conn.execute(
                "SELECT 1 FROM rows LIMIT 1 OFFSET ?", (SELECTIVE_MIN_ROWS,)).fetchall()) == 0:
            return tokens, None
        floor = top - SAMPLE_ROWS
        sampled = self.conn.execute("SELECT count(*) FROM rows WHERE id > ?", (floor,)).fetchone()[0] or 1
        share = {}
        for t in tokens:
            quoted = 'text : "' + t.replace('"', '""') + '"'
            try:
                n = self.conn.execute("SELECT count(*) FROM rows_fts WHERE rows_fts MATCH ? AND rowid > ?",
                                      (quoted, floor)).fetchone()[0]
            except sqlite3.OperationalError:
                n = 0  # searched (and reported) as it is
            share[t] = n / sampled
        kept = [t for t in tokens if share[t] <= COMMON_SHARE]
        if kept:
            return kept, None
        rarest = min(tokens, key=lambda t: share[t])
        reach = int(MAX_POSTINGS / max(share[rarest], 1e-9))
        return [rarest], (top - reach if reach < top else None)

    def rows(self) -> list[Record]:
        """Every row as the catalog holds it (fsck compares them with the host state)."""
        out = []
        for t, k, key, parent, meta, payload, size, text, state, lsn in self.conn.execute(
                f"SELECT {_COLUMNS} FROM rows"):
            out.append(Record(t, k, key, parent, json.loads(meta), payload, size, text, state, lsn))
        return out

    def intact(self) -> bool:
        """SQLite's quick_check and FTS5's integrity-check (the index agrees with the rows):
        a damaged index could make a search miss rows that fsck's row comparison sees."""
        try:
            if self.conn.execute("PRAGMA quick_check").fetchone()[0] != "ok":
                return False
            if self.read_only:
                return True  # FTS5's integrity-check is an INSERT: not on a read-only connection
            self.conn.execute("INSERT INTO rows_fts(rows_fts, rank) VALUES ('integrity-check', 1)")
            return True
        except sqlite3.DatabaseError:
            return False

    def ahead_of(self, lsn: int) -> tuple[int, list[Record]] | None:
        """(its LSN, its rows) if this stored catalog reflects a log LSN past `lsn`: evidence
        that acknowledged records are missing from the log. None otherwise (or unreadable)."""
        if self.path is None or not self.fs.exists(self.path):
            return None
        try:
            mine = self.lsn()
            if mine is None or mine <= lsn:
                return None
            return mine, self.rows()
        except (sqlite3.DatabaseError, ValueError):
            return None

    def lsn(self) -> int | None:
        row = self.conn.execute("SELECT v FROM catalog_meta WHERE k = 'lsn'").fetchone()
        return int(row[0]) if row else None

    def close(self) -> None:
        if self._conn is not None:
            conn, self._conn = self._conn, None
            conn.close()
