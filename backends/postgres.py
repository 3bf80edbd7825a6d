"""Backend ``postgres``: the tool index in PostgreSQL (full text + pgvector), shared by replicas.

Every gateway replica pointed at one database shares one index: nothing is held in the process
but a connection pool and the list of tools this instance holds. A search is two rankings in
the database and one fusion:

* lexical: PostgreSQL full-text search over a weighted ``tsvector`` per tool
  (:mod:`toolsearch.backends.postgres_text`), ranked by ``ts_rank`` (or ``ts_rank_cd``) with a
  normalisation and label weights measured on the mcp-workbench dev split (docs/postgres.md);
* dense: pgvector cosine similarity of the vectors the ``embedding`` backend computes for the
  same tools (its encoder and its on-disk cache), exact below ``hnsw_min_rows`` tools of a
  namespace and through an HNSW index above;
* fusion: the default hybrid's :class:`~toolsearch.fusion.Fuser` — a convex combination of the
  per-query normalised scores (dense min-max, text divided by its best), plus the name match,
  the exact-name and server bonuses and the server support (:data:`FUSION_WEIGHTS`);
  ``fusion="rrf"`` keeps the previous default's reciprocal rank fusion (:data:`RRF_WEIGHTS`,
  ``docs/postgres.md``).

Each instance is a *holder* (:mod:`.postgres_holder`): tool content is shared by every
process on a namespace, keyed by ``Tool.content_hash()``, while what an instance searches and
returns is what it holds — the tools it was given, nothing another instance wrote or removed.
``index`` makes the holder's holdings exactly its tools, ``upsert`` and ``remove`` change the
named ones; content already stored is not written again, and a vector is encoded once per
distinct embedded text of the namespace. Each write transaction holds the namespace's advisory
lock while it reads what is stored, encodes and writes, so when replicas apply the same change
together exactly one of them encodes; a restarted replica encodes nothing. Large catalogues are
written in chunks of :data:`WRITE_CHUNK` tools (one transaction each, touching only this
holder's holdings). A heartbeat thread renews the holder's lease, collects expired holders and
unreferenced content, and writes the holdings back when they were lost.

Every change of a holder's holdings bumps the namespace's ``generation`` and sends a ``NOTIFY``
on the schema's channel; :meth:`PostgresBackend.on_change` reports changes of this holder's view
(a listener thread that treats notifications as hints, re-reads the generation from the table,
and is restarted whatever stops it). Connections come from a ``psycopg_pool`` pool that checks
each connection before use, so a restarted server costs a failed search at most.

Options and the table layout are in docs/postgres.md and :mod:`.postgres_schema`.
"""

from __future__ import annotations

import functools
import json
import logging
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from toolsearch.backend import BaseBackend, Hit
from toolsearch.errors import BackendError, ConfigError, MissingExtraError
from toolsearch.fusion import Fuser, NameWords, name_words
from toolsearch.multistep import Ranking, search_steps
from toolsearch.query import ParsedQuery, parse_query
from toolsearch.tokenize import TOKENIZER_VERSION, SchemaCache, tool_fields
from toolsearch.tool import Tool

from .calibration import calibrated_min_similarity
from .embedding import HashingEncoder
from .hybrid import (
    DEFAULT_ACTION_BONUS,
    DEFAULT_DEPTH,
    DEFAULT_EXACT_NAME_BONUS,
    DEFAULT_MEMBERS,
    DEFAULT_MULTISTEP,
    DEFAULT_NAME_WEIGHT,
    DEFAULT_SERVER_BONUS,
    DEFAULT_SERVER_SUPPORT,
)
from .postgres_connect import ConnectionSettings
from .postgres_holder import (
    DEFAULT_LEASE,
    DEFAULT_RETENTION,
    check_holder,
    check_seconds,
    collect,
    default_holder,
    notify,
    read_note,
    release,
)
from .postgres_pool import RecoveringPool
from .postgres_schema import (
    check_namespace,
    check_schema_name,
    hnsw_index_name,
    lock_key,
    migrate,
)
from .postgres_stats import StatsCache
from .postgres_text import (
    RANK_FUNCTIONS,
    RANK_WEIGHTS,
    candidate_query,
    document_literal,
    query_lexemes,
    tsquery_of,
)
from .postgres_vectors import ImportedVectors, Vectors, text_hash

if TYPE_CHECKING:
    import psycopg

__all__ = [
    "ANALYZE_MIN_ROWS",
    "FUSION_WEIGHTS",
    "RRF_WEIGHTS",
    "WRITE_CHUNK",
    "PostgresBackend",
    "encoder_options",
    "fuse",
    "fuser",
]

logger = logging.getLogger("toolsearch.backends.postgres")

#: Tools per write transaction.
WRITE_CHUNK = 1000
#: A write or removal of at least this many rows refreshes the planner's statistics.
ANALYZE_MIN_ROWS = 1000
#: Namespaces with fewer tools are searched by an exact scan (measured: docs/postgres.md).
DEFAULT_HNSW_MIN_ROWS = 2_000
#: Rows the full-text ranking scores, estimated: a query's most frequent words only add to the
#: scores of the rows its selective words match once a table is larger (docs/postgres.md).
DEFAULT_TEXT_CANDIDATES = 2_000
#: Megabytes of ``maintenance_work_mem`` for building an HNSW index (docs/postgres.md, "Sizing").
DEFAULT_HNSW_BUILD_MEMORY = 1024
# pgvector's HNSW index holds vectors of at most this many dimensions.
_HNSW_MAX_DIM = 2000
_HNSW_MAX_EF = 1000
_SCORE_DECIMALS = 6
# Nearest rows fetched beyond the depth, so that rounding ties at the cut keep pool order.
_TIE_SLACK = 64
# Seconds to wait for a pooled connection before connecting directly (see _retrying).
_POOL_WAIT = 1.0
# The full-text ranking first ranks this many times the rows it needs, whoever holds them.
_LEXICAL_OVERFETCH = 4
# Notifications read before the listener re-reads the generation.
_NOTES_PER_READ = 1000
_Ranked = list[tuple[str, bool, float]]  # (name, mcp, score), best first


#: Convex weights of the dense and the full-text ranking: the default hybrid's dense weight,
#: its two lexical members' weights given to the one text ranking (``docs/postgres.md``).
FUSION_WEIGHTS: dict[str, float] = {
    "embedding": DEFAULT_MEMBERS["embedding"],
    "lexical": 1.0 - DEFAULT_MEMBERS["embedding"],
}
#: ``fusion="rrf"``: the weights and constant of the hybrid before its convex fusion.
RRF_WEIGHTS: dict[str, float] = {"embedding": 1.0, "lexical": 0.5}
FUSION_K = 5
FUSIONS = ("convex", "rrf")


@functools.cache
def fuser(fusion: str = "convex") -> Fuser:
    """The :class:`~toolsearch.fusion.Fuser` of the ``postgres`` backend for ``fusion``."""
    if fusion not in FUSIONS:
        raise ConfigError(f"postgres option fusion must be one of {FUSIONS}, got {fusion!r}")
    if fusion == "rrf":
        return Fuser(RRF_WEIGHTS, "rrf", k=FUSION_K)
    return Fuser(
        FUSION_WEIGHTS,
        "convex",
        {"embedding": "minmax", "lexical": "max"},
        name_weight=DEFAULT_NAME_WEIGHT,
        exact_name_bonus=DEFAULT_EXACT_NAME_BONUS,
        server_bonus=DEFAULT_SERVER_BONUS,
        server_support=DEFAULT_SERVER_SUPPORT,
        action_bonus=DEFAULT_ACTION_BONUS,
    )


