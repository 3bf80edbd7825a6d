"""The ``+required`` filter's index: one :class:`~toolsearch.matching.TermIndex` over the
deferred pool, built on first use and then changed in place, so a search costs the same however
many servers the pool has, and a re-listed server costs its own tools only (docs/security.md,
"Updates").
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from toolsearch.matching import TermIndex
from toolsearch.tool import Tool

__all__ = ["RequiredIndex"]


class RequiredIndex:
    """Names of the deferred tools that pass a ``+required`` filter."""

    def __init__(self) -> None:
        self._tools: dict[str, Tool] = {}
        self._index: TermIndex | None = None
        self._ids: dict[str, int] = {}

    def rebuild(self, tools: Iterable[Tool]) -> None:
        """Index ``tools`` (the deferred pool) from nothing, on the next search that needs it."""
        self._tools = {tool.name: tool for tool in tools}
        self._index = None
        self._ids = {}

    def apply(self, removed: Iterable[Tool], added: Iterable[Tool]) -> None:
        """Drop ``removed`` and add ``added`` (deferred tools); a built index changes for
        those tools only."""
        for tool in removed:
            if self._tools.get(tool.name) is tool:
                del self._tools[tool.name]
                self._drop(tool.name)
        for tool in added:
            self._drop(tool.name)
            self._tools[tool.name] = tool
            if self._index is not None:
                (self._ids[tool.name],) = self._index.add([tool])

    def _drop(self, name: str) -> None:
        tool_id = self._ids.pop(name, None)
        if tool_id is not None and self._index is not None:
            self._index.discard([tool_id])

    def matching(self, required: Sequence[str]) -> set[str]:
        """Names of the tools containing every term of ``required``."""
        if self._index is None:
            tools = list(self._tools.values())
            self._index = TermIndex(tools)
            self._ids = {tool.name: i for i, tool in enumerate(tools)}
        found = self._index.required_filter(required)
        return {tool.name for i in found if (tool := self._index.tools[i]) is not None}
