"""Backend ``fts5``: SQLite full-text search (FTS5) in a real database, through sqlite-utils.

Layout (the one sqlite-utils' ``enable_fts(..., create_triggers=True)`` makes, so
``sqlite-utils search`` and ``Table.detect_fts()`` work on the file as on any other):

``tools``          one row per tool: ``tool_name`` (unique), ``hash`` (``Tool.content_hash()``),
                   ``mcp`` (for pool order), ``definition`` (the tool as JSON) and one text
                   column per field of :data:`toolsearch.tokenize.FIELDS`
``tools_fts``      an external-content FTS5 index over those five columns, kept in step with
                   ``tools`` by the triggers ``tools_ai``, ``tools_ad`` and ``tools_au``
``toolsearch_meta`` the tokeniser version the text columns were written with

The text columns hold :mod:`toolsearch.tokenize` tokens joined by single spaces and FTS5 reads
them with its ``ascii`` tokenizer, which then only splits on those spaces (a token is letters,
digits and marks), so the database and the ``bm25`` backend see the same tokens. The ranking
is SQLite's own ``bm25()`` with the field weights as column weights (a weight multiplies the
column's term frequency, not the document length). SQLite's ``bm25()`` uses the Robertson idf
floored at 1e-6, so a term in more than half the catalogue contributes almost nothing, and it
returns *negative* numbers, more negative being better: hits carry ``-bm25()``, which is above
zero for every matching tool, best first, ties in pool order (``mcp``, then ``tool_name``;
SQLite's binary collation of UTF-8 is code-point order, like Python's).

Queries never reach FTS5's query language: the query's tokens are each written as a quoted
string (quotes doubled) and joined with ``OR``, so no text — ``"``, ``*``, ``NEAR``, ``AND``,
``(``, ``col:``, ``^`` — can be a syntax error or an operator.

Updates are incremental and keyed by the content hash: ``index``, ``upsert`` and ``remove``
compare hashes and touch only the rows that changed, each call in one ``BEGIN IMMEDIATE``
transaction, so a reader sees the index before or after a change, never half of it, and a writer
killed mid-update leaves the last committed index behind. File databases use WAL mode (readers
do not block the writer or each other) and a busy timeout (a second writer waits instead of
failing); several processes can search one file while one updates it. ``index`` makes the
file hold exactly the tools it is given, so one database file serves one catalogue: the file
records the catalogue's name (option ``catalog``) and refuses to be opened for another, and a
backend whose catalogue another writer has replaced fails its searches instead of answering
from rows it did not write. A full-text index that lost rows is rebuilt when the file is opened
(docs/security.md, "Files and catalogues").

Speed: every search first reads, in the same read transaction, the row count and each query
token's document frequency (from an ``fts5vocab`` table). Tokens absent from the index are
dropped, and so are tokens in half the rows or more when another token is left (SQLite gives
them idf 1e-6; they would only make nearly every row match). ``bm25()`` then costs about a
microsecond per matching row, so a query whose common words match thousands of rows is split
MaxScore-style (see :meth:`FTS5Backend._top_rows`) to score only rows that match a rarer word,
with a bound that proves the top ``k`` unchanged.
"""

from __future__ import annotations

import json
import logging
import math
import os
import sqlite3
import uuid
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from toolsearch.backend import BaseBackend, Hit
from toolsearch.errors import BackendError, ConfigError
from toolsearch.query import ParsedQuery
from toolsearch.tokenize import (
    FIELDS,
    TOKENIZER_VERSION,
    SchemaCache,
    check_field_weights,
    query_tokens,
    tool_fields,
)
from toolsearch.tool import Tool

if TYPE_CHECKING:
    from sqlite_utils import Database

__all__ = ["FTS5Backend", "match_expression"]

logger = logging.getLogger(__name__)


def _database_class() -> type[Database]:
    """``sqlite_utils.Database``, imported without pandas when pandas is not loaded yet:
    sqlite-utils imports it (about a second) only to map pandas column types on insert, which
    this backend never does (docs/speed.md)."""
    import sys

    if "sqlite_utils" in sys.modules or "pandas" in sys.modules:
        from sqlite_utils import Database

        return Database
    sys.modules["pandas"] = None  # type: ignore[assignment]  # makes "import pandas" fail fast
    try:
        from sqlite_utils import Database

        return Database
    finally:
        del sys.modules["pandas"]


