"""Calibrated "no tool fits" thresholds: the best embedding cosine below which a search abstains.

A threshold only means something for the model whose similarities it was chosen on, so it is
kept per model (:data:`CALIBRATED_MIN_SIMILARITY`) and applies only while the vectors are that
model's: options that say how the model runs (:data:`SCALE_PRESERVING_OPTIONS`) keep it; a
different text, encoder or query adapter drops it. The thresholds were chosen on dev splits by
``lab/ablation.py`` (``lab/retrieval.md``, "Abstention"). The ``hybrid`` and
``postgres`` backends both apply this one rule.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .encoders import BASE_MODEL, DEFAULT_MODEL, TUNED_MODEL

__all__ = [
    "CALIBRATED_MIN_SIMILARITY",
    "SCALE_PRESERVING_OPTIONS",
    "calibrated_min_similarity",
]

#: Per model: the highest threshold that cost at most .01 recall@5 on every dev split with that
#: model in the default hybrid (for :data:`TUNED_MODEL`, on scores of a model of its recipe that
#: never saw the dev split's dataset, chosen again for the broad model; :data:`BASE_MODEL`'s is
#: from when it was the default).
CALIBRATED_MIN_SIMILARITY: Mapping[str, float] = {TUNED_MODEL: 0.23, BASE_MODEL: 0.23}
#: Embedding options that leave the similarity scale as calibrated (how the model runs, not
#: which model or text).
SCALE_PRESERVING_OPTIONS: frozenset[str] = frozenset(
    {
        "runtime",
        "precision",
        "threads",
        "batch_size",
        "cache_dir",
        "device",
        "progress",
        "query_cache_size",
    }
)


def calibrated_min_similarity(options: Mapping[str, Any]) -> float | None:
    """The calibrated threshold for an embedding configured with ``options`` (the embedding
    backend's keyword arguments), or None when its similarities are not a calibrated model's."""
    model = options.get("model")
    model = DEFAULT_MODEL if model is None else model
    if not isinstance(model, str) or set(options) - {"model"} - SCALE_PRESERVING_OPTIONS:
        return None
    return CALIBRATED_MIN_SIMILARITY.get(model)
