"""The SQLite catalog: the row set at one log LSN, with an FTS5 index of the text. Derived from
the log (checkpoint + frames after it), never trusted over it: if it is missing, unreadable, of
another schema, ahead of the log or behind the checkpoint, it is deleted (through the store's
file system) and rebuilt; a row that fails its CRC on read is damage, answered the same way.

In a plain local store it is also the host state (`grm.store.state.CatalogState`): rows are read
from it on demand and it is opened at its LSN with only the log after it replayed, so open time
and memory do not grow with the rows. Its LSN check is what makes that safe: a catalog that lost
its last commits to a power cut (synchronous=NORMAL) is behind the log and the missing frames are
replayed; one behind the checkpoint (the log before it is gone) is rebuilt.

Schema (version 2; WAL journal, synchronous=NORMAL - FULL in durability full/strict):

    catalog_meta(k TEXT PRIMARY KEY, v TEXT)  -- "schema" = "2", "lsn" = last LSN reflected,
                                              -- "mode" = JSON of the last logged durability mode
    rows(id INTEGER PRIMARY KEY, tenant, kind, key, tag, parent, meta, payload, payload_size,
         text, state, lsn, crc, UNIQUE(tenant, kind, key))
         -- tag = sha256(tenant)[:16], one FTS token that narrows matches to a tenant;
         -- meta is canonical JSON; crc = CRC32C of the row's canonical JSON list (checked on read)
    rows_parent index on (tenant, kind, parent)
    rows_fts: FTS5(tag, text), external content = rows, kept in step by triggers

With a file system that has no OS paths (MemoryFS), in an encrypted store (whose catalog would
hold stored text in the clear), or opened read-only, the catalog lives in ":memory:", is filled
from a resident host state (`HostState`) on every open, and that state stays resident.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
from collections.abc import Iterable, Iterator

import crc32c

from grm.store.fs import FileSystem
from grm.store.layout import tenant_dir_name
from grm.store.record import Record, canonical_json

log = logging.getLogger("grm.store")

SCHEMA_VERSION = "2"
# Routing on big catalogs (Catalog._selective): measured in bench/results/scale.md.
SELECTIVE_MIN_ROWS = 20_000  # catalogs this small are searched exactly as asked
SAMPLE_ROWS = 4_096  # newest rows a token's share is estimated on
MAX_POSTINGS = 3_000  # rows a query scores at most (about): its commonest tokens are skipped past it
_SCHEMA = """
CREATE TABLE IF NOT EXISTS catalog_meta(k TEXT PRIMARY KEY, v TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS rows(
  id INTEGER PRIMARY KEY, tenant TEXT NOT NULL, kind TEXT NOT NULL, key TEXT NOT NULL,
  tag TEXT NOT NULL, parent TEXT, meta TEXT NOT NULL, payload TEXT, payload_size INTEGER NOT NULL,
  text TEXT, state TEXT NOT NULL, lsn INTEGER NOT NULL, crc INTEGER NOT NULL,
  UNIQUE(tenant, kind, key));
CREATE INDEX IF NOT EXISTS rows_parent ON rows(tenant, kind, parent);
CREATE INDEX IF NOT EXISTS rows_lsn ON rows(tenant, kind, lsn);
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
INSERT INTO rows(tenant, kind, key, tag, parent, meta, payload, payload_size, text, state, lsn, crc)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT(tenant, kind, key) DO UPDATE SET tag=excluded.tag, parent=excluded.parent,
  meta=excluded.meta, payload=excluded.payload, payload_size=excluded.payload_size,
  text=excluded.text, state=excluded.state, lsn=excluded.lsn, crc=excluded.crc
"""
_SELECT = f"SELECT {_COLUMNS}, crc FROM rows"
_R_COLUMNS = ", ".join(f"r.{c.strip()}" for c in (_COLUMNS + ", crc").split(","))
_EXISTS = "SELECT 1 FROM rows WHERE tenant = ? AND kind = ? AND key = ?"
_DELETE = "DELETE FROM rows WHERE tenant = ? AND kind = ? AND key = ?"
_BATCH = 2048


KEEP_MODE = object()  # apply(mode=KEEP_MODE): the transaction logged no durability mode


class RowDamaged(sqlite3.DatabaseError):
    """A catalog row whose CRC does not match its columns (the store rebuilds the catalog)."""


def _crc(cols: tuple) -> int:
    """CRC32C of a row's ten stored columns (meta as its canonical JSON text)."""
    return crc32c.crc32c("\x1f".join("\x00" if c is None else str(c) for c in cols).encode("utf-8"))


def _row(r: Record) -> tuple:
    cols = (r.tenant, r.kind, r.key, r.parent, canonical_json(r.meta), r.payload, r.payload_size,
            r.text, r.state, r.lsn)
    return (*cols[:3], tenant_dir_name(r.tenant), *cols[3:], _crc(cols))


def _record(v: tuple) -> Record:
    if _crc(v[:10]) != v[10]:
        raise RowDamaged(f"catalog row {v[0]}/{v[1]}/{v[2]} fails its crc")
    return Record(v[0], v[1], v[2], v[3], json.loads(v[4]), v[5], v[6], v[7], v[8], v[9])


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
        self.lock = threading.RLock()  # one connection: readers outside the store lock take this
        self._window: tuple[int, int, bool] | None = None  # _selective's sample, reset by writes
        self._shares: dict[str, float] = {}

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

    def rebuild(self, records: Iterable[Record], lsn: int, mode: str | None = None) -> None:
        with self.lock:
            self.reset()
            conn = self.conn
            conn.execute("BEGIN")
            try:
                conn.executemany(_UPSERT, (_row(r) for r in records))
                self._set_meta(lsn, mode)
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise

    def apply(self, upserts: list[Record], deletes: list[tuple[str, str, str]], lsn: int,
              mode: object = KEEP_MODE) -> int:
        """One committed transaction; `mode` is the durability mode it logged (`KEEP_MODE`: none).
        Returns the change in the row count."""
        self._window = None
        with self.lock:
            conn = self.conn
            conn.execute("BEGIN")
            try:
                delta = 0
                for r in upserts:
                    delta += self.upsert(r)
                for d in deletes:
                    delta -= conn.execute(_DELETE, d).rowcount
                self._set_meta(lsn, mode)
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
        return delta

    def search(self, tenant: str, tokens: list[str], kind: str | None, limit: int) -> list[tuple[Record, float]]:
        """(row, score) of active rows of `tenant` matching any token, best first.
        Tokens are quoted here, so no user text is ever parsed as FTS5 syntax. On a big catalog
        the commonest tokens may be skipped (`_selective`)."""
        with self.lock:  # one connection: a reader thread's lookups wait for this, as for a commit
            return self._search(tenant, tokens, kind, limit)

    def _search(self, tenant: str, tokens: list[str], kind: str | None, limit: int) -> list[tuple[Record, float]]:
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
                f"SELECT {_R_COLUMNS}, f.s FROM (SELECT rowid AS id, bm25(rows_fts, 0.0, 1.0) AS s "
                f"FROM rows_fts WHERE rows_fts MATCH ?{where} ORDER BY s LIMIT ?) f "
                f"JOIN rows r ON r.id = f.id WHERE {filt} ORDER BY f.s LIMIT ?",
                [match, *args, inner, *fargs, limit]).fetchall()
            if len(hits) < limit and self.conn.execute(
                    f"SELECT count(*) FROM (SELECT rowid FROM rows_fts WHERE rows_fts MATCH ?{where} LIMIT ?)",
                    [match, *args, inner + 1]).fetchone()[0] > inner:
                hits = self.conn.execute(
                    f"SELECT {_R_COLUMNS}, bm25(rows_fts, 0.0, 1.0) AS s FROM rows_fts "
                    f"JOIN rows r ON r.id = rows_fts.rowid WHERE rows_fts MATCH ?{where.replace('rowid', 'rows_fts.rowid')} "
                    f"AND {filt} ORDER BY s LIMIT ?", [match, *args, *fargs, limit]).fetchall()
        except sqlite3.OperationalError as e:
            if "fts5" not in str(e):
                raise
            # Quoting should make this unreachable; a query is still never an error.
            log.warning("FTS5 rejected query %r: %s", match, e)
            return []
        # bm25() is lower-is-better; the store's contract is higher-is-better.
        return [(_record(v[:-1]), -v[-1]) for v in hits]

    def _selective(self, tokens: list[str]) -> tuple[list[str], int | None]:
        """The tokens worth scoring, and a rowid floor (None: every row). BM25 scores every row
        holding any query token, so a query's cost is the rows its tokens are found in, and a
        common token costs the most while it weighs the least (idf ln((N - n + 0.5) / (n + 0.5)):
        3.5 at 3% of the rows, against 9.2 at 0.01%). On a catalog of more than
        SELECTIVE_MIN_ROWS rows (smaller ones are searched exactly as asked), each token's rows
        are estimated from the newest SAMPLE_ROWS rows; tokens are kept rarest first while
        their rows add up to at most MAX_POSTINGS, the rarest always. If even the rarest is
        found in more rows, only the newest rows expected to hold MAX_POSTINGS of it are scored
        (recent memory first). So a query never costs more than about MAX_POSTINGS rows."""
        if self._window is None:  # (newest id, rows sampled, big enough), until the next write
            top = self.conn.execute("SELECT max(id) FROM rows").fetchone()[0] or 0
            big = top > SELECTIVE_MIN_ROWS and bool(self.conn.execute(
                "SELECT 1 FROM rows LIMIT 1 OFFSET ?", (SELECTIVE_MIN_ROWS,)).fetchall())
            sampled = self.conn.execute("SELECT count(*) FROM rows WHERE id > ?",
                                        (top - SAMPLE_ROWS,)).fetchone()[0] if big else 0
            self._window, self._shares = (top, max(sampled, 1), big), {}
        top, sampled, big = self._window
        if not big:
            return tokens, None
        share = {}
        for t in tokens:
            if t not in self._shares:
                quoted = 'text : "' + t.replace('"', '""') + '"'
                try:
                    n = self.conn.execute("SELECT count(*) FROM rows_fts WHERE rows_fts MATCH ? AND rowid > ?",
                                          (quoted, top - SAMPLE_ROWS)).fetchone()[0]
                except sqlite3.OperationalError:
                    n = 0  # searched (and reported) as it is
                self._shares[t] = n / sampled
            share[t] = self._shares[t]
        ranked = sorted(tokens, key=lambda t: share[t])
        kept, rows = [ranked[0]], share[ranked[0]] * top
        for t in ranked[1:]:
            if rows + share[t] * top > MAX_POSTINGS:
                break
            kept.append(t)
            rows += share[t] * top
        if rows <= MAX_POSTINGS:
            return [t for t in tokens if t in kept], None  # the query's order
        reach = int(MAX_POSTINGS / max(share[ranked[0]], 1e-9))
        return kept, (top - reach if reach < top else None)

    def rows(self) -> list[Record]:
        """Every row as the catalog holds it (CRC-checked)."""
        return list(self.select())

    # ---- the rows as a host state (grm.store.state.CatalogState) ------------------------------

    def get(self, tenant: str, kind: str, key: str) -> Record | None:
        with self.lock:
            v = self.conn.execute(_SELECT + " WHERE tenant = ? AND kind = ? AND key = ?",
                                  (tenant, kind, key)).fetchone()
        return _record(v) if v is not None else None

    def children(self, tenant: str, kind: str, parent: str) -> list[Record]:
        with self.lock:
            vs = self.conn.execute(_SELECT + " WHERE tenant = ? AND kind = ? AND parent = ?",
                                   (tenant, kind, parent)).fetchall()
        return [_record(v) for v in vs]

    def select(self, tenant: str | None = None, kind: str | None = None) -> Iterator[Record]:
        """Rows in id order (write order of new rows). All of them are fetched in batches (a
        million rows never sit in memory at once); a tenant's or a kind's through the index."""
        if tenant is not None or kind is not None:
            where = " AND ".join(f"{c} = ?" for c, v in (("tenant", tenant), ("kind", kind)) if v is not None)
            with self.lock:
                vs = self.conn.execute(f"{_SELECT} WHERE {where} ORDER BY id",
                                       [v for v in (tenant, kind) if v is not None]).fetchall()
            yield from (_record(v) for v in vs)
            return
        last = -1
        while True:
            with self.lock:
                vs = self.conn.execute(f"SELECT id, {_COLUMNS}, crc FROM rows WHERE id > ? ORDER BY id LIMIT {_BATCH}",
                                       (last,)).fetchall()
            if not vs:
                return
            last = vs[-1][0]
            for v in vs:
                yield _record(v[1:])

    def tally(self) -> tuple[list[tuple], list[tuple]]:
        """[(tenant, kind, state, rows)], [(tenant, kind, payload bytes, each payload once)]."""
        with self.lock:
            counts = self.conn.execute("SELECT tenant, kind, state, count(*) FROM rows "
                                       "GROUP BY tenant, kind, state").fetchall()
            sizes = self.conn.execute(
                "SELECT tenant, kind, sum(size) FROM (SELECT tenant, kind, max(payload_size) AS size FROM rows "
                "WHERE payload IS NOT NULL GROUP BY tenant, kind, payload) GROUP BY tenant, kind").fetchall()
        return counts, sizes

    def since(self, tenant: str, kind: str, lsn: int) -> tuple[list[Record], int]:
        """(rows of (tenant, kind) written after `lsn`, how many rows (tenant, kind) holds), read
        together; both through the (tenant, kind, lsn) index."""
        with self.lock:
            vs = self.conn.execute(_SELECT + " WHERE tenant = ? AND kind = ? AND lsn > ? ORDER BY lsn",
                                   (tenant, kind, lsn)).fetchall()
            n = self.conn.execute("SELECT count(*) FROM rows WHERE tenant = ? AND kind = ?",
                                  (tenant, kind)).fetchone()[0]
        return [_record(v) for v in vs], n

    def keys(self, tenant: str, kind: str) -> set[str]:
        with self.lock:
            return {k for (k,) in self.conn.execute("SELECT key FROM rows WHERE tenant = ? AND kind = ?",
                                                   (tenant, kind))}

    def count(self) -> int:
        with self.lock:
            return self.conn.execute("SELECT count(*) FROM rows").fetchone()[0]

    def mode(self) -> str | None:
        row = self.conn.execute("SELECT v FROM catalog_meta WHERE k = 'mode'").fetchone()
        return json.loads(row[0]) if row else None

    def usable_lsn(self) -> int | None:
        """The LSN this stored catalog reflects, or None if it is missing, unreadable or of
        another schema (then it can only be rebuilt)."""
        if self.path is None or not self.fs.exists(self.path):
            return None
        try:
            meta = dict(self.conn.execute("SELECT k, v FROM catalog_meta").fetchall())
            if meta.get("schema") != SCHEMA_VERSION or "lsn" not in meta or "mode" not in meta:
                return None
            json.loads(meta["mode"])
            return int(meta["lsn"])
        except (sqlite3.DatabaseError, ValueError):
            return None

    def begin(self) -> None:
        self._window = None
        with self.lock:
            if not self.conn.in_transaction:
                self.conn.execute("BEGIN")

    def upsert(self, rec: Record) -> int:
        """Inside `begin`: write one row; returns the change in the row count (0 or 1)."""
        with self.lock:
            new = self.conn.execute(_EXISTS, (rec.tenant, rec.kind, rec.key)).fetchone() is None
            self.conn.execute(_UPSERT, _row(rec))
        return int(new)

    def remove(self, tenant: str, kind: str, key: str) -> int:
        """Inside `begin`: delete one row; returns the change in the row count (0 or -1)."""
        with self.lock:
            return -self.conn.execute(_DELETE, (tenant, kind, key)).rowcount

    def finish(self, lsn: int, mode: str | None) -> None:
        """Commit what `begin` started, at `lsn`."""
        self._window = None
        with self.lock:
            self.begin()
            self._set_meta(lsn, mode)
            self.conn.execute("COMMIT")

    def abort(self) -> None:
        with self.lock:
            if self._conn is not None and self._conn.in_transaction:
                self._conn.execute("ROLLBACK")

    def reset(self) -> None:
        """Delete the stored catalog; an empty one (no LSN) takes its place."""
        self._window = None
        self.close()
        if self.path is not None:
            for suffix in ("", "-wal", "-shm", "-journal"):
                if self.fs.exists(self.path + suffix):
                    self.fs.remove(self.path + suffix)

    def _set_meta(self, lsn: int, mode: object) -> None:
        pairs = [("schema", SCHEMA_VERSION), ("lsn", str(lsn))]
        if mode is not KEEP_MODE:
            pairs.append(("mode", json.dumps(mode)))
        self.conn.executemany("INSERT OR REPLACE INTO catalog_meta(k, v) VALUES (?, ?)", pairs)

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
