"""Bootstrap confidence intervals of a benchmark mean, over queries.

A headline metric is a mean over queries, so its uncertainty is that of the query sample: the
interval resamples the queries with replacement (the percentile bootstrap; Efron &
Tibshirani, *An Introduction to the Bootstrap*, 1993, ch. 13), 1,000 times with a fixed seed,
so the same per-query values always give the same interval. Two backends whose intervals
overlap widely differ within noise; the paired tests (:mod:`toolsearch.bench.significance`)
are the sharper check, since both backends answer the same queries.
"""

from __future__ import annotations

from collections.abc import Sequence

from toolsearch.bench.errors import BenchError

__all__ = ["CONFIDENCE", "RESAMPLES", "SEED", "bootstrap_interval"]

#: Coverage of the reported intervals.
CONFIDENCE = 0.95
#: Bootstrap resamples per interval.
RESAMPLES = 1000
#: Seed of the resampling, fixed so intervals are reproducible.
SEED = 42


def bootstrap_interval(
    values: Sequence[float],
    *,
    confidence: float = CONFIDENCE,
    resamples: int = RESAMPLES,
    seed: int = SEED,
) -> tuple[float, float]:
    """The percentile-bootstrap interval of the mean of ``values`` (one per query).

    One value gives a zero-width interval; no value is an error (there is no mean).
    """
    if not values:
        raise BenchError("a confidence interval needs at least one query")
    if not 0 < confidence < 1:
        raise BenchError(f"confidence must be between 0 and 1, got {confidence}")
    if resamples < 1:
        raise BenchError(f"resamples must be positive, got {resamples}")
    import numpy as np

    data = np.asarray(values, dtype=float)
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(data), size=(resamples, len(data)))
    means = data[picks].mean(axis=1)
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail])
    return float(low), float(high)