TABLE = "tools"
FTS_TABLE = "tools_fts"
VOCAB_TABLE = "tools_fts_vocab"
META_TABLE = "toolsearch_meta"
#: The tables FTS5 keeps the index in; without one of them the index cannot even be dropped.
_FTS_STORAGE = tuple(f"{FTS_TABLE}_{part}" for part in ("data", "idx", "docsize", "config"))

# Names per statement in IN (...) look-ups; well under SQLite's variable limit.
_CHUNK = 500
_SYNCHRONOUS = ("normal", "full")

_COLUMNS = ", ".join(FIELDS)
_NEW = ", ".join(f"new.{field}" for field in FIELDS)
_OLD = ", ".join(f"old.{field}" for field in FIELDS)

_SCHEMA = [
    f"""CREATE TABLE IF NOT EXISTS {META_TABLE} (
        key TEXT PRIMARY KEY,
        value TEXT NOT NULL
    )""",
    f"""CREATE TABLE IF NOT EXISTS {TABLE} (
        id INTEGER PRIMARY KEY,
        tool_name TEXT NOT NULL UNIQUE,
        hash TEXT NOT NULL,
        mcp INTEGER NOT NULL,
        definition TEXT NOT NULL,
        {", ".join(f"{field} TEXT NOT NULL" for field in FIELDS)}
    )""",
    f"""CREATE VIRTUAL TABLE IF NOT EXISTS {FTS_TABLE} USING FTS5 (
        {_COLUMNS},
        tokenize='ascii',
        content="{TABLE}",
        content_rowid=id
    )""",
    f"""CREATE VIRTUAL TABLE IF NOT EXISTS {VOCAB_TABLE} USING fts5vocab({FTS_TABLE}, 'row')""",
    f"""CREATE TRIGGER IF NOT EXISTS {TABLE}_ai AFTER INSERT ON {TABLE} BEGIN
        INSERT INTO {FTS_TABLE} (rowid, {_COLUMNS}) VALUES (new.id, {_NEW});
    END""",
    f"""CREATE TRIGGER IF NOT EXISTS {TABLE}_ad AFTER DELETE ON {TABLE} BEGIN
        INSERT INTO {FTS_TABLE} ({FTS_TABLE}, rowid, {_COLUMNS}) VALUES ('delete', old.id, {_OLD});
    END""",
    f"""CREATE TRIGGER IF NOT EXISTS {TABLE}_au AFTER UPDATE ON {TABLE} BEGIN
        INSERT INTO {FTS_TABLE} ({FTS_TABLE}, rowid, {_COLUMNS}) VALUES ('delete', old.id, {_OLD});
        INSERT INTO {FTS_TABLE} (rowid, {_COLUMNS}) VALUES (new.id, {_NEW});
    END""",
]

_UPSERT = f"""
    INSERT INTO {TABLE} (tool_name, hash, mcp, definition, {_COLUMNS})
    VALUES (?, ?, ?, ?, {", ".join("?" for _ in FIELDS)})
    ON CONFLICT (tool_name) DO UPDATE SET
        hash = excluded.hash, mcp = excluded.mcp, definition = excluded.definition,
        {", ".join(f"{field} = excluded.{field}" for field in FIELDS)}
"""

_RANK = f"-bm25({FTS_TABLE}, {', '.join('?' for _ in FIELDS)})"
# Ranked by score alone, and only the rows kept are joined to ``tools`` for their pool
# position: joining every matching row would cost more than the ranking itself.
_SEARCH = f"""
    SELECT r.score, t.mcp, t.tool_name FROM (
        SELECT rowid, {_RANK} AS score FROM {FTS_TABLE} WHERE {FTS_TABLE} MATCH ?
        ORDER BY score DESC LIMIT ?
    ) AS r JOIN {TABLE} AS t ON t.id = r.rowid
"""
_SEARCH_AT_LEAST = f"""
    SELECT r.score, t.mcp, t.tool_name FROM (
        SELECT rowid, {_RANK} AS score FROM {FTS_TABLE} WHERE {FTS_TABLE} MATCH ?
    ) AS r JOIN {TABLE} AS t ON t.id = r.rowid WHERE r.score >= ?
"""
# Rows fetched beyond k, so that a tie on the k-th score rarely needs a second query.
_TIE_SLACK = 64
# The MaxScore split (see FTS5Backend._top_rows): tokens in more than 1/_COMMON_SHARE of the
# rows are common; the split is worth its extra statements once they match this many rows.
_SPLIT = True
_COMMON_SHARE = 16
_PRUNE_MIN_HITS = 1000
# SQLite's bm25() constant k1 (fts5_aux.c).
_K1 = 1.2