def fuse(
    lexical: Sequence[Hit], dense: Sequence[Hit], query: ParsedQuery, fusion: str = "convex"
) -> dict[str, float]:
    """Fused scores of the full-text and the dense hits (best first) for ``query``. Name
    words come from the tool names alone (``mcp__server__tool``), as the rows carry no more."""
    hits = {"lexical": lexical, "embedding": dense}
    names = {hit.name: _name_words(hit.name) for hit in (*lexical, *dense)}
    return fuser(fusion).fuse(query, hits, names)


@functools.lru_cache(maxsize=100_000)
def _name_words(name: str) -> NameWords:
    return name_words(Tool(name, ""))


@dataclass(frozen=True)
class _Catalogue:
    """A namespace's row of ``catalogues``."""

    encoder: str
    text_fields: str
    dim: int | None
    tokenizer_version: int
    generation: int
    hnsw: bool


def _chunks(items: Sequence[Tool], size: int) -> Iterator[Sequence[Tool]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


class PostgresBackend(BaseBackend):
    """Full text + pgvector in PostgreSQL, fused like the default hybrid; shared by replicas.

    Connection: ``url`` (else ``$TOOLSEARCH_POSTGRES_URL``), ``min_pool``/``max_pool``,
    ``statement_timeout`` and ``connect_timeout`` (seconds), ``connect_options`` (libpq
    keywords, e.g. TLS files). Storage: ``schema`` (default ``toolsearch``), ``namespace`` (one
    catalogue; default ``default``). Lexical ranking: ``rank_function``, ``rank_normalization``,
    ``rank_weights``, ``stopwords`` (function words left out of the query). Dense ranking:
    ``hnsw_min_rows``, ``hnsw_m``, ``hnsw_ef_construction``, ``hnsw_build_memory``,
    ``ef_search``; ``text_candidates`` (rows the full-text ranking scores, estimated).
    Fusion: ``fusion``
    (``"convex"``, the default hybrid's, or ``"rrf"``); ``min_similarity`` (no tool fits below
    this best cosine; the hybrid's for the shipped model, ``None`` for none); ``multistep``
    (search the steps of a long request too, merged as the hybrid merges them,
    :mod:`toolsearch.multistep`). The encoder options of the ``embedding`` backend (``model``,
    ``encoder`` — an :class:`~toolsearch.backends.embedding.Encoder` or ``"hashing"`` —,
    ``fields``, ``cache_dir``, ``batch_size``, ``device``, ``threads``, ``progress``), and
    ``vectors`` (a file of vectors encoded elsewhere, :mod:`.postgres_vectors`).
    Details: docs/postgres.md.
    """

    name: ClassVar[str] = "postgres"
    incremental: ClassVar[bool] = True
    persistent: ClassVar[bool] = True
    #: Each write is a transaction: the engine searches while it writes (docs/concurrency.md).
    isolated_writes: ClassVar[bool] = True
    #: Without a ``url`` option the server comes from this variable; a default benchmark run
    #: skips the backend when it is unset.
    server_env: ClassVar[str | None] = "TOOLSEARCH_POSTGRES_URL"
    extra: ClassVar[str | None] = "postgres,embedding"
    requires: ClassVar[tuple[str, ...]] = (
        "psycopg",
        "psycopg_pool",
        "pgvector",
        "numpy",
        "sentence_transformers",
    )

    def __init__(
        self,
        *,
        url: str | None = None,
        namespace: str = "default",
        schema: str = "toolsearch",
        min_pool: int = 1,
        max_pool: int = 8,
        statement_timeout: float = 30.0,
        connect_timeout: float = 10.0,
        connect_options: Mapping[str, Any] | None = None,
        rank_function: str = "ts_rank",
        rank_normalization: int = 1,
        rank_weights: Sequence[float] = RANK_WEIGHTS,
        stopwords: bool = False,
        text_candidates: int | None = DEFAULT_TEXT_CANDIDATES,
        hnsw_min_rows: int = DEFAULT_HNSW_MIN_ROWS,
        hnsw_m: int = 16,
        hnsw_ef_construction: int = 64,
        hnsw_build_memory: int = DEFAULT_HNSW_BUILD_MEMORY,
        ef_search: int = 120,
        fusion: str = "convex",
        min_similarity: float | str | None = "default",
        multistep: bool = DEFAULT_MULTISTEP,
        holder: str | None = None,
        lease: float = DEFAULT_LEASE,
        retention: float = DEFAULT_RETENTION,
        vectors: str | None = None,
        **encoder_options: Any,
    ) -> None:
        super().__init__()
        _require_modules()
        self.settings = ConnectionSettings.from_options(
            url,
            min_pool=min_pool,
            max_pool=max_pool,
            statement_timeout=statement_timeout,
            connect_timeout=connect_timeout,
            connect_options=connect_options,
        )
        self.namespace = check_namespace(namespace)
        self.schema = check_schema_name(schema)
        self.rank_function, self.rank_normalization, self.rank_weights = _check_rank(
            rank_function, rank_normalization, rank_weights
        )
        if not isinstance(stopwords, bool):
            raise ConfigError(f"postgres option stopwords must be true or false, got {stopwords!r}")
        self.stopwords = stopwords
        self.text_candidates = (
            None
            if text_candidates is None
            else _count_option("text_candidates", text_candidates, minimum=1)
        )
        self.hnsw_min_rows = _count_option("hnsw_min_rows", hnsw_min_rows, minimum=1)
        self.hnsw_m = _count_option("hnsw_m", hnsw_m, minimum=2)
        self.hnsw_ef_construction = _count_option("hnsw_ef_construction", hnsw_ef_construction, 4)
        self.hnsw_build_memory = _count_option("hnsw_build_memory", hnsw_build_memory, 64)
        self.ef_search = _count_option("ef_search", ef_search, minimum=1)
        fuser(fusion)  # refuses an unknown fusion before connecting
        self.fusion = fusion
        if not isinstance(multistep, bool):
            raise ConfigError(f"postgres option multistep must be true or false, got {multistep!r}")
        self.multistep = multistep
        self._vectors = Vectors(_encoder_options(encoder_options))
        self.min_similarity = _min_similarity(min_similarity, encoder_options)
        self._imported = None if vectors is None else ImportedVectors(vectors, self._vectors)
        self.holder = default_holder() if holder is None else check_holder(holder)
        self.lease = check_seconds("lease", lease, minimum=1.0)
        self.retention = check_seconds("retention", retention, minimum=0.0)
        self.channel = f"toolsearch_{self.schema}"
        #: Texts this instance sent to the encoder, and content rows it wrote (for tests and
        #: reports).
        self.encoded = 0
        self.written = 0
        #: Vectors taken from the ``vectors`` file instead of encoded.
        self.imported = 0
        # What this holder was last asked to hold (None before its first write), whether a
        # write of it failed since; writes run one at a time (the heartbeat may write too).
        self._intent: dict[str, Tool] | None = None
        self._stale = False
        self._write_lock = threading.RLock()
        self._threads_lock = threading.Lock()
        self._listeners: list[Callable[[int], None]] = []
        self._reported: int | None = None
        self._listener: threading.Thread | None = None
        self._heartbeat: threading.Thread | None = None
        self._closed = threading.Event()
        self._iterative_scan = False
        self._stats = StatsCache(self.schema)
        self._pool = self._open()
        self._release = _Release(self._pool, self.schema, self.namespace, self.holder, self.channel)
        self._finalizer = weakref.finalize(self, _shut, self._pool, self._closed, self._release)

    # ------------------------------------------------------------------ connections
    def _open(self) -> RecoveringPool:
        import psycopg
        from pgvector.psycopg import register_vector
        from psycopg_pool import ConnectionPool

        kwargs = self.settings.connect_kwargs()
        try:
            with psycopg.connect(self.settings.conninfo, autocommit=True, **kwargs) as conn:
                migrate(conn, self.schema)
                self._catalogue(conn, create=False)  # refuses another encoder's namespace
                self._iterative_scan = _pgvector_version(conn) >= (0, 8)
        except psycopg.Error as exc:
            raise BackendError(
                f"postgres: cannot prepare schema {self.schema!r} on {self.settings.shown}: "
                f"{_message(exc)}"
            ) from None
        # the factory holds no reference to the backend: the finalizer holds the pool
        settings, name = self.settings, f"toolsearch-{self.schema}"
        pool = RecoveringPool(
            lambda: ConnectionPool(
                settings.conninfo,
                kwargs=kwargs,
                min_size=settings.min_pool,
                max_size=settings.max_pool,
                open=True,
                configure=register_vector,
                check=ConnectionPool.check_connection,
                timeout=settings.connect_timeout,
                num_workers=1,
                name=name,
            )
        )
        logger.info("postgres backend on %s, schema %s", self.settings.shown, self.schema)
        return pool

    def _retrying(self, what: str, work: Callable[[psycopg.Connection[Any]], Any]) -> Any:
        """``work`` in one transaction on a pooled connection. When the server went away (a
        restart or a fail-over breaks every pooled connection at once, and the pool then
        reconnects with growing pauses), ``work`` runs on a direct connection instead, tried
        every 0.2 s for up to ``connect_timeout`` seconds, so service resumes as soon as the
        server accepts connections; until one succeeds every operation goes direct at once,
        and the first that does puts a fresh pool in place (:mod:`.postgres_pool`). Writes
        are keyed by content hash, so running one twice changes nothing. Database errors
        become :class:`BackendError` naming the server without its password."""
        import psycopg
        from psycopg_pool import PoolTimeout

        try:
            if not self._pool.down:
                with self._pool.connection(timeout=_POOL_WAIT) as conn, conn.transaction():
                    return work(conn)
        except psycopg.errors.QueryCanceled as exc:  # statement_timeout: not an outage
            raise self._failure(what, exc) from None
        except (psycopg.OperationalError, PoolTimeout) as exc:
            self._pool.failed()
            logger.warning(
                "postgres: %s lost its connection (%s); reconnecting", what, _message(exc)
            )
        except psycopg.Error as exc:
            raise self._failure(what, exc) from None
        result = self._direct(what, work)
        self._pool.server_back()  # a fresh pool, instead of the old one's backoff
        return result

    def _direct(self, what: str, work: Callable[[psycopg.Connection[Any]], Any]) -> Any:
        import psycopg
        from pgvector.psycopg import register_vector

        deadline = time.monotonic() + self.settings.connect_timeout
        kwargs = self.settings.connect_kwargs()
        while True:
            try:
                with psycopg.connect(self.settings.conninfo, **kwargs) as conn:
                    register_vector(conn)
                    with conn.transaction():
                        return work(conn)
            except psycopg.OperationalError as exc:
                if time.monotonic() >= deadline:
                    raise self._failure(what, exc) from None
                time.sleep(0.2)
            except psycopg.Error as exc:
                raise self._failure(what, exc) from None

    def _failure(self, what: str, exc: BaseException) -> BackendError:
        return BackendError(f"postgres: {what} failed on {self.settings.shown}: {_message(exc)}")

    def detach(self) -> None:
        """Stop this instance *without* releasing its holdings: they stay (and keep their
        content from being collected) until its lease runs out. ``toolsearch index`` holds a
        catalogue this way, with a lease of days, so that replicas find it stored."""
        self._release.armed = False
        self.close()

    def close(self) -> None:
        """Release this holder's holdings (the content stays for reuse), stop its threads
        and close the pool. Also run at garbage collection and interpreter exit."""
        self._finalizer()

    def __enter__(self) -> PostgresBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ catalogue row
    def _catalogue(self, conn: psycopg.Connection[Any], *, create: bool) -> _Catalogue | None:
        if create:
            conn.execute(
                f"INSERT INTO {self._q}.catalogues (namespace, encoder, text_fields, "
                "tokenizer_version) VALUES (%s, %s, %s, %s) ON CONFLICT (namespace) DO NOTHING",
                (
                    self.namespace,
                    self._vectors.name,
                    ",".join(self._vectors.fields),
                    TOKENIZER_VERSION,
                ),
            )
        row = conn.execute(
            f"SELECT encoder, text_fields, dim, tokenizer_version, generation, hnsw "
            f"FROM {self._q}.catalogues WHERE namespace = %s",
            (self.namespace,),
        ).fetchone()
        if row is None:
            return None
        found = _Catalogue(*row)
        if found.encoder != self._vectors.name or found.text_fields != ",".join(
            self._vectors.fields
        ):
            raise BackendError(
                f"postgres: namespace {self.namespace!r} holds vectors of encoder "
                f"{found.encoder!r} over fields {found.text_fields!r}; this backend encodes with "
                f"{self._vectors.name!r} over {','.join(self._vectors.fields)!r}. Use the same "
                "model and fields, another namespace, or drop this one (PostgresBackend.drop())"
            )
        return found

    @property
    def _q(self) -> str:
        return '"' + self.schema + '"'

    # ------------------------------------------------------------------ writing
    def index(
        self, tools: Sequence[Tool], progress: Callable[[int, int], None] | None = None
    ) -> None:
        """Make this holder hold exactly ``tools``; other holders' holdings are not touched,
        and content already stored (by any holder) is neither written nor encoded again.
        ``progress(done, total)`` is called after each committed chunk."""
        unique = {tool.name: tool for tool in tools}
        with self._write_lock:
            self._intent = dict(unique)
            self._guarded(lambda: self._index_all(list(unique.values()), progress))

    def upsert(self, tools: Sequence[Tool]) -> None:
        """Add ``tools`` to this holder's holdings, replacing its versions of the same names."""
        unique = sorted({tool.name: tool for tool in tools}.values(), key=lambda t: t.name)
        if not unique:
            return
        with self._write_lock:
            self._intent = {**(self._intent or {}), **{t.name: t for t in unique}}
            self._guarded(lambda: self._upsert_chunks(unique))

    def remove(self, names: Iterable[str]) -> None:
        """Drop the named tools from this holder's holdings; unknown names are ignored."""
        drop = sorted(set(names))
        if not drop:
            return
        with self._write_lock:
            dropped = set(drop)
            self._intent = {n: t for n, t in (self._intent or {}).items() if n not in dropped}

            def work(conn: psycopg.Connection[Any]) -> int:
                catalogue = self._enter(conn, partial=True)
                removed = self._delete_holdings(conn, drop, keep=False)
                if removed:
                    self._after_change(conn, catalogue)
                return removed

            self._guarded(lambda: self._retrying("remove", work))

    def drop(self) -> None:
        """Delete this namespace for every holder: its tools, holders, catalogue row and HNSW
        index (live holders write their holdings back at their next lease renewal)."""

        def work(conn: psycopg.Connection[Any]) -> None:
            self._lock(conn)
            conn.execute(f"DROP INDEX IF EXISTS {self._q}.{hnsw_index_name(self.namespace)}")
            for table in ("holders", "catalogues"):  # holdings first: they reference tools
                conn.execute(
                    f"DELETE FROM {self._q}.{table} WHERE namespace = %s", (self.namespace,)
                )
            notify(conn, self.channel, {"namespace": self.namespace})

        with self._write_lock:
            self._retrying("drop", work)
            self._intent = None
            self._release.armed = False

    def collect_garbage(self) -> tuple[int, int]:
        """Collect expired holders and unreferenced content of this namespace now (the
        heartbeat does it every lease); returns how many holders and content rows went."""

        def work(conn: psycopg.Connection[Any]) -> tuple[int, int]:
            self._lock(conn)
            if self._catalogue(conn, create=False) is None:
                return 0, 0
            return collect(conn, self.schema, self.namespace, self.retention, self.channel)

        found: tuple[int, int] = self._retrying("garbage collection", work)
        return found

    def refresh_lease(self) -> None:
        """Renew this holder's lease; write its holdings back when they were collected (its
        lease ran out while it stalled or was cut off) or when a write of them failed."""
        if self._intent is None:
            return

        def renew(conn: psycopg.Connection[Any]) -> bool:
            return (
                conn.execute(
                    f"UPDATE {self._q}.holders SET expires_at = clock_timestamp() + "
                    "lease * interval '1 second' WHERE namespace = %s AND holder = %s "
                    "RETURNING 1",
                    (self.namespace, self.holder),
                ).fetchone()
                is not None
            )

        alive = self._retrying("renewing the lease", renew)
        if (alive and not self._stale) or not self._write_lock.acquire(blocking=False):
            return  # current, or a write is under way (it renews and repairs itself)
        try:
            intent = self._intent
            if intent is not None:
                logger.warning(
                    "postgres: holder %r of namespace %r %s; writing its %d tools back",
                    self.holder,
                    self.namespace,
                    "had a failed write" if alive else "lost its holdings (lease expired)",
                    len(intent),
                )
                self._stale = True
                self._guarded(lambda: None)
        finally:
            self._write_lock.release()

    def _guarded(self, write: Callable[[], object]) -> None:
        """Run a write of this holder (under the write lock). After a failed write the
        holdings may differ from what it was asked to hold, and after a collection they are
        gone: the next write, or the heartbeat once the server answers, writes them whole."""
        try:
            if self._stale:
                self._index_all(list((self._intent or {}).values()))
            else:
                try:
                    write()
                except _HolderLost:
                    self._index_all(list((self._intent or {}).values()))
        except BaseException:
            self._stale = True
            self._start_heartbeat()
            raise
        self._stale = False
        self._release.armed = True
        self._start_heartbeat()

    def _lock(self, conn: psycopg.Connection[Any]) -> None:
        conn.execute("SET LOCAL statement_timeout = 0")
        conn.execute(
            "SELECT pg_advisory_xact_lock(%s)",
            (lock_key("namespace", self.schema, self.namespace),),
        )

    def _enter(self, conn: psycopg.Connection[Any], *, partial: bool) -> _Catalogue:
        """Start a write transaction: the namespace's lock, its catalogue row and this
        holder's row. A partial write (``upsert``, ``remove``) of a holder whose row is gone
        while it held tools raises :class:`_HolderLost`: its holdings were collected and the
        whole set is written instead."""
        self._lock(conn)
        catalogue = self._catalogue(conn, create=True)
        assert catalogue is not None
        created = conn.execute(
            f"INSERT INTO {self._q}.holders (namespace, holder, lease, expires_at) "
            "VALUES (%s, %s, %s, clock_timestamp() + %s * interval '1 second') "
            "ON CONFLICT (namespace, holder) DO NOTHING RETURNING 1",
            (self.namespace, self.holder, self.lease, self.lease),
        ).fetchone()
        if created is not None and partial and self._release.armed:
            raise _HolderLost
        return catalogue

    def _index_all(
        self, tools: Sequence[Tool], progress: Callable[[int, int], None] | None = None
    ) -> None:
        unique = sorted(tools, key=lambda t: t.name)
        chunks = list(_chunks(unique, WRITE_CHUNK)) or [[]]
        changed_rows = 0
        for number, chunk in enumerate(chunks, start=1):
            last = number == len(chunks)

            def work(
                conn: psycopg.Connection[Any],
                chunk: Sequence[Tool] = chunk,
                last: bool = last,
                earlier: bool = changed_rows > 0,
            ) -> int:
                catalogue = self._enter(conn, partial=False)
                changed = self._hold(conn, chunk, catalogue)
                if last:
                    changed += self._delete_holdings(conn, [t.name for t in unique], keep=True)
                if changed or (last and earlier and not catalogue.hnsw):
                    self._after_change(conn, catalogue, build_due=last)
                return changed

            changed_rows += self._retrying("update", work)
            if progress is not None:
                progress(min(number * WRITE_CHUNK, len(unique)), len(unique))
        self._analyze_after(changed_rows)

    def _upsert_chunks(self, tools: Sequence[Tool]) -> None:
        changed_rows = 0
        chunks = list(_chunks(tools, WRITE_CHUNK))
        for number, chunk in enumerate(chunks, start=1):
            last = number == len(chunks)

            def work(
                conn: psycopg.Connection[Any],
                chunk: Sequence[Tool] = chunk,
                last: bool = last,
                earlier: bool = changed_rows > 0,
            ) -> int:
                catalogue = self._enter(conn, partial=True)
                changed = self._hold(conn, chunk, catalogue)
                if changed or (last and earlier and not catalogue.hnsw):
                    self._after_change(conn, catalogue, build_due=last)
                return changed

            changed_rows += self._retrying("update", work)
        self._analyze_after(changed_rows)

    def _analyze_after(self, changed_rows: int) -> None:
        """Refresh the planner's statistics after a large change. Until then PostgreSQL does
        not know how many rows a new namespace holds (autovacuum may never analyze a large
        shared table for one catalogue's writes) and scans it row by row, several times
        slower than through the full-text index (docs/postgres.md, "Writes")."""
        if changed_rows < ANALYZE_MIN_ROWS:
            return
        started = time.perf_counter()

        def analyze(conn: psycopg.Connection[Any]) -> None:
            conn.execute("SET LOCAL statement_timeout = 0")
            conn.execute(f"ANALYZE {self._q}.tools")
            conn.execute(f"ANALYZE {self._q}.holdings")
            _merge_pending_text_rows(conn, self.schema)

        try:
            self._retrying("refreshing statistics", analyze)
        except BackendError as exc:  # the change itself is committed; searches still work
            logger.warning("postgres: %s", exc)
            return
        self._stats.forget()
        logger.info(
            "postgres: statistics of %s.tools refreshed in %.1f s after %d changed rows",
            self.schema,
            time.perf_counter() - started,
            changed_rows,
        )

    def _hold(
        self, conn: psycopg.Connection[Any], tools: Sequence[Tool], catalogue: _Catalogue
    ) -> int:
        """Store the content of ``tools`` that is missing, then make this holder hold them
        (inside the locked transaction). Returns how many content rows were written plus how
        many holdings changed."""
        if not tools:
            return 0
        hashes = [t.content_hash() for t in tools]
        written = self._write_content(conn, tools, hashes, catalogue)
        cur = conn.execute(
            f"INSERT INTO {self._q}.holdings (namespace, holder, name, tool) "
            f"SELECT t.namespace, %s, t.name, t.id FROM {self._q}.tools t "
            "JOIN unnest(%s::text[], %s::text[]) AS k(name, hash) "
            "ON t.name = k.name AND t.hash = k.hash WHERE t.namespace = %s "
            "ON CONFLICT (namespace, holder, name) DO UPDATE SET tool = excluded.tool "
            "WHERE holdings.tool <> excluded.tool",
            (self.holder, [t.name for t in tools], hashes, self.namespace),
        )
        return written + max(cur.rowcount, 0)

    def _write_content(
        self,
        conn: psycopg.Connection[Any],
        tools: Sequence[Tool],
        hashes: Sequence[str],
        catalogue: _Catalogue,
    ) -> int:
        """Write the content rows of ``tools`` not stored yet, or stored by an older
        tokeniser; each takes the vector of a stored row with the same embedded text, and
        only texts no row has are encoded. Returns how many rows were written."""
        stored: dict[str, int] = dict(
            conn.execute(
                f"SELECT t.name, t.tokenizer_version FROM {self._q}.tools t "
                "JOIN unnest(%s::text[], %s::text[]) AS k(name, hash) "
                "ON t.name = k.name AND t.hash = k.hash WHERE t.namespace = %s",
                ([t.name for t in tools], list(hashes), self.namespace),
            ).fetchall()
        )
        missing = [
            (t, h)
            for t, h in zip(tools, hashes, strict=True)
            if stored.get(t.name) != TOKENIZER_VERSION
        ]
        if not missing:
            return 0
        texts = {t.name: self._vectors.text(t) for t, _ in missing}
        text_hashes = {name: text_hash(text) for name, text in texts.items()}
        vectors = self._vectors_for(conn, texts, text_hashes, catalogue)
        cache: SchemaCache = {}
        rows = [
            (
                self.namespace,
                tool.name,
                tool.mcp,
                hash_,
                text_hashes[tool.name],
                json.dumps(tool.to_dict(), ensure_ascii=False, default=str),
                document_literal(tool_fields(tool, schema_cache=cache)),
                vectors[text_hashes[tool.name]],
                TOKENIZER_VERSION,
            )
            for tool, hash_ in missing
        ]
        fresh = [row for row in rows if row[1] not in stored]
        if fresh:
            _copy_rows(conn, self.schema, fresh)
        rewritten = [row for row in rows if row[1] in stored]
        if rewritten:  # stored by an older tokeniser: rewritten in place (holdings point at it)
            with conn.cursor() as cur:
                cur.executemany(
                    f"INSERT INTO {self._q}.tools ({_CONTENT_COLUMNS}) "
                    "VALUES (%s, %s, %s, %s, %s, %s, %s::tsvector, %s, %s) "
                    "ON CONFLICT (namespace, name, hash) DO UPDATE SET mcp = excluded.mcp, "
                    "text_hash = excluded.text_hash, definition = excluded.definition, "
                    "document = excluded.document, embedding = excluded.embedding, "
                    "tokenizer_version = excluded.tokenizer_version",
                    rewritten,
                )
        self.written += len(rows)
        return len(rows)

    def _vectors_for(
        self,
        conn: psycopg.Connection[Any],
        texts: Mapping[str, str],
        text_hashes: Mapping[str, bytes],
        catalogue: _Catalogue,
    ) -> dict[bytes, Any]:
        """A vector per embedded text: a stored row's when any row of the namespace has the
        text, else encoded (once per distinct text)."""
        vectors: dict[bytes, Any] = {
            bytes(text_hash): vector
            for text_hash, vector in conn.execute(
                f"SELECT DISTINCT ON (text_hash) text_hash, embedding FROM {self._q}.tools "
                "WHERE namespace = %s AND text_hash = ANY(%s)",
                (self.namespace, list(set(text_hashes.values()))),
            )
        }
        fresh = {text_hashes[name]: text for name, text in texts.items()}
        fresh = {h: text for h, text in fresh.items() if h not in vectors}
        if fresh and self._imported is not None:
            found = self._imported.find(fresh)
            self._check_dim(len(next(iter(found.values()))) if found else None, catalogue)
            vectors.update(found)
            self.imported += len(found)
            fresh = {h: text for h, text in fresh.items() if h not in found}
        if fresh:
            vectors.update(zip(fresh, self._encode(list(fresh.values()), catalogue), strict=True))
        return vectors

    def _encode(self, texts: Sequence[str], catalogue: _Catalogue) -> list[Any]:
        matrix = self._vectors.tools(texts)
        self.encoded += len(texts)
        self._check_dim(matrix.shape[1], catalogue)
        return list(matrix)

    def _check_dim(self, dim: int | None, catalogue: _Catalogue) -> None:
        if dim is not None and catalogue.dim is not None and dim != catalogue.dim:
            raise BackendError(
                f"postgres: encoder {self._vectors.name!r} gave {dim}-dimensional vectors; "
                f"namespace {self.namespace!r} holds {catalogue.dim}-dimensional ones"
            )

    def _delete_holdings(
        self, conn: psycopg.Connection[Any], names: Sequence[str], *, keep: bool
    ) -> int:
        """Drop this holder's holdings of the named tools, or with ``keep`` of every tool
        *not* named; returns how many went. The content stays for other holders and reuse."""
        test = "NOT (name = ANY(%s))" if keep else "name = ANY(%s)"
        cur = conn.execute(
            f"DELETE FROM {self._q}.holdings WHERE namespace = %s AND holder = %s AND {test}",
            (self.namespace, self.holder, list(names)),
        )
        return max(cur.rowcount, 0)

    def _after_change(
        self, conn: psycopg.Connection[Any], catalogue: _Catalogue, *, build_due: bool = True
    ) -> None:
        """Record the vector size, build the HNSW index once worth it (``build_due``: at the
        last chunk of a write, so that a bulk load builds it once over all its rows instead
        of inserting row by row into a graph built after its second chunk), bump the
        generation, renew the lease and notify — all in the writing transaction, so readers
        see the change whole. Each step reads only what it needs: the size from one row, the
        row count only until the index exists (a chunk never scans the vectors)."""
        dim = catalogue.dim
        if dim is None:
            found = conn.execute(
                f"SELECT vector_dims(embedding) FROM {self._q}.tools WHERE namespace = %s LIMIT 1",
                (self.namespace,),
            ).fetchone()
            dim = int(found[0]) if found else None
        build = False
        if build_due and dim is not None and not catalogue.hnsw and dim <= _HNSW_MAX_DIM:
            (rows,) = conn.execute(
                f"SELECT count(*) FROM {self._q}.tools WHERE namespace = %s", (self.namespace,)
            ).fetchone() or (0,)
            build = rows >= self.hnsw_min_rows
            if build:
                self._build_hnsw(conn, dim)
        row = conn.execute(
            f"UPDATE {self._q}.catalogues SET dim = COALESCE(dim, %s), hnsw = hnsw OR %s, "
            "generation = generation + 1, updated_at = now() WHERE namespace = %s "
            "RETURNING generation",
            (dim, build, self.namespace),
        ).fetchone()
        generation = int(row[0]) if row else -1
        conn.execute(
            f"UPDATE {self._q}.holders SET generation = %s, expires_at = clock_timestamp() + "
            "lease * interval '1 second' WHERE namespace = %s AND holder = %s",
            (generation, self.namespace, self.holder),
        )
        note = {"namespace": self.namespace, "holder": self.holder, "generation": generation}
        notify(conn, self.channel, note)

    def _build_hnsw(self, conn: psycopg.Connection[Any], dim: int) -> None:
        from psycopg import sql

        started = time.perf_counter()
        # the graph built in memory: pgvector builds far slower once it no longer fits
        conn.execute(
            sql.SQL("SET LOCAL maintenance_work_mem = {}").format(
                sql.Literal(f"{self.hnsw_build_memory}MB")
            )
        )
        conn.execute(
            sql.SQL(
                "CREATE INDEX IF NOT EXISTS {name} ON {schema}.tools USING hnsw "
                "((embedding::vector({dim})) vector_cosine_ops) "
                "WITH (m = {m}, ef_construction = {ef}) WHERE namespace = {ns}"
            ).format(
                name=sql.Identifier(hnsw_index_name(self.namespace)),
                schema=sql.Identifier(self.schema),
                dim=sql.Literal(dim),
                m=sql.Literal(self.hnsw_m),
                ef=sql.Literal(self.hnsw_ef_construction),
                ns=sql.Literal(self.namespace),
            )
        )
        logger.info(
            "postgres: HNSW index of namespace %r built in %.1f s",
            self.namespace,
            time.perf_counter() - started,
        )

    # ------------------------------------------------------------------ reading
    @property
    def tools(self) -> Mapping[str, Tool]:
        """The tools this holder holds by name, read back from the database (pool order)."""
        from toolsearch.catalog import tool_from_dict

        def read(conn: psycopg.Connection[Any]) -> list[Any]:
            return conn.execute(
                f"SELECT t.definition FROM {self._q}.tools t JOIN {self._q}.holdings h "
                "ON h.tool = t.id WHERE h.namespace = %s AND h.holder = %s "
                "ORDER BY t.mcp, t.name",
                (self.namespace, self.holder),
            ).fetchall()

        rows = self._retrying("reading tools", read)
        tools = [tool_from_dict(definition) for (definition,) in rows]
        return {tool.name: tool for tool in tools}

    def __len__(self) -> int:
        def count(conn: psycopg.Connection[Any]) -> int:
            row = conn.execute(
                f"SELECT count(*) FROM {self._q}.holdings WHERE namespace = %s AND holder = %s",
                (self.namespace, self.holder),
            ).fetchone()
            return int(row[0]) if row else 0

        found: int = self._retrying("counting tools", count)
        return found

    @property
    def generation(self) -> int:
        """The change counter of this holder's view: the namespace's counter at its last
        change (0 before its first write, and while its holdings are collected)."""

        def read(conn: psycopg.Connection[Any]) -> int:
            row = conn.execute(
                f"SELECT generation FROM {self._q}.holders WHERE namespace = %s AND holder = %s",
                (self.namespace, self.holder),
            ).fetchone()
            return int(row[0]) if row else 0

        found: int = self._retrying("reading the generation", read)
        return found

    def search(self, query: ParsedQuery, k: int) -> list[Hit]:
        """The best ``k`` tools by the fused lexical and dense rankings, ties in pool order;
        the steps of a multi-clause request merged in as the hybrid does (``multistep``)."""
        if k <= 0 or query.is_empty:
            return []
        depth = max(DEFAULT_DEPTH, k)
        whole, no_tool_fits = self._ranking(query, depth)
        if no_tool_fits:
            return []  # the default hybrid's abstention
        if self.multistep and not query.required:  # a one-step request is the whole ranking
            return search_steps(self._step_ranking, query.raw, k, depth=depth, whole=whole)
        return whole.hits[:k]

    def _step_ranking(self, text: str, k: int) -> Ranking:
        return self._ranking(parse_query(text), k, abstain=False)[0]

    def _ranking(
        self, query: ParsedQuery, depth: int, *, abstain: bool = True
    ) -> tuple[Ranking, bool]:
        """The fused ranking of ``query`` with its best cosine as confidence, and whether that
        cosine is below ``min_similarity`` (no tool fits: the ranking is then empty; never
        for a step, ``abstain=False``)."""
        words = query_lexemes(query, stopwords=self.stopwords)
        vector = self._vectors.query(query.text)
        dense_wanted = bool(vector.any())

        def rank(conn: psycopg.Connection[Any]) -> tuple[_Ranked, _Ranked]:
            catalogue = self._catalogue(conn, create=False)
            if catalogue is None:
                return [], []
            lexical = self._lexical(conn, words, depth) if words else []
            dense = self._dense(conn, vector, catalogue, depth) if dense_wanted else []
            return lexical, dense

        lexical, dense = self._retrying("search", rank)
        best = dense[0][2] if dense else 0.0
        if abstain and self.min_similarity is not None and dense and best < self.min_similarity:
            return Ranking([], best), True
        pool_key = {name: mcp for name, mcp, _ in (*lexical, *dense)}
        fused = fuse(
            [Hit(n, score) for n, _, score in lexical],
            [Hit(n, score) for n, _, score in dense],
            query,
            self.fusion,
        )
        ranked = sorted(fused, key=lambda name: (-fused[name], pool_key[name], name))
        hits = [Hit(name, fused[name]) for name in ranked[:depth] if fused[name] > 0]
        return Ranking(hits, best), False

    def _candidates(self, conn: psycopg.Connection[Any], words: Sequence[str]) -> str:
        """The ``tsquery`` of the rows the full-text ranking scores (all rows matching a word
        in a namespace of at most ``text_candidates`` rows;
        :func:`~backends.postgres_text.candidate_query`)."""
        if self.text_candidates is None:
            return tsquery_of(words)
        stats = self._stats.get(conn)
        rows = stats.namespace_rows(self.namespace)
        return candidate_query(words, stats.frequency, rows, self.text_candidates)

    def _lexical(self, conn: psycopg.Connection[Any], words: Sequence[str], depth: int) -> _Ranked:
        """The best ``depth`` held tools by ``ts_rank`` of all ``words``, among the rows that
        match the selective ones (:meth:`_candidates`). The namespace's best
        ``_LEXICAL_OVERFETCH * depth`` rows are ranked first and checked against the
        holdings one by one — the same answer as ranking only held rows whenever ``depth``
        of them are among those, which they are unless the holder holds a small part of the
        namespace; then the held rows alone are ranked (a join over all the holder's rows,
        dearer in the usual case)."""
        score = f"{self.rank_function}(%s::float4[], t.document, q, %s)"
        candidates = self._candidates(conn, words)
        params = [list(self.rank_weights), self.rank_normalization, tsquery_of(words)]
        params += [candidates, self.namespace]
        fetch = depth * _LEXICAL_OVERFETCH
        rows = conn.execute(
            f"SELECT r.name, r.mcp, r.score, EXISTS (SELECT 1 FROM {self._q}.holdings h "
            "WHERE h.tool = r.id AND h.holder = %s AND h.namespace = %s) FROM ("
            f"SELECT t.id, t.name, t.mcp, {score} AS score FROM {self._q}.tools t, "
            "CAST(%s AS tsquery) AS q, CAST(%s AS tsquery) AS c "
            "WHERE t.namespace = %s AND t.document @@ c "
            "ORDER BY score DESC, t.mcp, t.name LIMIT %s) AS r "
            "ORDER BY r.score DESC, r.mcp, r.name",
            (self.holder, self.namespace, *params, fetch),
        ).fetchall()
        held = [(name, mcp, score) for name, mcp, score, mine in rows if mine]
        if len(held) < depth and len(rows) == fetch:
            held = conn.execute(
                f"SELECT t.name, t.mcp, {score} AS score FROM {self._q}.tools t "
                f"JOIN {self._q}.holdings h ON h.tool = t.id, CAST(%s AS tsquery) AS q, "
                "CAST(%s AS tsquery) AS c WHERE t.namespace = %s AND h.namespace = t.namespace "
                "AND h.holder = %s AND t.document @@ c ORDER BY score DESC, t.mcp, t.name LIMIT %s",
                (*params, self.holder, depth),
            ).fetchall()
        return [(name, mcp, float(score)) for name, mcp, score in held[:depth] if score > 0]

    def _dense(
        self, conn: psycopg.Connection[Any], vector: Any, catalogue: _Catalogue, depth: int
    ) -> _Ranked:
        if catalogue.dim is None:
            return []
        if vector.shape[0] != catalogue.dim:
            raise BackendError(
                f"postgres: query vectors have {vector.shape[0]} dimensions, namespace "
                f"{self.namespace!r} holds {catalogue.dim}-dimensional ones"
            )
        from psycopg import sql

        limit = depth + _TIE_SLACK
        if catalogue.hnsw:
            # The vector cast and the namespace literal match the partial HNSW index, whose
            # candidates (ef_search, at most 1000) must cover the LIMIT. The planner prices a
            # sequential scan far below its cost (it does not see the distance computations)
            # and picks it once ef_search passes about 100: sequential scans are switched off.
            limit = min(limit, _HNSW_MAX_EF)
            conn.execute(
                sql.SQL("SET LOCAL hnsw.ef_search = {}").format(
                    sql.Literal(max(self.ef_search, limit))
                )
            )
            conn.execute("SET LOCAL enable_seqscan = off")
            if self._iterative_scan:
                # rows other holders hold are skipped: the scan goes on until LIMIT rows of
                # this holder are found (pgvector 0.8; re-sorted below)
                conn.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
            distance: sql.Composable = sql.SQL(
                "t.embedding::vector({dim}) <=> %s::vector({dim})"
            ).format(dim=sql.Literal(catalogue.dim))
        else:
            distance = sql.SQL("t.embedding <=> %s")  # matches no index: an exact scan
        # Everything but the vector is a literal: a prepared statement's generic plan, not
        # knowing the LIMIT, would pick a full scan over the HNSW index.
        statement = sql.SQL(
            "SELECT t.name, t.mcp, 1 - ({distance}) AS score FROM {schema}.tools t "
            "WHERE t.namespace = {ns} AND EXISTS (SELECT 1 FROM {schema}.holdings h "
            "WHERE h.tool = t.id AND h.holder = {holder} AND h.namespace = {ns}) "
            "ORDER BY {distance} LIMIT {limit}"
        ).format(
            distance=distance,
            schema=sql.Identifier(self.schema),
            ns=sql.Literal(self.namespace),
            holder=sql.Literal(self.holder),
            limit=sql.Literal(limit),
        )
        rows = conn.execute(statement, (vector, vector)).fetchall()
        # rounded, so that equal vectors tie exactly and pool order breaks the tie
        scored = [
            (name, mcp, round(float(score), _SCORE_DECIMALS))
            for name, mcp, score in rows
            if score == score and score > 0
        ]
        scored.sort(key=lambda row: (-row[2], row[1], row[0]))
        return scored[:depth]

    # ------------------------------------------------------------------ change feed
    def on_change(self, callback: Callable[[int], None]) -> None:
        """Call ``callback(generation)`` whenever this holder's view changes — by a write of
        this holder (in any process using its name) or by its holdings being collected —
        within about a second. Another holder's writes change shared content, not this
        view, and are not reported. Notifications are hints: the generation reported is
        read from the table, so a forged one can cause a read, never a wrong value."""
        with self._threads_lock:
            if self._reported is None:
                self._reported = self._read_generation()
            self._listeners.append(callback)
        self._start_listener()
        self._start_heartbeat()

    def _start_listener(self) -> None:
        """Start the listener thread, or a new one if it died (the heartbeat checks)."""
        with self._threads_lock:
            if self._closed.is_set() or not self._listeners:
                return
            if self._listener is not None and self._listener.is_alive():
                return
            self._listener = threading.Thread(
                target=self._listen, name=f"toolsearch-listen-{self.namespace}", daemon=True
            )
            self._listener.start()

    def _listen(self) -> None:
        """Listen until closed; whatever breaks a round (a lost connection or anything
        else) is logged and the next round reconnects."""
        while not self._closed.is_set():
            try:
                self._listen_round()
            except Exception as exc:
                if self._closed.is_set():
                    return
                import psycopg

                if isinstance(exc, psycopg.Error):
                    logger.warning(
                        "postgres listener lost its connection (%s); reconnecting", _message(exc)
                    )
                else:
                    logger.exception("postgres listener failed; restarting it")
                self._closed.wait(0.5)

    def _listen_round(self) -> None:
        import psycopg
        from psycopg import sql

        kwargs = self.settings.connect_kwargs(statement_timeout=0)
        with psycopg.connect(self.settings.conninfo, autocommit=True, **kwargs) as conn:
            conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self.channel)))
            self._report()  # changes made while nobody listened
            while not self._closed.is_set():
                hinted = False
                for note in conn.notifies(timeout=0.5, stop_after=_NOTES_PER_READ):
                    hinted = read_note(note.payload, self.namespace, self.holder) or hinted
                if hinted:
                    self._report()

    def _read_generation(self) -> int:
        try:
            return self.generation
        except BackendError as exc:
            logger.warning("postgres: %s", exc)
            return -1

    def _report(self) -> None:
        """Re-read this holder's generation and tell the subscribers if it changed (``-1``
        when it cannot be read: a change may have been missed)."""
        generation = self._read_generation()
        with self._threads_lock:
            if generation == self._reported and generation != -1:
                return
            self._reported = generation
            callbacks = list(self._listeners)
        for callback in callbacks:
            try:
                callback(generation)
            except Exception:
                logger.exception("postgres on_change callback failed")

    # ------------------------------------------------------------------ heartbeat
    def _start_heartbeat(self) -> None:
        with self._threads_lock:
            if self._closed.is_set():
                return
            if self._heartbeat is not None and self._heartbeat.is_alive():
                return
            self._heartbeat = threading.Thread(
                target=_beat,
                args=(weakref.ref(self), self._closed, min(1.0, self.lease / 3)),
                name=f"toolsearch-lease-{self.namespace}",
                daemon=True,
            )
            self._heartbeat.start()

    def _beat(self, due: dict[str, float]) -> None:
        """One heartbeat: renew the lease every third of it, collect garbage every lease
        (when no write holds the namespace), restart a dead listener."""
        now = time.monotonic()
        if now >= due.setdefault("renew", now):
            due["renew"] = now + self.lease / 3
            self.refresh_lease()
        if now >= due.setdefault("collect", now + self.lease / 3):
            due["collect"] = now + self.lease
            self._collect_if_free()
        self._start_listener()

    def _collect_if_free(self) -> None:
        def work(conn: psycopg.Connection[Any]) -> None:
            conn.execute("SET LOCAL statement_timeout = 0")
            (free,) = conn.execute(
                "SELECT pg_try_advisory_xact_lock(%s)",
                (lock_key("namespace", self.schema, self.namespace),),
            ).fetchone() or (False,)
            if free and self._catalogue(conn, create=False) is not None:
                collect(conn, self.schema, self.namespace, self.retention, self.channel)

        self._retrying("garbage collection", work)

    def params(self) -> dict[str, object]:
        return {
            **self.settings.describe(),
            "schema": self.schema,
            "namespace": self.namespace,
            "rank_function": self.rank_function,
            "rank_normalization": self.rank_normalization,
            "rank_weights": list(self.rank_weights),
            "stopwords": self.stopwords,
            "text_candidates": self.text_candidates,
            "hnsw_min_rows": self.hnsw_min_rows,
            "hnsw_build_memory": self.hnsw_build_memory,
            "ef_search": self.ef_search,
            "fusion": self._fusion_params(),
            "min_similarity": self.min_similarity,
            "multistep": self.multistep,
            "lease": self.lease,
            "retention": self.retention,
            "vectors": None if self._imported is None else str(self._imported.path),
            "embedding": self._vectors.describe(),
        }

    def _fusion_params(self) -> dict[str, object]:
        used = fuser(self.fusion)
        params: dict[str, object] = {"method": used.fusion, "weights": dict(used.weights)}
        if used.fusion == "rrf":
            params["k"] = used.k
        else:
            params |= {
                "name_weight": used.name_weight,
                "exact_name_bonus": used.exact_name_bonus,
                "server_bonus": used.server_bonus,
                "server_support": used.server_support,
                "action_bonus": used.action_bonus,
            }
        return params | {"depth": DEFAULT_DEPTH}


