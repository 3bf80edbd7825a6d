"""The benchmark harness's error: bad metric names, options, baselines and BEIR folders.

:class:`BenchError` derives from :class:`toolsearch.errors.LocatedError`, so the CLI turns
it into a one-line message, and carries the file, line and field it is about (when there is
one) in the message, like :class:`toolsearch.errors.CatalogError`.
"""

from __future__ import annotations

from toolsearch.errors import LocatedError

__all__ = ["BenchError"]


class BenchError(LocatedError, ValueError):
    """A benchmark input (metric, option, baseline file, BEIR folder) is invalid."""
