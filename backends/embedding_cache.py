"""The persistent vector cache and cached encoding of texts (docs/speed.md).

Vectors are kept in one SQLite file, ``embeddings.sqlite``, under a cache folder, keyed by the
encoder's ``name`` and a hash of the text, so re-indexing a catalogue re-encodes only texts
that changed, across processes and runs. :func:`encode_cached` is the one way texts become
normalised vectors: from the cache where possible, the rest through the encoder (longest
first in chunks of similar length, with a progress bar for many texts), written back in one
transaction. Encoding many uncached texts is announced once, with a time estimate measured on
a first sample, on the :data:`NOTICE_LOGGER` logger (the ``toolsearch`` command shows it on
stderr; docs/cli.md, "The first call"). Importing this module imports neither numpy nor a
model library.
"""

from __future__ import annotations

import hashlib
import logging
import os
import sqlite3
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any

from toolsearch.errors import BackendError, ConfigError

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    from .encoder_base import Encoder

    FloatMatrix = NDArray[np.float32]

__all__ = [
    "NOTICE_LOGGER",
    "EmbeddingCache",
    "check_vectors",
    "default_cache_dir",
    "encode_cached",
    "normalise",
    "text_key",
]

logger = logging.getLogger(__name__)

# Encoding more texts than this shows a progress bar (when stderr is a terminal).
PROGRESS_MIN_TEXTS = 256
#: The logger that announces one-time slow work (an ONNX export, encoding a catalogue) at INFO:
#: the ``toolsearch`` command prints it on stderr; a library user may attach a handler.
NOTICE_LOGGER = "toolsearch.notice"
notice = logging.getLogger(NOTICE_LOGGER)
# Encoding at least this many uncached texts is announced, timed on a sample of this many.
NOTICE_MIN_TEXTS = 64
_NOTICE_SAMPLE = 16


def default_cache_dir() -> Path:
    """``$TOOLSEARCH_CACHE_DIR``, else ``$XDG_CACHE_HOME/toolsearch``, else
    ``~/.cache/toolsearch``."""
    configured = os.environ.get("TOOLSEARCH_CACHE_DIR", "").strip()
    if configured:
        return Path(configured).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "toolsearch"


def text_key(text: str) -> bytes:
    """The cache key of a text: 16 bytes of BLAKE2b."""
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).digest()


def _create_private(path: Path) -> None:
    """Create ``path`` empty with mode 0600 unless it exists (an existing file keeps the mode
    its owner gave it). A folder that cannot be written is left to SQLite to report."""
    with suppress(OSError):
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))


class EmbeddingCache:
    """Vectors by ``(model name, text hash)`` in one SQLite file, ``embeddings.sqlite``,
    created readable by its owner only (mode 0600, in a folder made 0700).

    SQLite in WAL mode lets several processes read while one writes; a write is one
    transaction, so a crash leaves the previous contents intact. A cache that cannot be read or
    written is skipped (and logged), never fatal to a search.
    """

    FILENAME = "embeddings.sqlite"

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        self.folder = Path(folder).expanduser()
        try:
            # vectors of tool texts can give the texts away: the owner's alone (0700 / 0600)
            self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        except OSError as exc:
            raise ConfigError(
                f"embedding cache_dir {str(self.folder)!r} is not usable: {exc}"
            ) from exc
        self.path = self.folder / self.FILENAME
        self._conn: sqlite3.Connection | None = None

    def _connect(self) -> sqlite3.Connection:
        if self._conn is None:
            _create_private(self.path)  # SQLite gives its -wal and -shm files the same mode
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


# --------------------------------------------------------------------------- cached encoding


def normalise(matrix: FloatMatrix) -> FloatMatrix:
    """Rows scaled to unit length (zero rows stay zero), as a contiguous float32 array."""
    import numpy as np

    return np.ascontiguousarray(matrix / _row_norms(matrix), dtype=np.float32)


def _row_norms(matrix: FloatMatrix) -> FloatMatrix:
    """Each row's length as a column, 1 for zero rows (which so stay zero)."""
    import numpy as np

    norms: FloatMatrix = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return norms


def check_vectors(encoder_name: str, vectors: Any, count: int) -> FloatMatrix:
    """``vectors`` as a float32 ``(count, dim)`` array, or a :class:`BackendError` saying why
    the encoder's output is unusable (wrong shape, NaN or infinite values)."""
    import numpy as np

    array = np.asarray(vectors, dtype=np.float32)
    if array.ndim != 2 or array.shape[0] != count:
        raise BackendError(
            f"encoder {encoder_name!r} returned shape {array.shape} for {count} texts; "
            f"expected ({count}, dim)"
        )
    if not np.isfinite(array).all():
        raise BackendError(f"encoder {encoder_name!r} returned NaN or infinite values")
    return array


def is_cached(encoder: Encoder, texts: Sequence[str], cache: EmbeddingCache | None) -> bool:
    """True when every text's vector is in ``cache`` already (encoding them is then cheap)."""
    if not texts:
        return True
    if cache is None:
        return not getattr(encoder, "cacheable", True)
    keys = list({text_key(text) for text in texts})
    return len(cache.get_many(encoder.name, keys)) == len(keys)