def _beat(ref: weakref.ref[PostgresBackend], closed: threading.Event, tick: float) -> None:
    """The heartbeat thread: a beat every ``tick`` seconds until the backend is closed or
    garbage-collected (the thread holds it only between beats, so an instance nobody
    closed is still finalized — its holdings released, its pool closed). Failures are
    logged and tried again at the next beat."""
    due: dict[str, float] = {}
    while not closed.wait(tick):
        backend = ref()
        if backend is None:
            return
        try:
            backend._beat(due)
        except Exception as exc:
            if closed.is_set():
                return
            logger.warning("postgres: holder heartbeat: %s", exc)
        del backend


class _HolderLost(Exception):
    """This holder's row is gone (its lease expired and its holdings were collected)."""


@dataclass
class _Release:
    """Releasing a holder at close; ``armed`` once it has written (held anything)."""

    pool: RecoveringPool
    schema: str
    namespace: str
    holder: str
    channel: str
    armed: bool = False

    def __call__(self) -> None:
        if self.armed:
            release(self.pool, self.schema, self.namespace, self.holder, self.channel)
            self.armed = False


def _shut(pool: RecoveringPool, closed: threading.Event, release_holder: _Release) -> None:
    closed.set()
    try:
        release_holder()
    finally:
        pool.close()


