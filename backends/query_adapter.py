"""A query adapter: a learned linear map on query vectors, trained on one catalogue's labelled
queries, that leaves every tool vector as it is (docs/query-adapter.md).

The embedding backend's query vector ``q`` becomes ``normalise(q + q·W)``. ``W`` (d x d) starts
at zero and is trained by minimising the cross-entropy of a softmax over every tool of the
catalogue (cosine / ``temperature``), so each labelled query is pulled towards its gold tools
and away from all the others. Tool vectors, their cache and the ONNX export are untouched: an
adapter is one small file, quick to train on two cores, and it can be dropped at any time.

Measured by ``lab/query_adapter.py`` (docs/results.md, table "query_adapter"): it lifts the
catalogue it was trained on and not a catalogue it has not seen, so it is an option for teams
with labelled queries of their own catalogue, not part of the default (docs/training.md).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from toolsearch.errors import ConfigError, MissingExtraError

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    from toolsearch.dataset import Dataset, Query
    from toolsearch.tool import Tool

    from .encoder_base import Encoder

    FloatMatrix = NDArray[np.float32]

__all__ = [
    "FORMAT",
    "EncodingBackend",
    "QueryAdapter",
    "TrainingSet",
    "TrainingSettings",
    "load_adapter",
    "train_adapter",
    "train_on_datasets",
    "training_set",
]

#: Version of the adapter file layout.
FORMAT = 1


class EncodingBackend(Protocol):
    """What training reads of an embedding backend (an ``EmbeddingBackend``): its encoder
    and its tool vectors. A protocol, so this module never imports the backend that loads
    its adapters."""

    @property
    def encoder(self) -> Encoder: ...

    def encode_tools(self, tools: Sequence[Tool]) -> FloatMatrix: ...


@dataclass(frozen=True)
class TrainingSettings:
    """How an adapter is trained. The defaults were fixed before any measurement and are not
    tuned on any dataset."""

    steps: int = 300
    batch_size: int = 64
    learning_rate: float = 1e-3
    temperature: float = 0.05
    seed: int = 42

    def __post_init__(self) -> None:
        for name in ("steps", "batch_size"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(
                    f"adapter training: {name} must be a positive integer, got {value!r}"
                )
        for name in ("learning_rate", "temperature"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
                raise ConfigError(
                    f"adapter training: {name} must be a positive number, got {value!r}"
                )


@dataclass(frozen=True)
class QueryAdapter:
    """``W`` and the encoder whose vectors it was trained on (an adapter of another encoder
    would map into a space the tool vectors are not in)."""

    weights: FloatMatrix
    encoder: str
    info: Mapping[str, Any] = field(default_factory=dict)

    @property
    def dim(self) -> int:
        return int(self.weights.shape[0])

    def apply(self, vectors: FloatMatrix) -> FloatMatrix:
        """``normalise(v + v·W)`` for each row of ``vectors``."""
        from .embedding_cache import normalise

        return normalise(vectors + vectors @ self.weights)

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the adapter as an ``.npz`` file (weights and a JSON header); returns the path."""
        import numpy as np

        target = Path(path)
        header = {"format": FORMAT, "encoder": self.encoder, "info": dict(self.info)}
        target.parent.mkdir(parents=True, exist_ok=True)
        with open(target, "wb") as out:
            np.savez(out, weights=self.weights, header=np.array(json.dumps(header)))
        return target


def load_adapter(
    path: str | os.PathLike[str], encoder: str, dim: int | None = None
) -> QueryAdapter:
    """The adapter in ``path`` for vectors of ``encoder``; a :class:`ConfigError` names what is
    wrong (missing or unreadable file, another format, another encoder, another size)."""
    import numpy as np

    source = Path(path).expanduser()
    if not source.is_file():
        raise ConfigError(f"query adapter {str(source)!r} does not exist (or is not a file)")
    try:
        with np.load(source, allow_pickle=False) as data:
            weights = np.asarray(data["weights"], dtype=np.float32)
            header = json.loads(str(data["header"]))
    except (OSError, ValueError, KeyError) as exc:
        raise ConfigError(f"query adapter {str(source)!r} is not an adapter file: {exc}") from exc
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise ConfigError(f"query adapter {str(source)!r} has an unknown format")
    if weights.ndim != 2 or weights.shape[0] != weights.shape[1]:
        raise ConfigError(f"query adapter {str(source)!r} holds no square matrix")
    if header.get("encoder") != encoder:
        raise ConfigError(
            f"query adapter {str(source)!r} was trained on vectors of {header.get('encoder')!r}, "
            f"not of this backend's encoder {encoder!r}; train one for this model and "
            "precision (toolsearch train encodes as [backends.embedding] says)"
        )
    if dim is not None and weights.shape[0] != dim:
        raise ConfigError(
            f"query adapter {str(source)!r} is for {weights.shape[0]}-dimensional vectors, "
            f"the encoder gives {dim}"
        )
    return QueryAdapter(weights, encoder, dict(header.get("info") or {}))


