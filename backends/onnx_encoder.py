"""A sentence-transformers model exported to ONNX and run without PyTorch (docs/speed.md).

The model's transformer is exported once with ``torch.onnx`` (optionally quantised to int8
with ONNX Runtime's dynamic quantisation, one scale per output channel of each weight matrix),
in a child process so that the calling process never imports PyTorch or holds its memory, into
``<onnx_dir>/<fingerprint>-<scheme>.onnx`` (:data:`SCHEMES`),
``fingerprint`` being the model folder's :func:`~toolsearch.backends.encoders.model_fingerprint`.
Later processes load that file with ONNX Runtime and tokenise with the model's own
``tokenizer.json`` through the ``tokenizers`` library: no PyTorch import. Pooling and
normalisation follow the model's sentence-transformers configuration (``modules.json``,
``1_Pooling/config.json``, ``sentence_bert_config.json``), so the float32 export gives the
vectors of :class:`~toolsearch.backends.encoders.SentenceTransformerEncoder` (equal to about
1e-6) and shares its cache name.

Beside each export, a small JSON file records its size, modification time and the vectors it
gives two probe texts. A file that does not match its record, fails to load or no longer
reproduces the probe vectors is reported in a warning and exported again; it is never used.

float32 texts are encoded longest first in batches of similar length, one batch after another,
each across ``threads`` ONNX Runtime intra-op threads (default: the usable cores); int8 texts
each alone, one per core, since dynamic quantisation scales a run's activations together and a
text's vector must not depend on its batch. A single text (a long task query) uses every core
(docs/speed.md).
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import signal
import subprocess
import sys
import tempfile
import threading
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from toolsearch.errors import BackendError, MissingExtraError

from .embedding_cache import notice
from .encoder_base import check_positive, model_fingerprint, reference_name

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    FloatMatrix = NDArray[np.float32]
    IntMatrix = NDArray[np.int64]

__all__ = [
    "ATTENTION",
    "PRECISIONS",
    "OnnxEncoder",
    "export_in_child",
    "export_onnx",
    "onnx_unavailable_reason",
]

logger = logging.getLogger(__name__)

#: Weight formats of the export: float32 (same vectors as PyTorch) or dynamic int8.
PRECISIONS: tuple[str, ...] = ("fp32", "int8")
#: How each precision is made, as named in export files and vector cache names: int8 weights
#: carry one scale per output channel (per-tensor scales moved vectors six times further;
#: docs/speed.md), and the graph computes attention as plain matrix products ("eager"), so
#: vectors of an earlier export are never reused.
SCHEMES: dict[str, str] = {"fp32": "fp32", "int8": "int8-channel-eager"}
#: How each precision's vectors are made, as named in the vector cache: int8 texts are each
#: encoded alone, so vectors cached from batches (the scheme's name alone) are never reused.
_VECTORS: dict[str, str] = {"fp32": "fp32", "int8": "int8-channel-eager-alone"}

#: How the export computes attention (transformers' ``attn_implementation``): "eager", the
#: plain matrix products and softmax, which ONNX Runtime runs faster than the graph exported
#: from "sdpa", PyTorch's fused attention (``benchmarks/bench_export.py``, docs/speed.md).
ATTENTION = "eager"
# Version of the export's graph and record: files of another version are exported again
# (2: attention exported as :data:`ATTENTION`).
_FORMAT = 2
_PROBES = ("create a pull request on github", "read a file from the local disk")
# A loaded export must reproduce its recorded probe vectors to this (cosine distance).
_PROBE_TOLERANCE = 1e-4
# Padded tokens of one batch at most: bounds the attention buffers (rows x heads x width^2),
# which glibc's allocator keeps after each batch. 512 halves the peak memory of a cold build
# against 4096 and encodes no slower (docs/speed.md, "Batches").
_BATCH_TOKENS = 512
# Texts tokenised at once (their full encodings are dropped after each chunk).
_TOKENIZE_CHUNK = 2048
# Characters read per word piece the model reads: a text is cut to this many times the model's
# maximum length before tokenising, as the tokenizer truncates only after encoding the whole
# text (a 4 MB text cost seconds and a gigabyte). A word piece covers at most 100 characters
# (longer words are one unknown piece), so the cut changes only texts with long runs of
# blanks before their last read piece.
_CHARS_PER_PIECE = 128
_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
_POOLING_MODES = {
    "pooling_mode_mean_tokens": "mean",
    "pooling_mode_cls_token": "cls",
    "pooling_mode_max_tokens": "max",
}


@dataclass(frozen=True)
class ModelLayout:
    """What the ONNX path needs from a sentence-transformers folder."""

    pooling: str
    max_seq_length: int
    tokenizer: Path


def read_layout(path: Path) -> ModelLayout | str:
    """The model's layout, or why the ONNX path cannot reproduce it."""
    try:
        modules = json.loads((path / "modules.json").read_text())
        types = [str(m["type"]).rsplit(".", 1)[-1] for m in modules]
        if types not in (["Transformer", "Pooling"], ["Transformer", "Pooling", "Normalize"]):
            return f"its modules {types} are not transformer + pooling (+ normalize)"
        pooling_dir = next(str(m["path"]) for m in modules if m["type"].endswith("Pooling"))
        pooling = json.loads((path / pooling_dir / "config.json").read_text())
        if isinstance(pooling.get("pooling_mode"), str):  # sentence-transformers >= 6
            modes = (
                [pooling["pooling_mode"]]
                if pooling["pooling_mode"] in ("mean", "cls", "max")
                else []
            )
            others = [pooling["pooling_mode"]]
        else:
            modes = [mode for key, mode in _POOLING_MODES.items() if pooling.get(key)]
            others = [k for k, v in pooling.items() if k.startswith("pooling_mode") and v]
        if len(modes) != 1 or len(others) != 1:
            return f"its pooling {others} is not exactly one of mean, cls or max"
        max_len = _max_seq_length(path)
    except (OSError, ValueError, KeyError, TypeError, StopIteration) as exc:
        return f"its sentence-transformers configuration is unreadable ({exc})"
    tokenizer = path / "tokenizer.json"
    if not tokenizer.is_file():
        return "it has no tokenizer.json"
    return ModelLayout(modes[0], max_len, tokenizer)


