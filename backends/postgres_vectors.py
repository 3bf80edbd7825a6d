"""Tool vectors of the ``postgres`` backend: computed as the ``embedding`` backend computes
them, or imported from a file encoded elsewhere.

Encoding a large catalogue with a sentence-transformers model is the slow part of indexing it
(about two hours for a million tools on two cores), so it can run on another machine — one
with a GPU, or the build machine — and be imported: ``toolsearch index --catalog DIR
--export-vectors tools.npz`` writes one vector per distinct embedded text, keyed by the
text's hash, without a database; ``toolsearch index --catalog DIR --vectors tools.npz`` (or
the backend's ``vectors`` option) stores them, and encodes only the texts the file lacks.

The file is a NumPy ``.npz`` archive (read without pickle): ``text_hashes`` (one row of 16 bytes
per embedded text: its BLAKE2b digest, as the ``tools.text_hash`` column holds it), ``vectors``
(float32, one row per hash), ``encoder`` and ``fields`` (the encoder's name and the embedded
fields, which must equal the namespace's: vectors of another model do not compare).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from toolsearch.errors import ConfigError
from toolsearch.tool import Tool

from .embedding import EmbeddingBackend, tool_text

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

__all__ = ["ImportedVectors", "Vectors", "export_vectors", "text_hash"]


def text_hash(text: str) -> bytes:
    """The key of an embedded text (``tools.text_hash``)."""
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).digest()


class Vectors:
    """Vectors exactly as the ``embedding`` backend computes them (its encoder, text, cache
    and query-vector cache), through one ``EmbeddingBackend`` used only for encoding."""

    def __init__(self, options: Mapping[str, Any]) -> None:
        self._embedding = EmbeddingBackend(**options)
        self.fields = tuple(self._embedding.fields)
        self.name = self._embedding.encoder.name

    def text(self, tool: Tool) -> str:
        return tool_text(tool, self.fields)

    def tools(self, texts: Sequence[str]) -> NDArray[np.float32]:
        return self._embedding._encode_texts(texts)

    def query(self, text: str) -> NDArray[np.float32]:
        return self._embedding.query_vector(text)

    def describe(self) -> dict[str, object]:
        return self._embedding.params()


class ImportedVectors:
    """The vectors of an exported file, by text hash (checked against the encoder)."""

    def __init__(self, path: str | Path, vectors: Vectors) -> None:
        import numpy as np

        self.path = Path(path)
        try:
            with np.load(self.path, allow_pickle=False) as archive:
                hashes = archive["text_hashes"]
                matrix = np.asarray(archive["vectors"], dtype=np.float32)
                encoder, fields = str(archive["encoder"]), str(archive["fields"])
        except (OSError, ValueError, KeyError) as exc:
            raise ConfigError(
                f"postgres option vectors: {self.path} is not a vector file written by "
                f"'toolsearch index --export-vectors' ({exc})"
            ) from None
        if (encoder, fields) != (vectors.name, ",".join(vectors.fields)):
            raise ConfigError(
                f"postgres option vectors: {self.path} holds vectors of encoder {encoder!r} "
                f"over fields {fields!r}; this backend encodes with {vectors.name!r} over "
                f"{','.join(vectors.fields)!r}"
            )
        if matrix.ndim != 2 or hashes.shape != (len(matrix), 16):
            raise ConfigError(
                f"postgres option vectors: {self.path} has {len(hashes)} hashes for a "
                f"{'x'.join(map(str, matrix.shape))} matrix"
            )
        self._rows = {key.tobytes(): row for row, key in enumerate(hashes)}
        self._matrix = matrix

    def __len__(self) -> int:
        return len(self._rows)

    def find(self, hashes: Iterable[bytes]) -> dict[bytes, NDArray[np.float32]]:
        """The vectors of those ``hashes`` the file holds."""
        return {h: self._matrix[self._rows[h]] for h in hashes if h in self._rows}


def export_vectors(tools: Sequence[Tool], vectors: Vectors, path: str | Path) -> int:
    """Encode the distinct embedded texts of ``tools`` and write them to ``path`` (``.npz``);
    returns how many. The file is written whole or not at all."""
    import os

    import numpy as np

    texts = {text_hash(text): text for text in map(vectors.text, tools)}
    matrix = vectors.tools(list(texts.values()))
    target = Path(path)
    partial = target.with_name(target.name + ".partial.npz")
    np.savez(
        partial,
        # a byte matrix: NumPy's bytes type would drop a digest's trailing zero bytes
        text_hashes=np.frombuffer(b"".join(texts), dtype=np.uint8).reshape(len(texts), 16),
        vectors=matrix.astype(np.float32),
        encoder=np.array(vectors.name),
        fields=np.array(",".join(vectors.fields)),
    )
    os.replace(partial, target)
    return len(texts)
