"""What every encoder shares, below the encoders themselves: the :class:`Encoder` protocol,
a model folder's fingerprint and cache name, and the positive-number check of their options.

:mod:`toolsearch.backends.encoders`, :mod:`toolsearch.backends.onnx_encoder` and
:mod:`toolsearch.backends.embedding_cache` all import from here, never from each other in a
circle.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from toolsearch.errors import ConfigError

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    FloatMatrix = NDArray[np.float32]

__all__ = ["Encoder", "check_positive", "model_fingerprint", "reference_name"]


@runtime_checkable
class Encoder(Protocol):
    """Turns texts into vectors; ``name`` identifies the model in the embedding cache.

    ``encode`` returns a float32 array of shape ``(len(texts), dim)``; rows need not be
    normalised. Two encoders with the same ``name`` must produce the same vectors. An encoder
    whose vector of a text depends on the other texts of its batch says so with
    ``batch_invariant = False`` (the int8 ONNX export), so that callers encode queries alone.
    """

    name: str

    def encode(self, texts: list[str]) -> FloatMatrix:
        """Vectors for ``texts``, one row each."""
        ...


def model_fingerprint(path: Path) -> str:
    """Names, sizes and modification times of a model folder's files: changes when the model
    on disk changes, so cached vectors (and ONNX exports) of an older model are not reused."""
    digest = hashlib.sha256()
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    for file in files:
        stat = file.stat()
        digest.update(f"{file.relative_to(path.parent)}:{stat.st_size}:{stat.st_mtime_ns}".encode())
    return digest.hexdigest()[:16]


def reference_name(model_ref: str, path: Path | None) -> str:
    """The cache name of ``model_ref``'s vectors as the sentence-transformers model computes
    them (the ONNX float32 export computes the same vectors and shares it)."""
    return f"st:{model_ref}#{model_fingerprint(path)}" if path is not None else f"st:{model_ref}"


def check_positive(what: str, value: object) -> int:
    """``value`` when it is a positive integer, else a :class:`ConfigError` naming ``what``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{what} must be a positive integer, got {value!r}")
    return value