def _max_seq_length(path: Path) -> int:
    """Word pieces the model reads: sentence-transformers' ``max_seq_length`` (older folders
    keep it in ``sentence_bert_config.json``, newer ones as the tokenizer's
    ``model_max_length``), else BERT's 512."""
    config = json.loads((path / "sentence_bert_config.json").read_text())
    if config.get("max_seq_length"):
        return int(config["max_seq_length"])
    tokenizer_config = path / "tokenizer_config.json"
    if tokenizer_config.is_file():
        found = json.loads(tokenizer_config.read_text()).get("model_max_length")
        if isinstance(found, int) and 0 < found <= 8192:
            return found
    return 512


def onnx_unavailable_reason(
    path: Path | None, onnx_dir: Path, device: str, precision: str
) -> str | None:
    """Why the ONNX path cannot serve this model here, or None when it can."""
    missing = [m for m in ("onnxruntime", "tokenizers", "numpy") if not importlib.util.find_spec(m)]
    if missing:
        return f"{', '.join(missing)} not installed"
    if device != "cpu":
        return f"device {device!r} (the ONNX path runs on the CPU)"
    if path is None or not path.is_dir():
        return "it is not a local model folder"
    layout = read_layout(path)
    if isinstance(layout, str):
        return layout
    target = export_path(onnx_dir, path, precision)
    if target.is_file():
        return None
    if not importlib.util.find_spec("torch"):
        return f"no export in {onnx_dir} yet and exporting needs torch"
    if not _writable(onnx_dir):
        return f"the export folder {onnx_dir} is not writable"
    return None


def _writable(folder: Path) -> bool:
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return False
    return os.access(folder, os.W_OK | os.X_OK)


def export_path(onnx_dir: Path, model_path: Path, precision: str) -> Path:
    """Where the export of ``model_path`` in ``precision`` lives."""
    return onnx_dir / f"{model_fingerprint(model_path)}-{SCHEMES[precision]}.onnx"


