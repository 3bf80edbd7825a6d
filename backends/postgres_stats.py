"""How often each lexeme occurs in the ``tools`` table, from PostgreSQL's own statistics.

``ANALYZE`` keeps, for a ``tsvector`` column, its most common lexemes and the fraction of rows
holding each (``pg_stats.most_common_elems`` / ``most_common_elem_freqs``: about ten times the
statistics target, 1,000 lexemes by default), the most common namespaces' shares of the rows,
and the table's row count (``pg_class.reltuples``).
That is all the full-text ranking needs to tell a frequent word from a selective one
(:func:`~backends.postgres_text.candidate_query`) without a table of its own to keep up to
date: the backend analyzes the table after every large write (``ANALYZE_MIN_ROWS``), and
autovacuum after a tenth of it changed. Lexeme frequencies are the whole table's, every
namespace of the schema together, applied to the namespace's estimated rows; all are a
sample's: they choose which rows are scored, never a score.

A lexeme outside the list is rarer than the rarest one in it; it is taken at half that
frequency, as PostgreSQL's own selectivity estimate of a ``tsquery`` takes it.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import psycopg

__all__ = ["LexemeStats", "StatsCache"]

#: Seconds the statistics are reused before being read again.
REFRESH_SECONDS = 60.0


@dataclass(frozen=True)
class LexemeStats:
    """The table's row count, its most common lexemes' row fractions and its namespaces'."""

    rows: float = 0.0
    frequencies: dict[str, float] = field(default_factory=dict)
    floor: float = 0.0
    namespaces: dict[str, float] = field(default_factory=dict)
    other_namespace: float = 0.0

    def frequency(self, lexeme: str) -> float:
        """The fraction of rows holding ``lexeme`` (estimated)."""
        return self.frequencies.get(lexeme, self.floor)

    def namespace_rows(self, namespace: str) -> float:
        """The rows of ``namespace`` (estimated as the planner does: its share among the most
        common values, else an equal share of what they leave; none before an ``ANALYZE``
        saw it)."""
        return self.rows * self.namespaces.get(namespace, self.other_namespace)

    @classmethod
    def read(cls, conn: psycopg.Connection[Any], schema: str) -> LexemeStats:
        """The statistics of ``schema.tools`` (none before its first ``ANALYZE``)."""
        row = conn.execute(
            "SELECT c.reltuples, s.most_common_elems::text::text[], s.most_common_elem_freqs "
            "FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "LEFT JOIN pg_stats s ON s.schemaname = n.nspname AND s.tablename = c.relname "
            "AND s.attname = 'document' WHERE n.nspname = %s AND c.relname = 'tools'",
            (schema,),
        ).fetchone()
        if row is None or row[0] is None or float(row[0]) <= 0:
            return cls()
        rows, elements, freqs = float(row[0]), row[1] or [], row[2] or []
        # the last three numbers are the smallest and largest frequency and the null share
        frequencies = {str(e): float(f) for e, f in zip(elements, freqs, strict=False)}
        smallest = min(frequencies.values(), default=0.0)
        shares, other = _namespace_shares(conn, schema, rows)
        return cls(rows, frequencies, smallest / 2, shares, other)


def _namespace_shares(
    conn: psycopg.Connection[Any], schema: str, rows: float
) -> tuple[dict[str, float], float]:
    """Each common namespace's share of the rows, and that of any other."""
    row = conn.execute(
        "SELECT most_common_vals::text::text[], most_common_freqs, n_distinct FROM pg_stats "
        "WHERE schemaname = %s AND tablename = 'tools' AND attname = 'namespace'",
        (schema,),
    ).fetchone()
    if row is None:
        return {}, 0.0
    values, freqs, distinct = row[0] or [], row[1] or [], float(row[2] or 0)
    shares = {str(v): float(f) for v, f in zip(values, freqs, strict=False)}
    if distinct < 0:  # a negative n_distinct is a fraction of the rows
        distinct = -distinct * rows
    others = distinct - len(shares)
    left = max(0.0, 1.0 - sum(shares.values()))
    return shares, (left / others if others >= 1 else 0.0)


class StatsCache:
    """:class:`LexemeStats` read at most every :data:`REFRESH_SECONDS` (safe from threads)."""

    def __init__(self, schema: str, refresh: float = REFRESH_SECONDS) -> None:
        self.schema = schema
        self.refresh = refresh
        self._lock = threading.Lock()
        self._stats: LexemeStats | None = None
        self._read_at = 0.0

    def get(self, conn: psycopg.Connection[Any]) -> LexemeStats:
        """The cached statistics, read on ``conn`` when older than the refresh interval."""
        now = time.monotonic()
        with self._lock:
            if self._stats is not None and now - self._read_at < self.refresh:
                return self._stats
        stats = LexemeStats.read(conn, self.schema)
        with self._lock:
            self._stats, self._read_at = stats, now
        return stats

    def forget(self) -> None:
        """Read them again at the next search (after this process changed many rows)."""
        with self._lock:
            self._stats = None