_CONTENT_COLUMNS = (
    "namespace, name, mcp, hash, text_hash, definition, document, embedding, tokenizer_version"
)


def _merge_pending_text_rows(conn: psycopg.Connection[Any], schema: str) -> None:
    """Merge the GIN index's pending list: new rows wait in it, and every full-text search
    reads it whole until a vacuum merges it (28 ms of a search at 100,000 tools after a
    bulk load, 0.2 ms after). Only the table's owner may; others leave it to autovacuum."""
    import psycopg

    try:
        with conn.transaction():  # a savepoint: the statistics stay if this is refused
            conn.execute(
                "SELECT gin_clean_pending_list(%s::regclass)", (f'"{schema}".tools_document',)
            )
    except psycopg.errors.InsufficientPrivilege:
        logger.info("postgres: not the owner of %s.tools; autovacuum merges new rows", schema)


def _vector_text(vector: Any) -> str:
    """pgvector's text of a NumPy vector, or of a stored one read back (a ``Vector``)."""
    values = vector.to_numpy() if hasattr(vector, "to_numpy") else vector
    return "[" + ",".join(map(repr, values.tolist())) + "]"


def _copy_rows(conn: psycopg.Connection[Any], schema: str, rows: Sequence[Sequence[Any]]) -> None:
    """Write new content rows with ``COPY``: one stream instead of a statement per row (the
    cost of a bulk load was the round trips, 3.3 ms a row at 100,000 tools). The vector (the
    eighth column) goes as pgvector's text, written from a list of Python floats: pgvector's
    own dumper formats NumPy scalars one by one, a millisecond a 384-dimensional vector."""
    from psycopg import sql

    statement = sql.SQL("COPY {}.tools ({}) FROM STDIN").format(
        sql.Identifier(schema), sql.SQL(_CONTENT_COLUMNS)
    )
    with conn.cursor() as cur, cur.copy(statement) as copy:
        for row in rows:
            copy.write_row((*row[:7], _vector_text(row[7]), *row[8:]))