def _fts5_idf(rows: int, hits: int) -> float:
    """The idf SQLite's ``bm25()`` gives a phrase found in ``hits`` of ``rows`` rows."""
    idf = math.log((rows - hits + 0.5) / (hits + 0.5))
    return idf if idf > 0 else 1e-6


def match_expression(tokens: Iterable[str]) -> str:
    """An FTS5 query matching any of ``tokens``: each a quoted string, joined with ``OR``.

    A quoted string is always a plain phrase to FTS5, whatever it contains (a ``"`` inside is
    doubled), so the result is never a syntax error. NUL characters (which would end the
    string early) and lone surrogates (which cannot be encoded) are removed; tokens left empty
    are skipped, and no tokens give ``""``.
    """
    phrases = []
    for token in tokens:
        clean = token.replace("\x00", "")
        if not clean.isascii():
            clean = clean.encode("utf-8", "ignore").decode("utf-8")
        if clean:
            phrases.append('"' + clean.replace('"', '""') + '"')
    return " OR ".join(phrases)


_Row = tuple[float, int, str]  # (score, mcp, tool name): a ranked row with its pool key


def _varint(data: bytes) -> int:
    """The SQLite varint at the start of ``data`` (7 bits a byte, big-endian, 9 bytes max)."""
    value = 0
    for i, byte in enumerate(data[:9]):
        if i == 8:
            return (value << 8) | byte
        value = (value << 7) | (byte & 0x7F)
        if byte < 0x80:
            return value
    return value


def _chunks(items: Sequence[str]) -> Iterator[Sequence[str]]:
    for start in range(0, len(items), _CHUNK):
        yield items[start : start + _CHUNK]