def encode_cached(
    encoder: Encoder,
    texts: Sequence[str],
    cache: EmbeddingCache | None = None,
    *,
    progress: bool | None = None,
    chunk_size: int = 256,
) -> FloatMatrix:
    """Normalised float32 vectors for ``texts`` (one row each, same order), read from
    ``cache`` where present; the rest are encoded and stored. ``progress`` shows a bar
    (None: when there are many texts and stderr is a terminal)."""
    import numpy as np

    unique = list(dict.fromkeys(texts))
    if not unique:
        return np.zeros((0, 0), dtype=np.float32)
    keys = {text: text_key(text) for text in unique}
    vectors: dict[str, FloatMatrix] = {}
    if cache is not None:
        stored = cache.get_many(encoder.name, list(keys.values()))
        for text in unique:
            blob = stored.get(keys[text])
            if blob is not None:
                vectors[text] = np.frombuffer(blob, dtype=np.float32)
    missing = [text for text in unique if text not in vectors]
    if missing:
        where = f"cached in {cache.folder}" if cache is not None else "not cached"
        fresh = _encode_missing(encoder, missing, progress, chunk_size, where)
        for text, row in zip(missing, fresh, strict=True):
            vectors[text] = row
        if cache is not None:
            _store(cache, encoder.name, [(keys[t], vectors[t]) for t in missing])
        if len(missing) >= _TRIM_AFTER:
            release_freed_heap()
    dims = {vectors[text].shape[0] for text in unique}
    if len(dims) != 1:
        raise BackendError(
            f"encoder {encoder.name!r} returned vectors of different sizes {sorted(dims)}"
        )
    # One float32 matrix filled and normalised in place: a large catalogue's vectors are held
    # twice at most (as found or encoded, and here), not once per conversion step.
    out = np.empty((len(texts), dims.pop()), dtype=np.float32)
    for i, text in enumerate(texts):
        out[i] = vectors[text]
    out /= _row_norms(out)
    return out


#: Texts encoded in one call after which freed heap is handed back (:func:`release_freed_heap`).
_TRIM_AFTER = 1000


def release_freed_heap() -> None:
    """Hand the heap that was freed back to the system (glibc's ``malloc_trim``; nothing where
    there is no glibc). After a large cold encode, glibc keeps what ONNX Runtime's batches
    freed, and whatever is built next (the hybrid's lexical indexes) would add to it
    (docs/speed.md, "Memory of a large build")."""
    import ctypes

    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        return


#: Vectors written to the cache per transaction (bounds the bytes copied at once).
_STORE_CHUNK = 4096


def _store(cache: EmbeddingCache, model: str, rows: Sequence[tuple[bytes, Any]]) -> None:
    """Write ``(text hash, vector)`` rows in chunks of :data:`_STORE_CHUNK`."""
    for start in range(0, len(rows), _STORE_CHUNK):
        chunk = rows[start : start + _STORE_CHUNK]
        cache.put_many(model, [(key, int(v.shape[0]), v.tobytes()) for key, v in chunk])


def _progress_console() -> Any:
    """Where the encoding progress bar is drawn: standard error."""
    from rich.console import Console

    return Console(stderr=True)


def _encode_missing(
    encoder: Encoder, texts: list[str], progress: bool | None, chunk_size: int, where: str
) -> FloatMatrix:
    """Encoder output for ``texts``, longest first in chunks of similar length; announced
    (:func:`_announce`) when there are many, with a progress bar when asked or on a terminal."""
    import numpy as np

    show = progress
    if show is None:
        show = len(texts) >= PROGRESS_MIN_TEXTS and sys.stderr.isatty()
    announce = len(texts) >= NOTICE_MIN_TEXTS and notice.isEnabledFor(logging.INFO)
    if not show and not announce:
        return check_vectors(encoder.name, encoder.encode(texts), len(texts))
    order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
    out: FloatMatrix | None = None

    def encode(rows: list[int]) -> None:
        nonlocal out
        part = check_vectors(encoder.name, encoder.encode([texts[i] for i in rows]), len(rows))
        if out is None:
            out = np.empty((len(texts), part.shape[1]), dtype=np.float32)
        out[rows] = part

    if announce:
        sample = _announce(encoder, texts, order, encode, where)
        order = [i for i in order if i not in sample]
    with _progress_bar(show, len(texts), len(texts) - len(order)) as advance:
        for start in range(0, len(order), chunk_size):
            rows = order[start : start + chunk_size]
            encode(rows)
            advance(len(rows))
    assert out is not None
    return out


def _announce(
    encoder: Encoder,
    texts: list[str],
    order: list[int],
    encode: Callable[[list[int]], None],
    where: str,
) -> set[int]:
    """Encode a sample spread over the text lengths, and say how long all ``texts`` will take;
    returns the sample's indices (already encoded)."""
    prepare = getattr(encoder, "prepare", None)
    if callable(prepare):
        prepare()  # a one-time export or model load is not part of the estimate
    sample = order[:: -(-len(order) // _NOTICE_SAMPLE)]
    started = time.perf_counter()
    encode(sample)
    per_text = (time.perf_counter() - started) / len(sample)
    notice.info(
        "encoding %d texts with %s, about %s (once: the vectors are %s)",
        len(texts),
        getattr(encoder, "model_ref", None) or encoder.name,
        _duration(per_text * len(texts)),
        where,
    )
    return set(sample)


def _duration(seconds: float) -> str:
    """A rough duration as a person reads it."""
    if seconds < 90:
        return f"{max(1, round(seconds))} s"
    return f"{round(seconds / 60)} min"


@contextmanager
def _progress_bar(show: bool, total: int, done: int) -> Iterator[Callable[[int], None]]:
    """A transient bar on stderr (or nothing); yields the function that advances it."""
    if not show:
        yield lambda _count: None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

    columns = (
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=_progress_console(), transient=True) as bar:
        task = bar.add_task("embedding tools", total=total, completed=done)
        yield lambda count: bar.advance(task, count)
