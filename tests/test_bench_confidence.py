"""Bootstrap intervals: reproducible, containing the mean, narrowing with more queries."""

from __future__ import annotations

import pytest

from toolsearch.bench.confidence import bootstrap_interval
from toolsearch.bench.errors import BenchError


def test_interval_is_reproducible_and_contains_the_mean() -> None:
    values = [1.0] * 30 + [0.0] * 10
    low, high = bootstrap_interval(values)
    assert bootstrap_interval(values) == (low, high)
    assert low < 0.75 < high
    assert low > 0.6 and high < 0.9


def test_more_queries_narrow_the_interval() -> None:
    few = bootstrap_interval([1.0, 0.0] * 10)
    many = bootstrap_interval([1.0, 0.0] * 500)
    assert many[1] - many[0] < (few[1] - few[0]) / 3


def test_constant_values_give_a_point_and_empty_input_is_an_error() -> None:
    assert bootstrap_interval([0.5]) == (0.5, 0.5)
    assert bootstrap_interval([1.0, 1.0, 1.0]) == (1.0, 1.0)
    with pytest.raises(BenchError, match="at least one query"):
        bootstrap_interval([])
    with pytest.raises(BenchError, match="confidence"):
        bootstrap_interval([1.0], confidence=1.5)