class FTS5Backend(BaseBackend):
    """SQLite FTS5 with per-field column weights; persistent, incremental, multi-process.

    Options (keyword only): ``path`` (a database file; default an in-memory database),
    ``field_weights`` (column weights per field, merged over the defaults),
    ``busy_timeout`` (seconds a writer waits for another, default 5), ``synchronous``
    (``"normal"``, the default — safe against crashes in WAL mode — or ``"full"``, which also
    survives power loss at the cost of an fsync per commit), ``catalog`` (the name of the
    catalogue the file holds, default ``"default"``: a file opened for another catalogue is
    refused rather than overwritten), ``read_only`` (default: detected — a file or folder that
    cannot be written, such as a read-only mount, is opened read-only and can be searched).

    A database with tables but no toolsearch metadata is refused (it is never given toolsearch
    tables or switched to WAL); an index written with a newer tokenizer version is an error,
    not re-tokenised; a corrupt stored definition is a :class:`BackendError` naming the tool.
    """

    name: ClassVar[str] = "fts5"
    incremental: ClassVar[bool] = True
    persistent: ClassVar[bool] = True
    extra: ClassVar[str | None] = "fts5"
    requires: ClassVar[tuple[str, ...]] = ("sqlite_utils",)

    def __init__(
        self,
        *,
        path: str | Path | None = None,
        field_weights: Mapping[str, float] | None = None,
        busy_timeout: float = 5.0,
        synchronous: str = "normal",
        catalog: str = "default",
        read_only: bool | None = None,
    ) -> None:
        super().__init__()
        if not isinstance(catalog, str) or not catalog.strip():
            raise ConfigError(f"fts5 option catalog must be a non-empty name, got {catalog!r}")
        if read_only is not None and not isinstance(read_only, bool):
            raise ConfigError(f"fts5 option read_only must be true or false, got {read_only!r}")
        self.catalog = catalog
        self.read_only = read_only
        if path is not None and not isinstance(path, str | Path):
            raise ConfigError(f"fts5 option path must be a file path, got {path!r}")
        if isinstance(path, str) and path in ("", ":memory:"):
            path = None
        if (
            isinstance(busy_timeout, bool)
            or not isinstance(busy_timeout, int | float)
            or not 0 <= busy_timeout < float("inf")
        ):
            raise ConfigError(
                f"fts5 option busy_timeout must be a number of seconds >= 0, got {busy_timeout!r}"
            )
        if synchronous not in _SYNCHRONOUS:
            raise ConfigError(
                f"fts5 option synchronous must be one of {', '.join(_SYNCHRONOUS)}, "
                f"got {synchronous!r}"
            )
        self.path = Path(path) if path is not None else None
        self.field_weights = check_field_weights(field_weights, integer=False)
        self.busy_timeout = float(busy_timeout)
        self.synchronous = synchronous
        self._weights = tuple(float(self.field_weights[field]) for field in FIELDS)
        #: What this backend last made the file hold (name → content hash) and the
        #: generation it left: None until it indexes (see :meth:`_check_owner`).
        self._expected: dict[str, str] | None = None
        self._generation: str | None = None
        self.db = self._open()

    # ------------------------------------------------------------------ database
    def _open(self) -> Database:
        Database = _database_class()

        where = str(self.path) if self.path is not None else ":memory:"
        try:
            conn = self._connect(where)
            db = Database(conn)
            db.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout * 1000)}")
            self.db = db
            self._refuse_foreign()
            if self.read_only:
                self._check_readable()
                return db
            if self.path is not None:
                db.enable_wal()
                db.execute(f"PRAGMA synchronous = {self.synchronous.upper()}")
            with self._transaction():
                before = self._tables()
                for statement in _SCHEMA:
                    db.execute(statement)
                self._claim_catalog()
                self._check_index(before)
                stored = self._meta("tokenizer_version")
                if stored != str(TOKENIZER_VERSION):
                    self._check_tokenizer(stored, allow_older=True)
                    self._retokenise()
        except (sqlite3.Error, OSError) as exc:
            raise BackendError(f"fts5: cannot open database {where}: {exc}") from exc
        return db

    def _connect(self, where: str) -> sqlite3.Connection:
        """A connection; a read-only file or folder (a read-only mount) is opened read-only
        and immutable, so it can still be searched."""
        if self.path is not None and self.read_only is None:
            folder_writable = (
                os.access(self.path.parent, os.W_OK) if self.path.parent.exists() else True
            )
            file_writable = not self.path.exists() or os.access(self.path, os.W_OK)
            self.read_only = not (folder_writable and file_writable)
        if self.read_only:
            if self.path is None or not self.path.is_file():
                raise BackendError(f"fts5: read-only database {where} does not exist")
            uri = f"{self.path.resolve().as_uri()}?mode=ro&immutable=1"
            return sqlite3.connect(
                uri,
                uri=True,
                timeout=self.busy_timeout,
                isolation_level=None,
                check_same_thread=False,
            )
        self.read_only = False
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        return sqlite3.connect(
            where, timeout=self.busy_timeout, isolation_level=None, check_same_thread=False
        )

    def _tables(self) -> set[str]:
        rows = self.db.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
        return {name for (name,) in rows}

    def _refuse_foreign(self) -> None:
        """A database with tables but no toolsearch metadata belongs to something else: it is
        not given toolsearch tables or switched to WAL."""
        tables = self._tables()
        if tables and META_TABLE not in tables:
            shown = ", ".join(sorted(tables)[:5])
            raise BackendError(
                f"fts5: {self._where()} is not a toolsearch index (it has the tables {shown}); "
                "use a new file for the index"
            )

    def _meta(self, key: str) -> str | None:
        row = self.db.execute(f"SELECT value FROM {META_TABLE} WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def _check_tokenizer(self, stored: str | None, *, allow_older: bool) -> None:
        """An index written by a newer toolsearch (or with a version this one cannot read) is
        an error, never silently re-tokenised; an older one is upgraded when writable."""
        if stored is None:
            return
        if not stored.isdigit():
            raise BackendError(
                f"fts5: {self._where()} has the unknown tokenizer_version {stored!r}"
            )
        if int(stored) > TOKENIZER_VERSION:
            raise BackendError(
                f"fts5: {self._where()} was written with tokenizer version {stored}, newer than "
                f"this toolsearch's {TOKENIZER_VERSION}: upgrade toolsearch or use a new file"
            )
        if not allow_older and int(stored) < TOKENIZER_VERSION:
            raise BackendError(
                f"fts5: read-only {self._where()} was written with tokenizer version {stored}; "
                f"this toolsearch needs {TOKENIZER_VERSION} (re-index it where it is writable)"
            )

    def _check_readable(self) -> None:
        tables = self._tables()
        missing = {TABLE, META_TABLE} - tables
        if missing:
            raise BackendError(
                f"fts5: read-only {self._where()} has no index yet "
                f"(missing {', '.join(sorted(missing))})"
            )
        stored = self._meta("tokenizer_version")
        self._check_tokenizer(stored, allow_older=False)
        self._check_catalog(self._meta("catalog"))
        self._check_index(tables)

    def _check_index(self, tables: set[str]) -> None:
        """A full-text index that no longer matches the stored tools (dropped, emptied, or
        written without the triggers) would answer ``[]`` without an error: when its row count
        differs from the tools table's it is rebuilt from the stored rows, or, read-only, an
        error. An index whose own storage is gone cannot be rebuilt: an error too."""
        lost = [name for name in _FTS_STORAGE if name not in tables]
        if FTS_TABLE in tables and lost:
            raise BackendError(
                f"fts5: {self._where()}: the full-text index is damaged: its table {lost[0]} is "
                "missing; delete the file and index the catalogue again"
            )
        stored: int = self.db.execute(f"SELECT count(*) FROM {TABLE}").fetchone()[0]
        indexed = self._indexed_rows() if FTS_TABLE in tables else 0
        if indexed == stored:
            return
        if self.read_only:
            raise BackendError(
                f"fts5: read-only {self._where()}: the full-text index is damaged ({indexed} of "
                f"{stored} tools indexed); open it where it is writable to rebuild it"
            )
        logger.warning(
            "fts5: %s: the full-text index held %d of %d tools; rebuilt it from the stored tools",
            self._where(),
            indexed,
            stored,
        )
        self.db.execute(f"INSERT INTO {FTS_TABLE} ({FTS_TABLE}) VALUES ('rebuild')")

    def _indexed_rows(self) -> int:
        """The number of rows in the full-text index: the first varint of FTS5's averages
        record (the count ``bm25()`` uses), 0 when it has none."""
        row = self.db.execute(f"SELECT block FROM {FTS_TABLE}_data WHERE id = 1").fetchone()
        return _varint(bytes(row[0])) if row and row[0] else 0

    def _claim_catalog(self) -> None:
        """Record which catalogue this file holds; opening it for another one is refused, so
        two catalogues cannot overwrite each other's rows."""
        stored = self._meta("catalog")
        self._check_catalog(stored)
        if stored is None:
            self.db.execute(
                f"INSERT INTO {META_TABLE} (key, value) VALUES ('catalog', ?)", (self.catalog,)
            )

    def _check_catalog(self, stored: str | None) -> None:
        if stored is not None and stored != self.catalog:
            raise BackendError(
                f"fts5: {self._where()} holds the catalogue {stored!r}, not {self.catalog!r}: "
                "give each catalogue its own file (or open it with catalog=" + repr(stored) + ")"
            )

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        """One write transaction, taken up front (``BEGIN IMMEDIATE``) so reading the stored
        hashes and writing the changes cannot interleave with another writer."""
        conn = self.db.conn
        conn.execute("BEGIN" if self.read_only else "BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    def _retokenise(self) -> None:
        """Rewrite every row's text columns with this tokeniser (inside a transaction)."""
        rows = self.db.execute(f"SELECT tool_name, definition FROM {TABLE}").fetchall()
        tools = [self._stored_tool(name, definition) for name, definition in rows]
        if tools:
            self._write(self._rows(tools), [])
        self.db.execute(
            f"INSERT OR REPLACE INTO {META_TABLE} (key, value) VALUES ('tokenizer_version', ?)",
            (str(TOKENIZER_VERSION),),
        )

    def close(self) -> None:
        """Close the database connection (the file, if any, keeps the index)."""
        self.db.close()

    def __enter__(self) -> FTS5Backend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _where(self) -> str:
        return str(self.path) if self.path is not None else "in-memory database"

    # ------------------------------------------------------------------ writing
    def _rows(self, tools: Sequence[Tool]) -> list[tuple[Any, ...]]:
        cache: SchemaCache = {}
        rows = []
        for tool in tools:
            columns = tool_fields(tool, schema_cache=cache).column_text()
            definition = json.dumps(tool.to_dict(), ensure_ascii=False, default=str)
            rows.append(
                (
                    tool.name,
                    tool.content_hash(),
                    int(tool.mcp),
                    definition,
                    *(columns[field] for field in FIELDS),
                )
            )
        return rows

    def _stored_hashes(self, names: Sequence[str] | None) -> dict[str, str]:
        if names is None:
            return dict(self.db.execute(f"SELECT tool_name, hash FROM {TABLE}").fetchall())
        found: dict[str, str] = {}
        for chunk in _chunks(names):
            marks = ", ".join("?" for _ in chunk)
            sql = f"SELECT tool_name, hash FROM {TABLE} WHERE tool_name IN ({marks})"
            found.update(self.db.execute(sql, list(chunk)).fetchall())
        return found

    def _write(self, rows: Sequence[tuple[Any, ...]], removals: Sequence[str]) -> None:
        """Apply row upserts and removals (called inside a transaction)."""
        if self.read_only and (rows or removals):
            raise BackendError(
                f"fts5: {self._where()} is read-only and does not hold this catalogue as it is "
                f"({len(rows)} tools to write, {len(removals)} to remove)"
            )
        conn = self.db.conn
        for chunk in _chunks(removals):
            marks = ", ".join("?" for _ in chunk)
            conn.execute(f"DELETE FROM {TABLE} WHERE tool_name IN ({marks})", list(chunk))
        if rows:
            conn.executemany(_UPSERT, rows)
        if rows or removals:  # every change gets a new generation (see _check_owner)
            conn.execute(
                f"INSERT OR REPLACE INTO {META_TABLE} (key, value) VALUES ('generation', ?)",
                (uuid.uuid4().hex,),
            )

    def _apply(self, tools: Sequence[Tool], *, replace_all: bool) -> None:
        """Write the tools whose hash differs from the stored one; with ``replace_all`` also
        drop every stored tool not among ``tools``. One transaction."""
        unique = list({tool.name: tool for tool in tools}.values())
        hashes = {tool.name: tool.content_hash() for tool in unique}
        try:
            with self._transaction():
                if not replace_all:  # index() makes the file this catalogue's again
                    self._check_owner()
                stored = self._stored_hashes(None if replace_all else list(hashes))
                changed = [tool for tool in unique if stored.get(tool.name) != hashes[tool.name]]
                removals = [name for name in stored if name not in hashes] if replace_all else []
                self._write(self._rows(changed), removals)
                generation = self._meta("generation")
        except sqlite3.Error as exc:
            raise BackendError(f"fts5: cannot update {self._where()}: {exc}") from exc
        if replace_all:
            self._expected = hashes
        elif self._expected is not None:
            self._expected.update(hashes)
        self._generation = generation

    def index(self, tools: Sequence[Tool]) -> None:
        """Make the index hold exactly ``tools``: rows whose content hash is unchanged stay
        as they are (re-opening a file with the same catalogue writes nothing)."""
        self._apply(tools, replace_all=True)

    def upsert(self, tools: Sequence[Tool]) -> None:
        """Add ``tools`` or replace stored tools of the same name whose content changed."""
        if tools:
            self._apply(tools, replace_all=False)

    def remove(self, names: Iterable[str]) -> None:
        """Drop the named tools; unknown names are ignored."""
        drop = list(dict.fromkeys(names))
        if drop:
            try:
                with self._transaction():
                    self._check_owner()
                    self._write([], drop)
                    generation = self._meta("generation")
            except sqlite3.Error as exc:
                raise BackendError(f"fts5: cannot update {self._where()}: {exc}") from exc
            if self._expected is not None:
                for name in drop:
                    self._expected.pop(name, None)
            self._generation = generation

    def optimize(self) -> None:
        """Merge the FTS5 index segments into one (worth it after a large initial index)."""
        try:
            with self._transaction():
                self.db.execute(f"INSERT INTO {FTS_TABLE} ({FTS_TABLE}) VALUES ('optimize')")
        except sqlite3.Error as exc:
            raise BackendError(f"fts5: cannot optimize {self._where()}: {exc}") from exc

    # ------------------------------------------------------------------ reading
    @property
    def tools(self) -> Mapping[str, Tool]:
        """The stored tools by name, read back from the database (pool order)."""
        rows = self.db.execute(
            f"SELECT tool_name, definition FROM {TABLE} ORDER BY mcp, tool_name"
        ).fetchall()
        tools = [self._stored_tool(name, definition) for name, definition in rows]
        return {tool.name: tool for tool in tools}

    def _stored_tool(self, name: str, definition: str) -> Tool:
        """A stored definition read back; a corrupt one is a :class:`BackendError` naming
        the row."""
        from toolsearch.catalog import decode_json, tool_from_dict
        from toolsearch.errors import CatalogError

        try:
            return tool_from_dict(decode_json(definition))
        except CatalogError as exc:
            raise BackendError(
                f"fts5: {self._where()}: the stored definition of {name!r} is corrupt ({exc}); "
                "re-index into a new file"
            ) from None

    def __len__(self) -> int:
        count: int = self.db.execute(f"SELECT count(*) FROM {TABLE}").fetchone()[0]
        return count

    @contextmanager
    def _snapshot(self) -> Iterator[None]:
        """A read transaction: every statement inside sees the same committed index."""
        conn = self.db.conn
        conn.execute("BEGIN")
        try:
            yield
        finally:
            if conn.in_transaction:
                conn.execute("COMMIT")

    def _check_owner(self) -> None:
        """Fail, rather than answer from (or update) rows this backend did not write, when
        another writer has replaced the catalogue it indexed (inside a transaction).

        Each change to the file stores a new ``generation``. While it is the one this backend
        left, nothing else has written; when it differs, the stored content hashes are
        compared with what this backend indexed — equal (another writer wrote the same
        catalogue) is fine, anything else is an error. A backend that never indexed (a pure
        reader) searches whatever the file holds."""
        if self._expected is None:
            return
        generation = self._meta("generation")
        if generation == self._generation:
            return
        stored = self._stored_hashes(None)
        if stored != self._expected:
            gone = sum(1 for name in self._expected if name not in stored)
            changed = sum(
                1 for name, h in self._expected.items() if stored.get(name) not in (None, h)
            )
            added = sum(1 for name in stored if name not in self._expected)
            raise BackendError(
                f"fts5: {self._where()} no longer holds this index's catalogue: another writer "
                f"changed it since ({gone} of its {len(self._expected)} tools gone, {changed} "
                f"changed, {added} others added). Two catalogues on one file overwrite each "
                "other: give each catalogue its own file, or its own catalog= name (a file "
                "opened for another name is refused); to follow another writer's updates, "
                "open the file again"
            )
        self._generation = generation

    def _statistics(self, tokens: Sequence[str]) -> tuple[int, dict[str, int]]:
        """The number of rows and the rows containing each distinct token (tokens absent from
        the index are left out), in one statement. The row count is the one ``bm25()`` uses:
        the first varint of FTS5's averages record."""
        distinct = list(dict.fromkeys(tokens))
        frequency: dict[str, int] = {}
        rows = 0
        for start in range(0, max(len(distinct), 1), _CHUNK):
            chunk = distinct[start : start + _CHUNK]
            marks = ", ".join("?" for _ in chunk) or "NULL"
            sql = (
                f"SELECT term, doc FROM {VOCAB_TABLE} WHERE term IN ({marks}) UNION ALL "
                f"SELECT NULL, block FROM {FTS_TABLE}_data WHERE id = 1"
            )
            for term, value in self.db.execute(sql, chunk):
                if term is None:
                    rows = _varint(bytes(value)) if value else 0
                else:
                    frequency[term] = value
        return rows, frequency

    def search(self, query: ParsedQuery, k: int) -> list[Hit]:
        """The best ``k`` tools by ``-bm25()``, best first, ties in pool order.

        Tokens absent from the index are dropped (they match nothing), and so are tokens in
        half the rows or more when any other token is left: SQLite floors their idf to 1e-6, so
        they add nothing but a match for nearly every row, each of which ``bm25()`` would score.
        """
        if k <= 0 or query.is_empty:
            return []
        tokens = query_tokens(query)
        if not tokens:
            return []
        try:
            with self._snapshot():
                self._check_owner()
                rows, frequency = self._statistics(tokens)
                known = [token for token in tokens if token in frequency]
                informative = [token for token in known if 2 * frequency[token] < rows]
                tokens = informative or known
                if not tokens:
                    return []
                scored = self._top_rows(tokens, frequency, rows, k)
        except sqlite3.Error as exc:
            raise BackendError(f"fts5: search failed on {self._where()}: {exc}") from exc
        scored.sort(key=lambda row: (-row[0], row[1], row[2]))
        return [Hit(name, float(score)) for score, _, name in scored[:k] if score > 0]

    def _top_rows(
        self, tokens: Sequence[str], frequency: Mapping[str, int], rows: int, k: int
    ) -> list[_Row]:
        """(score, mcp, name) of the best ``k`` rows for ``tokens`` and every row tied with the
        ``k``-th: exactly what ranking all matching rows gives, usually for far less.

        ``bm25()`` costs about a microsecond per matching row, and a word such as "get" or
        "list" matches a good part of any catalogue. So, MaxScore-style, the query's distinct
        tokens are ordered rarest first and split into a *rare* head and a *common* tail, and
        first only rows matching a rare token are scored (as ``rare AND common`` plus
        ``rare NOT common``: each phrase appears once in each, so every score is the whole
        query's). A row matching common tokens only scores below ``sum(idf(t)) * (k1 + 1)``
        over them, since BM25's term-frequency part stays below ``k1 + 1``; when the ``k``-th
        best candidate beats that bound no other row can reach the top ``k``; otherwise every
        matching row is scored. The head is the tokens in at most 1/16 of the rows (or the
        rarest token when all or none are); the split is not tried when the tail matches few
        rows or fewer than the head: there the extra statements cost more than they save.
        """
        counts = dict(Counter(tokens))
        # One fixed phrase order (rarest first, repeats together) on every path, so bm25()
        # adds the same numbers in the same order and scores agree to the last bit.
        order = sorted(counts, key=lambda t: (frequency[t], t))
        phrases = [match_expression([t] * counts[t]) for t in order]
        # The head: the tokens in at most 1/16 of the rows, or else the rarest token alone.
        cut = sum(1 for t in order if frequency[t] * _COMMON_SHARE <= rows)
        if not 0 < cut < len(order):
            cut = 1
        head_hits = sum(frequency[t] for t in order[:cut])
        tail_hits = sum(frequency[t] for t in order[cut:])
        if _SPLIT and cut < len(order) and tail_hits >= _PRUNE_MIN_HITS and head_hits <= tail_hits:
            common = order[cut:]
            rare_expr = " OR ".join(phrases[:cut])
            common_expr = " OR ".join(phrases[cut:])
            found = self._ranked_rows(f"({rare_expr}) AND ({common_expr})", k)
            found += self._ranked_rows(f"({rare_expr}) NOT ({common_expr})", k)
            found.sort(key=lambda row: -row[0])
            bound = sum(counts[t] * _fts5_idf(rows, frequency[t]) for t in common) * (_K1 + 1)
            if len(found) >= k and found[k - 1][0] > bound * (1 + 1e-9):
                return found
        return self._ranked_rows(" OR ".join(phrases), k)

    def _ranked_rows(self, expression: str, k: int) -> list[_Row]:
        """(score, mcp, name) of the best ``k`` rows matching ``expression`` and of every row
        tied with the ``k``-th, so pool order can break the tie."""
        limit = k + _TIE_SLACK
        found: list[_Row] = self.db.execute(_SEARCH, (*self._weights, expression, limit)).fetchall()
        if len(found) == limit:
            found.sort(key=lambda row: -row[0])
            if found[-1][0] == found[k - 1][0]:
                # The tie on the k-th score may go on past the fetched rows: fetch all of it.
                found = self.db.execute(
                    _SEARCH_AT_LEAST, (*self._weights, expression, found[k - 1][0])
                ).fetchall()
        return found

    def params(self) -> dict[str, object]:
        return {
            "field_weights": dict(self.field_weights),
            "path": str(self.path) if self.path is not None else None,
            "synchronous": self.synchronous,
            "tokenizer_version": TOKENIZER_VERSION,
        }
