"""The ``postgres`` backend's tables, created and migrated on first use in their own schema.

Layout (schema ``toolsearch`` unless the ``schema`` option says otherwise):

``meta``        ``key``/``value`` rows; ``schema_version`` is the number of the last migration
                applied (:data:`MIGRATIONS`)
``catalogues``  one row per namespace: the encoder that wrote its vectors and their size, a
                ``generation`` bumped by every change of any holder's holdings, and whether
                its HNSW index exists (its ``tokenizer_version`` is that of version 1 rows)
``tools``       the shared *content*: one row per version of a tool in a namespace, keyed by
                ``name`` and ``hash`` (``Tool.content_hash()``): ``mcp`` (pool order),
                ``text_hash`` (of the embedded text; rows with equal texts share a vector), the
                tool as ``json`` (not ``jsonb``, which reorders keys and so parameters), its
                weighted ``document`` (``tsvector``, GIN-indexed) and the ``tokenizer_version``
                that wrote it, its ``embedding`` (pgvector ``vector``), and ``released_at``,
                when the garbage collection first found no holding of it; ``id`` names the
                row in ``holdings``
``holders``     one row per live backend instance of a namespace: its lease (``expires_at``,
                ``lease`` seconds) and the ``generation`` of its last change
``holdings``    what each holder holds: ``(namespace, holder, name) -> tool`` (the content
                row's ``id``); searches see
                the content rows their holder holds (docs/postgres.md, "Sharing one
                namespace")

Vectors of different namespaces may differ in size, so the HNSW index of a namespace is a
partial expression index, ``(embedding::vector(dim)) vector_cosine_ops WHERE namespace = ...``,
built once the namespace is large enough for it to beat an exact scan.

Migrations run in one transaction under an advisory lock, so replicas starting together apply
each exactly once; a database migrated by a newer toolsearch is refused, not downgraded.
"""

from __future__ import annotations

import hashlib
import re
from typing import TYPE_CHECKING

from toolsearch.errors import BackendError, ConfigError

if TYPE_CHECKING:
    import psycopg

__all__ = [
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "check_namespace",
    "check_schema_name",
    "hnsw_index_name",
    "lock_key",
    "migrate",
]

# Each migration is a list of statements; ``{s}`` is the quoted schema name.
MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (
        """CREATE TABLE IF NOT EXISTS {s}.catalogues (
            namespace text PRIMARY KEY,
            encoder text NOT NULL,
            text_fields text NOT NULL,
            dim integer,
            tokenizer_version integer NOT NULL,
            generation bigint NOT NULL DEFAULT 0,
            hnsw boolean NOT NULL DEFAULT false,
            updated_at timestamptz NOT NULL DEFAULT now()
        )""",
        """CREATE TABLE IF NOT EXISTS {s}.tools (
            namespace text NOT NULL REFERENCES {s}.catalogues ON DELETE CASCADE,
            name text NOT NULL,
            mcp boolean NOT NULL,
            hash text NOT NULL,
            text_hash bytea NOT NULL,
            definition json NOT NULL,
            document tsvector NOT NULL,
            embedding vector NOT NULL,
            PRIMARY KEY (namespace, name)
        )""",
        "CREATE INDEX IF NOT EXISTS tools_document ON {s}.tools USING gin (document)",
    ),
    (
        # Content keyed by hash; the rows of version 1 become unreferenced content, kept for
        # reuse until the garbage collection's retention has passed.
        "ALTER TABLE {s}.tools ADD COLUMN IF NOT EXISTS tokenizer_version integer",
        "UPDATE {s}.tools t SET tokenizer_version = c.tokenizer_version FROM {s}.catalogues c "
        "WHERE c.namespace = t.namespace AND t.tokenizer_version IS NULL",
        "ALTER TABLE {s}.tools ALTER COLUMN tokenizer_version SET NOT NULL",
        "ALTER TABLE {s}.tools ADD COLUMN IF NOT EXISTS released_at timestamptz",
        "UPDATE {s}.tools SET released_at = now() WHERE released_at IS NULL",
        "ALTER TABLE {s}.tools DROP CONSTRAINT IF EXISTS tools_pkey",
        "ALTER TABLE {s}.tools ADD CONSTRAINT tools_pkey PRIMARY KEY (namespace, name, hash)",
        "CREATE INDEX IF NOT EXISTS tools_text_hash ON {s}.tools (namespace, text_hash)",
        # holdings join content on one integer (a join on name and hash costs a search 3x)
        "ALTER TABLE {s}.tools ADD COLUMN IF NOT EXISTS id bigint GENERATED ALWAYS AS IDENTITY",
        "CREATE UNIQUE INDEX IF NOT EXISTS tools_id ON {s}.tools (id)",
        """CREATE TABLE IF NOT EXISTS {s}.holders (
            namespace text NOT NULL REFERENCES {s}.catalogues ON DELETE CASCADE,
            holder text NOT NULL,
            lease double precision NOT NULL,
            expires_at timestamptz NOT NULL,
            generation bigint NOT NULL DEFAULT 0,
            started_at timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (namespace, holder)
        )""",
        """CREATE TABLE IF NOT EXISTS {s}.holdings (
            namespace text NOT NULL,
            holder text NOT NULL,
            name text NOT NULL,
            tool bigint NOT NULL REFERENCES {s}.tools (id),
            PRIMARY KEY (namespace, holder, name),
            FOREIGN KEY (namespace, holder) REFERENCES {s}.holders ON DELETE CASCADE
        )""",
        "CREATE INDEX IF NOT EXISTS holdings_tool ON {s}.holdings (tool, holder)",
    ),
)