def _pgvector_version(conn: psycopg.Connection[Any]) -> tuple[int, ...]:
    row = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()
    parts = str(row[0]).split(".") if row else []
    return tuple(int(part) for part in parts if part.isdigit())


def _message(exc: BaseException) -> str:
    """A database error's first line (libpq messages never carry the password)."""
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def _require_modules() -> None:
    import importlib.util

    missing = [
        m for m in ("psycopg", "psycopg_pool", "pgvector") if not importlib.util.find_spec(m)
    ]
    if missing:
        raise MissingExtraError("postgres", "postgres", missing)


def _check_rank(
    function: object, normalization: object, weights: object
) -> tuple[str, int, tuple[float, float, float, float]]:
    if function not in RANK_FUNCTIONS:
        raise ConfigError(
            f"postgres option rank_function must be one of {', '.join(RANK_FUNCTIONS)}, "
            f"got {function!r}"
        )
    if (
        isinstance(normalization, bool)
        or not isinstance(normalization, int)
        or not (0 <= normalization < 64)
    ):
        raise ConfigError(
            "postgres option rank_normalization must be a bit mask 0-63 (PostgreSQL's ts_rank "
            f"normalization), got {normalization!r}"
        )
    if isinstance(weights, str) or not isinstance(weights, Sequence) or len(weights) != 4:
        raise ConfigError(
            "postgres option rank_weights must be four numbers (labels D, C, B, A), "
            f"got {weights!r}"
        )
    values = []
    for value in weights:
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
            raise ConfigError(
                f"postgres option rank_weights must be numbers between 0 and 1, got {weights!r}"
            )
        values.append(float(value))
    return str(function), normalization, (values[0], values[1], values[2], values[3])