class OnnxEncoder:
    """A local sentence-transformers model run with ONNX Runtime (see the module docstring).

    ``model_ref`` names the model (as given to the backend), ``path`` is its folder,
    ``onnx_dir`` holds exports. The export and the session are made on first use.
    """

    cacheable: ClassVar[bool] = True

    def __init__(
        self,
        model_ref: str,
        path: Path,
        onnx_dir: Path,
        *,
        precision: str = "fp32",
        batch_size: int = 64,
        threads: int | None = None,
    ) -> None:
        layout = read_layout(path)
        if isinstance(layout, str):
            raise BackendError(f"embedding model {model_ref!r} cannot run with ONNX: {layout}")
        if precision not in PRECISIONS:
            raise BackendError(f"ONNX precision must be one of {PRECISIONS}, got {precision!r}")
        self.model_ref = model_ref
        self.path = path
        self.layout = layout
        self.precision = precision
        self.batch_size = check_positive("batch_size", batch_size)
        self.threads = check_positive("threads", threads) if threads is not None else _cores()
        self.file = export_path(onnx_dir, path, precision)
        base = reference_name(model_ref, path)
        self.name = base if precision == "fp32" else f"onnx-{_VECTORS[precision]}:{base[3:]}"
        #: A text's vector is the same in any batch: int8, whose dynamic quantisation would
        #: scale a batch's activations together, encodes each text alone (docs/speed.md).
        self.batch_invariant = True
        self._session: Any = None
        self._tokenizer: Any = None
        self._single: Any = None
        self._lock = threading.Lock()

    # ----------------------------------------------------------------- loading

    def prepare(self) -> None:
        """Load the session now, exporting the model first if no usable export exists, so a
        caller can do the one-time work (or time it) before the first encode."""
        self._load()

    def _load(self) -> tuple[Any, Any]:
        with self._lock:
            if self._session is None:
                self._tokenizer = _tokenizer(self.layout)
                self._session = self._verified_session()
            return self._session, self._tokenizer

    def _verified_session(self) -> Any:
        """A session on a verified export, exporting (again) when needed."""
        if self.file.is_file():
            problem, session = _check_export(
                self.file, self._tokenizer, self.layout.pooling, self.threads
            )
            if problem is None:
                return session
            logger.warning(
                "ONNX export %s is unusable (%s); exporting it again", self.file, problem
            )
        if _export_interrupted.is_set():
            raise KeyboardInterrupt  # this process is being stopped: no second export
        notice.info(
            "exporting %s to ONNX (%s) once, usually well under a minute; later runs load %s",
            self.model_ref,
            self.precision,
            self.file.parent,
        )
        export_in_child(self.path, self.file, self.precision)
        problem, session = _check_export(
            self.file, self._tokenizer, self.layout.pooling, self.threads
        )
        if problem is not None:
            raise BackendError(f"ONNX export {self.file} is unusable right after export: {problem}")
        return session

    # ----------------------------------------------------------------- encoding

    def encode(self, texts: list[str]) -> FloatMatrix:
        """Pooled vectors for ``texts`` (not normalised; the backend normalises)."""
        import numpy as np

        session, tokenizer = self._load()
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        tokens = _tokenize(tokenizer, texts)
        lengths = [len(ids) for ids, _ in tokens]
        order = sorted(range(len(texts)), key=lambda i: -lengths[i])
        if self.precision == "int8" and len(texts) > 1:
            return self._encode_each(tokens, order)
        batches = _batches(order, lengths, self.batch_size)

        pooling = self.layout.pooling
        parts = [_run_batch(session, [tokens[i] for i in rows], pooling) for rows in batches]
        out = np.empty((len(texts), parts[0].shape[1]), dtype=np.float32)
        for rows, part in zip(batches, parts, strict=True):
            out[rows] = part
        return out

    def _encode_each(self, tokens: list[tuple[Any, Any]], order: list[int]) -> FloatMatrix:
        """Each text in a batch of one on a single-threaded session, one text per core
        (longest first): int8 activations are scaled per run, so a text's vector must not
        depend on the texts encoded with it."""
        import numpy as np

        session, _ = self._single_session()
        pooling = self.layout.pooling

        def one(i: int) -> FloatMatrix:
            return _run_batch(session, [tokens[i]], pooling)

        with ThreadPoolExecutor(self.threads, thread_name_prefix="onnx-each") as pool:
            parts = list(pool.map(one, order))
        out = np.empty((len(tokens), parts[0].shape[1]), dtype=np.float32)
        for i, part in zip(order, parts, strict=True):
            out[i] = part[0]
        return out

    def encode_alone(self, text: str) -> FloatMatrix:
        """``text`` encoded alone (a batch of one: the vector a search of it gets, int8
        included) on one thread, so that several texts can run side by side, one per core
        (the embedding backend's ``queries_ahead``); for one short text, splitting its work
        over threads costs more than it saves (docs/speed.md)."""
        session, tokenizer = self._single_session()
        return _run_batch(session, _tokenize(tokenizer, [text]), self.layout.pooling)

    def _single_session(self) -> tuple[Any, Any]:
        """A single-threaded session on the verified export (made on first use)."""
        _, tokenizer = self._load()
        with self._lock:
            if self._single is None:
                self._single = _new_session(self.file, 1)
            return self._single, tokenizer