@dataclass(frozen=True)
class TrainingSet:
    """Labelled queries of one catalogue: normalised query vectors (one row a query), each
    query's gold rows of ``tools`` (the softmax shares its target among them), and the
    catalogue's normalised tool vectors."""

    queries: FloatMatrix
    targets: Sequence[Sequence[int]]
    tools: FloatMatrix

    def __post_init__(self) -> None:
        if len(self.targets) == 0:
            raise ConfigError("adapter training: no labelled query to train on")
        if self.queries.ndim != 2 or self.queries.shape[0] != len(self.targets):
            raise ConfigError(
                f"adapter training: {len(self.targets)} target lists for "
                f"{self.queries.shape[0]} query vectors"
            )
        if self.tools.ndim != 2 or self.tools.shape[1] != self.queries.shape[1]:
            raise ConfigError("adapter training: query and tool vectors have different sizes")
        for row, gold in enumerate(self.targets):
            if not gold or any(not 0 <= i < self.tools.shape[0] for i in gold):
                raise ConfigError(
                    f"adapter training: query {row} has no gold tool in its catalogue"
                )


def train_adapter(
    sets: Sequence[TrainingSet],
    *,
    encoder: str,
    settings: TrainingSettings | None = None,
) -> QueryAdapter:
    """Train an adapter on one or more catalogues' labelled queries: every step takes a batch
    of each set and scores it against that set's own catalogue. Deterministic for a given
    ``settings.seed``. Needs PyTorch."""
    settings = settings or TrainingSettings()
    if not sets:
        raise ConfigError("adapter training: no catalogue to train on")
    if len({s.queries.shape[1] for s in sets}) != 1:
        raise ConfigError("adapter training: the catalogues' vectors have different sizes")
    try:
        import torch
    except ImportError as exc:
        raise MissingExtraError("query adapter training", "embedding", ["torch"]) from exc
    torch.manual_seed(settings.seed)
    tensors = [_tensors(torch, s) for s in sets]
    dim = sets[0].queries.shape[1]
    weights = torch.zeros(dim, dim, requires_grad=True)
    optimiser = torch.optim.AdamW([weights], lr=settings.learning_rate, weight_decay=0.0)
    generator = torch.Generator().manual_seed(settings.seed)
    losses = []
    for _ in range(settings.steps):
        loss = sum(_batch_loss(torch, weights, t, settings, generator) for t in tensors)
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        losses.append(loss.item() / len(tensors))
    info = {
        "queries": sum(len(s.targets) for s in sets),
        "tools": sum(int(s.tools.shape[0]) for s in sets),
        "settings": vars(settings),
        "loss_first": round(losses[0], 4),
        "loss_last": round(losses[-1], 4),
    }
    return QueryAdapter(weights.detach().numpy().astype("float32"), encoder, info)


def _tensors(torch: Any, data: TrainingSet) -> tuple[Any, Any, Any]:
    """Queries, tools and the dense target distribution of one set."""
    queries = torch.from_numpy(data.queries.astype("float32"))
    tools = torch.from_numpy(data.tools.astype("float32"))
    target = torch.zeros(len(data.targets), tools.shape[0])
    for row, gold in enumerate(data.targets):
        target[row, list(gold)] = 1.0 / len(gold)
    return queries, tools, target


def _batch_loss(
    torch: Any,
    weights: Any,
    data: tuple[Any, Any, Any],
    settings: TrainingSettings,
    generator: Any,
) -> Any:
    """Mean cross-entropy of a random batch of one set against its whole catalogue."""
    queries, tools, target = data
    rows = torch.randint(queries.shape[0], (settings.batch_size,), generator=generator)
    mapped = queries[rows] + queries[rows] @ weights
    mapped = mapped / mapped.norm(dim=1, keepdim=True)
    log_p = torch.log_softmax(mapped @ tools.T / settings.temperature, dim=1)
    return -(target[rows] * log_p).sum(dim=1).mean()


def training_set(
    backend: EncodingBackend, dataset: Dataset, queries: Sequence[Query]
) -> TrainingSet:
    """The labelled ``queries`` of ``dataset`` (negatives skipped) as ``backend`` sees them:
    tool texts are encoded (and cached) as the backend indexes them."""
    from .embedding_cache import check_vectors, normalise

    labelled = [q for q in queries if dataset.qrels.get(q.id)]
    if not labelled:
        raise ConfigError(f"dataset {dataset.name!r}: no labelled query to train a query adapter")
    tools = list(dataset.tools)
    row_of = {tool.name: i for i, tool in enumerate(tools)}
    encoder = backend.encoder
    texts = [q.text for q in labelled]
    query_vectors = normalise(check_vectors(encoder.name, encoder.encode(texts), len(texts)))
    targets = [[row_of[name] for name in dataset.qrels[q.id]] for q in labelled]
    return TrainingSet(query_vectors, targets, backend.encode_tools(tools))


def train_on_datasets(
    backend: EncodingBackend,
    labelled: Sequence[tuple[Dataset, Sequence[Query]]],
    settings: TrainingSettings | None = None,
) -> QueryAdapter:
    """An adapter for ``backend``'s encoder from ``(dataset, queries)`` pairs."""
    sets = [training_set(backend, dataset, queries) for dataset, queries in labelled]
    adapter = train_adapter(sets, encoder=backend.encoder.name, settings=settings)
    names = [dataset.name for dataset, _ in labelled]
    return QueryAdapter(adapter.weights, adapter.encoder, {"datasets": names, **adapter.info})