def _count_option(name: str, value: object, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(f"postgres option {name} must be an integer >= {minimum}, got {value!r}")
    return value


_ENCODER_OPTIONS = frozenset(
    {"model", "encoder", "fields", "cache_dir", "batch_size", "device", "threads", "progress"}
)


def _min_similarity(value: object, encoder_options: Mapping[str, Any]) -> float | None:
    """The abstention threshold: ``"default"`` is the calibrated one of the encoder options'
    model, as in the hybrid (:mod:`toolsearch.backends.calibration`), and none for a model or
    text whose similarities are not calibrated."""
    if value == "default":
        return calibrated_min_similarity(encoder_options)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not -1 <= value <= 1:
        raise ConfigError(
            f"postgres option min_similarity must be a cosine in [-1, 1], null or 'default', "
            f"got {value!r}"
        )
    return float(value)


def encoder_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """The encoder's share of a postgres backend's ``options`` (the ``embedding`` backend's
    encoder options), to encode as the backend would without connecting to a server."""
    return _encoder_options({k: v for k, v in options.items() if k in _ENCODER_OPTIONS})


def _encoder_options(options: Mapping[str, Any]) -> dict[str, Any]:
    unknown = sorted(set(options) - _ENCODER_OPTIONS)
    if unknown:
        raise ConfigError(
            f"unknown postgres option(s) {unknown}; see docs/postgres.md for the options"
        )
    chosen = dict(options)
    if chosen.get("encoder") == "hashing":
        chosen["encoder"] = HashingEncoder()
    elif isinstance(chosen.get("encoder"), str):
        raise ConfigError(
            f"postgres option encoder must be an Encoder object or 'hashing', got "
            f"{chosen['encoder']!r}; name a sentence-transformers model with model="
        )
    return chosen