def _batches(order: list[int], lengths: list[int], batch_size: int) -> list[list[int]]:
    """Consecutive runs of ``order`` (longest first) of at most ``batch_size`` texts and
    :data:`_BATCH_TOKENS` padded tokens, so a batch of long texts stays small in memory."""
    batches: list[list[int]] = []
    current: list[int] = []
    for i in order:
        width = lengths[current[0]] if current else lengths[i]
        if current and (len(current) >= batch_size or (len(current) + 1) * width > _BATCH_TOKENS):
            batches.append(current)
            current = []
        current.append(i)
    if current:
        batches.append(current)
    return batches


def _cores() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def _tokenizer(layout: ModelLayout) -> Any:
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(layout.tokenizer))
    tokenizer.no_padding()
    tokenizer.enable_truncation(layout.max_seq_length)
    return tokenizer


def _tokenize(tokenizer: Any, texts: list[str]) -> list[tuple[Any, Any]]:
    """``(token ids, type ids)`` of each text as small int32 arrays, tokenised in chunks so
    the tokenizer's full encodings (offsets, strings) of a large catalogue never coexist; each
    text cut first to what the model can read (:data:`_CHARS_PER_PIECE`)."""
    import numpy as np

    truncation = tokenizer.truncation
    limit = truncation["max_length"] * _CHARS_PER_PIECE if truncation else None
    out: list[tuple[Any, Any]] = []
    for start in range(0, len(texts), _TOKENIZE_CHUNK):
        chunk = [text[:limit] for text in texts[start : start + _TOKENIZE_CHUNK]]
        encodings = (
            tokenizer.encode_batch(chunk) if len(chunk) > 1 else [tokenizer.encode(chunk[0])]
        )
        out.extend(
            (np.asarray(e.ids, dtype=np.int32), np.asarray(e.type_ids, dtype=np.int32))
            for e in encodings
        )
    return out


def _run_batch(session: Any, tokens: list[tuple[Any, Any]], pooling: str) -> FloatMatrix:
    """Pad one batch to its longest text, run the transformer, pool as configured."""
    import numpy as np

    width = max(len(ids) for ids, _ in tokens)
    ids = np.zeros((len(tokens), width), dtype=np.int64)
    mask = np.zeros_like(ids)
    types = np.zeros_like(ids)
    for row, (token_ids, type_ids) in enumerate(tokens):
        n = len(token_ids)
        ids[row, :n] = token_ids
        mask[row, :n] = 1
        types[row, :n] = type_ids
    feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
    wanted = {i.name for i in session.get_inputs()}
    output = session.run(None, {k: v for k, v in feeds.items() if k in wanted})[0]
    return pool_tokens(output, mask, pooling)


def pool_tokens(tokens: Any, mask: IntMatrix, pooling: str) -> FloatMatrix:
    """Sentence vectors from token vectors as sentence-transformers' ``Pooling`` computes them."""
    import numpy as np

    if pooling == "cls":
        return np.ascontiguousarray(tokens[:, 0], dtype=np.float32)
    weights = mask[..., None].astype(np.float32)
    if pooling == "max":
        return np.asarray(np.where(weights > 0, tokens, -1e9).max(axis=1), dtype=np.float32)
    summed = (tokens * weights).sum(axis=1)
    return np.asarray(summed / np.clip(weights.sum(axis=1), 1e-9, None), dtype=np.float32)


# --------------------------------------------------------------------------- export + check


def _record_path(file: Path) -> Path:
    return file.with_suffix(".json")


def _runtime() -> Any:
    """onnxruntime, imported after numpy. Its C extension imports numpy itself and turns a
    Ctrl-C that lands there into ``ImportError: import numpy failed``, which must not read as
    a broken export; numpy imported first (pure Python) stops the Ctrl-C as it should."""
    import numpy  # noqa: F401
    import onnxruntime

    return onnxruntime


