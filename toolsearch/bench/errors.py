"""The benchmark harness's error: bad metric names, options, baselines and BEIR folders.

:class:`BenchError` derives from :class:`toolsearch.errors.ToolSearchError`, so the CLI turns
it into a one-line message, and carries the file, line and field it is about (when there is
one) in the message, like :class:`toolsearch.errors.CatalogError`.
"""

from __future__ import annotations

from pathlib import Path

from toolsearch.errors import ToolSearchError

__all__ = ["BenchError"]


class BenchError(ToolSearchError, ValueError):
    """A benchmark input (metric, option, baseline file, BEIR folder) is invalid."""

    def __init__(
        self,
        message: str,
        *,
        path: str | Path | None = None,
        line: int | None = None,
        field: str | None = None,
    ) -> None:
        self.path = str(path) if path is not None else None
        self.line = line
        self.field = field
        where = []
        if self.path is not None:
            where.append(self.path)
        if line is not None:
            where.append(f"line {line}")
        if field is not None:
            where.append(f"field '{field}'")
        super().__init__(f"{', '.join(where)}: {message}" if where else message)