#: The schema version this code writes and reads.
SCHEMA_VERSION = len(MIGRATIONS)

_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,47}")
_MAX_NAMESPACE = 200


def check_schema_name(name: object) -> str:
    """A PostgreSQL schema name this backend may create: lower-case letters, digits, ``_``."""
    if not isinstance(name, str) or not _SCHEMA_NAME.fullmatch(name) or name.startswith("pg_"):
        raise ConfigError(
            "postgres option schema must be 1-48 lower-case letters, digits or '_' "
            f"(not starting with a digit or 'pg_'), got {name!r}"
        )
    return name


def check_namespace(name: object) -> str:
    """A catalogue namespace: any printable text of 1-200 characters."""
    if (
        not isinstance(name, str)
        or not 0 < len(name) <= _MAX_NAMESPACE
        or not name.isprintable()
        or name != name.strip()
    ):
        raise ConfigError(
            f"postgres option namespace must be 1-{_MAX_NAMESPACE} printable characters "
            f"without surrounding spaces, got {name!r}"
        )
    return name


def lock_key(*parts: str) -> int:
    """A signed 64-bit advisory-lock key for ``parts`` (stable across processes)."""
    digest = hashlib.blake2b("\x1f".join(("toolsearch", *parts)).encode(), digest_size=8)
    return int.from_bytes(digest.digest(), "big", signed=True)


def hnsw_index_name(namespace: str) -> str:
    """The name of a namespace's HNSW index (a hash: namespaces need not be identifiers)."""
    return "tools_hnsw_" + hashlib.blake2b(namespace.encode(), digest_size=8).hexdigest()


def migrate(conn: psycopg.Connection[tuple[object, ...]], schema: str) -> None:
    """Create the schema and apply the migrations it lacks (one transaction, locked)."""
    from psycopg import sql

    quoted = sql.Identifier(schema).as_string(conn)
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (lock_key("migrations"),))
        _create_extension(conn)
        conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema)))
        conn.execute(
            f"CREATE TABLE IF NOT EXISTS {quoted}.meta (key text PRIMARY KEY, value text NOT NULL)"
        )
        row = conn.execute(
            f"SELECT value FROM {quoted}.meta WHERE key = 'schema_version'"
        ).fetchone()
        current = int(str(row[0])) if row is not None else 0
        if current > SCHEMA_VERSION:
            raise BackendError(
                f"postgres: schema {schema!r} is at version {current}, newer than this "
                f"toolsearch understands ({SCHEMA_VERSION}); upgrade toolsearch or use "
                "another schema"
            )
        for statements in MIGRATIONS[current:]:
            for statement in statements:
                conn.execute(statement.format(s=quoted))
        if current < SCHEMA_VERSION:
            conn.execute(
                f"INSERT INTO {quoted}.meta (key, value) VALUES ('schema_version', %s) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (str(SCHEMA_VERSION),),
            )


def _create_extension(conn: psycopg.Connection[tuple[object, ...]]) -> None:
    """Install pgvector unless it is there (under the caller's lock: two sessions creating it
    at once would clash)."""
    import psycopg

    if conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'").fetchone():
        return
    try:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    except psycopg.errors.InsufficientPrivilege:
        raise BackendError(
            "postgres: the pgvector extension is not installed in this database and this user "
            "may not install it; ask an administrator to run: CREATE EXTENSION vector"
        ) from None
    except psycopg.errors.FeatureNotSupported as exc:
        raise BackendError(f"postgres: pgvector is not available on this server: {exc}") from None