def _new_session(file: Path, threads: int = 1) -> Any:
    ort = _runtime()
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    # Idle workers sleep instead of spinning, so they leave the cores to numpy's scoring.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    options.enable_cpu_mem_arena = False  # the arena keeps the largest batch's buffers for good
    return ort.InferenceSession(str(file), options, providers=["CPUExecutionProvider"])


def _probe_vectors(session: Any, tokenizer: Any, pooling: str) -> FloatMatrix:
    from .embedding_cache import normalise

    return normalise(_run_batch(session, _tokenize(tokenizer, list(_PROBES)), pooling))


def _check_export(
    file: Path, tokenizer: Any, pooling: str, threads: int = 1
) -> tuple[str | None, Any]:
    """``(None, session)`` for an export that matches its record, else ``(problem, None)``."""
    import numpy as np

    _runtime()  # an import that fails says nothing about the file: not caught below
    try:
        record = json.loads(_record_path(file).read_text())
        stat = file.stat()
    except (OSError, ValueError) as exc:
        return f"its record is missing or unreadable ({exc})", None
    if record.get("format") != _FORMAT or record.get("size") != stat.st_size:
        return "its size or format differs from the record written at export", None
    try:
        session = _new_session(file, threads)
        probes = _probe_vectors(session, tokenizer, pooling)
    except Exception as exc:  # onnxruntime raises its own exception types for bad files
        return f"ONNX Runtime cannot run it ({type(exc).__name__}: {exc})", None
    expected = np.asarray(record.get("probes", []), dtype=np.float32)
    if (
        expected.shape != probes.shape
        or (1 - (expected * probes).sum(axis=1)).max() > _PROBE_TOLERANCE
    ):
        return "it no longer gives the vectors recorded at export", None
    return None, session


def export_onnx(
    model_path: Path,
    target: Path,
    precision: str,
    tokenizer: Any,
    pooling: str,
    attention: str = ATTENTION,
) -> None:
    """Export the transformer of ``model_path`` to ``target`` (int8: quantised after export)
    and write its record; the file appears atomically. Needs torch and transformers.
    ``attention`` is transformers' ``attn_implementation`` to export (benchmarks compare)."""
    try:
        import torch
        from transformers import AutoModel
    except ImportError as exc:
        raise MissingExtraError("embedding", "embedding", [exc.name or "torch"]) from exc
    target.parent.mkdir(parents=True, exist_ok=True)
    logger.info("exporting %s to ONNX (%s) at %s", model_path, precision, target)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".export-") as scratch:
        fp32 = Path(scratch) / "model.onnx"
        model = AutoModel.from_pretrained(
            str(model_path), local_files_only=True, attn_implementation=attention
        ).eval()
        _torch_export(torch, model, fp32)
        produced = fp32
        if precision == "int8":
            from onnxruntime.quantization import QuantType, quantize_dynamic

            produced = Path(scratch) / "model-int8.onnx"
            root = logging.getLogger()
            level = root.level
            root.setLevel(logging.ERROR)  # the quantiser's advice to pre-process, on every run
            try:
                quantize_dynamic(
                    str(fp32), str(produced), weight_type=QuantType.QInt8, per_channel=True
                )
            finally:
                root.setLevel(level)
        probes = _probe_vectors(_new_session(produced), tokenizer, pooling)
        reference = _torch_probes(torch, model, tokenizer, pooling)
        drift = float((1 - (reference * probes).sum(axis=1)).max())
        if precision == "fp32" and drift > _PROBE_TOLERANCE:
            raise BackendError(f"ONNX export of {model_path} disagrees with PyTorch ({drift:.2e})")
        os.replace(produced, target)
        record = {
            "format": _FORMAT,
            "precision": precision,
            "model": str(model_path),
            "size": target.stat().st_size,
            "probes": probes.tolist(),
            "drift_from_torch": drift,
        }
        _record_path(target).write_text(json.dumps(record))


# Exit status of the export child when torch or transformers is missing.
_MISSING_EXTRA_STATUS = 3
# Seconds the export child may take (about 20 on two idle cores) before it counts as failed.
_EXPORT_TIMEOUT = 1800.0


#: Set once an export child was stopped by SIGINT: the process is being interrupted.
_export_interrupted = threading.Event()


def export_in_child(model_path: Path, target: Path, precision: str) -> None:
    """:func:`export_onnx` run in a fresh Python process (``python -m`` this module), so that
    PyTorch is imported, and its memory held, only there; its errors come back as they were."""
    command = [sys.executable, "-m", __name__, str(model_path), str(target), precision]
    logger.info("exporting %s to ONNX (%s) in a child process", model_path, precision)
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, check=False, timeout=_EXPORT_TIMEOUT
        )
    except subprocess.TimeoutExpired as exc:
        raise BackendError(
            f"ONNX export of {model_path} took over {_EXPORT_TIMEOUT:.0f} s and was stopped"
        ) from exc
    if done.returncode == 0:
        return
    if done.returncode in (-signal.SIGINT, 128 + signal.SIGINT):
        # Ctrl-C in a terminal reaches the whole process group: the child too, whichever
        # thread of this process waits for it. Stopped, not failed (no retry, no error).
        _export_interrupted.set()
        raise KeyboardInterrupt
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    reason = lines[-1] if lines else f"exit status {done.returncode}"
    if done.returncode == _MISSING_EXTRA_STATUS:
        raise MissingExtraError("embedding", "embedding", [reason])
    raise BackendError(f"ONNX export of {model_path} failed: {reason}")


def _export_main(argv: list[str]) -> int:
    """The export child: ``MODEL_PATH TARGET PRECISION``; a missing extra exits with
    :data:`_MISSING_EXTRA_STATUS` and the missing module's name as the last stderr line."""
    model_path, target, precision = Path(argv[0]), Path(argv[1]), argv[2]
    layout = read_layout(model_path)
    if isinstance(layout, str):
        print(f"the model cannot run with ONNX: {layout}", file=sys.stderr)
        return 2
    try:
        export_onnx(model_path, target, precision, _tokenizer(layout), layout.pooling)
    except MissingExtraError as exc:
        print(", ".join(exc.missing) if exc.missing else "torch", file=sys.stderr)
        return _MISSING_EXTRA_STATUS
    except BackendError as exc:
        print(str(exc), file=sys.stderr)
        return 2
    return 0


class _TokenEmbeddings:
    """The transformer as a module of three tensors returning the token vectors."""

    @staticmethod
    def wrap(torch: Any, model: Any) -> Any:
        class Wrapped(torch.nn.Module):  # type: ignore[misc]
            def __init__(self) -> None:
                super().__init__()
                self.model = model

            def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
                out = self.model(
                    input_ids=input_ids,
                    attention_mask=attention_mask,
                    token_type_ids=token_type_ids,
                )
                return out.last_hidden_state

        return Wrapped().eval()


def _torch_export(torch: Any, model: Any, file: Path) -> None:
    ids = torch.ones(2, 8, dtype=torch.long)
    axes = {name: {0: "batch", 1: "tokens"} for name in (*_INPUTS, "token_embeddings")}
    with warnings.catch_warnings(), torch.inference_mode():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            _TokenEmbeddings.wrap(torch, model),
            (ids, torch.ones_like(ids), torch.zeros_like(ids)),
            str(file),
            input_names=list(_INPUTS),
            output_names=["token_embeddings"],
            dynamic_axes=axes,
            opset_version=17,
            dynamo=False,
        )


def _torch_probes(torch: Any, model: Any, tokenizer: Any, pooling: str) -> FloatMatrix:
    """The probe vectors computed by PyTorch, to check the export against."""
    import numpy as np

    from .embedding_cache import normalise

    encodings = tokenizer.encode_batch(list(_PROBES))
    width = max(len(e.ids) for e in encodings)
    ids = np.zeros((len(encodings), width), dtype=np.int64)
    mask = np.zeros_like(ids)
    for row, enc in enumerate(encodings):
        ids[row, : len(enc.ids)] = enc.ids
        mask[row, : len(enc.ids)] = 1
    with torch.inference_mode():
        tokens = model(
            input_ids=torch.from_numpy(ids),
            attention_mask=torch.from_numpy(mask),
            token_type_ids=torch.zeros_like(torch.from_numpy(ids)),
        ).last_hidden_state.numpy()
    return normalise(pool_tokens(tokens, mask, pooling))


if __name__ == "__main__":
    raise SystemExit(_export_main(sys.argv[1:]))
