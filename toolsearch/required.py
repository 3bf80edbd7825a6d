"""The ``+required`` filter's index, kept per server so a change re-indexes only its server.

:class:`~toolsearch.matching.TermIndex` answers "which tools contain every required term"; it
is built over a fixed tool sequence. :class:`RequiredIndex` holds one per server (local tools
form one more group), built on first use, and keeps a group's index across pool updates as
long as that group's tools do not change — so when one MCP server re-lists, a 100k-tool
pool pays for that server's tools only (docs/security.md, "Updates").
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from toolsearch.matching import TermIndex
from toolsearch.tool import Tool

__all__ = ["RequiredIndex"]


class _Group:
    __slots__ = ("index", "indexed", "members")

    def __init__(self) -> None:
        self.members: dict[str, Tool] = {}
        self.index: TermIndex | None = None
        self.indexed: list[Tool] = []


class RequiredIndex:
    """Names of the deferred tools that pass a ``+required`` filter, grouped by server."""

    def __init__(self) -> None:
        self._groups: dict[str | None, _Group] = {}

    def rebuild(self, tools: Iterable[Tool]) -> None:
        """Index ``tools`` (the deferred pool) from nothing."""
        self._groups = {}
        self.apply((), tools)

    def apply(self, removed: Iterable[Tool], added: Iterable[Tool]) -> None:
        """Drop ``removed`` and add ``added`` (deferred tools); only their servers' indexes
        are rebuilt, on the next search that needs them."""
        for tool in removed:
            group = self._groups.get(tool.server)
            if group is not None and group.members.get(tool.name) is tool:
                del group.members[tool.name]
                group.index = None
        for tool in added:
            group = self._groups.setdefault(tool.server, _Group())
            group.members[tool.name] = tool
            group.index = None

    def matching(self, required: Sequence[str]) -> set[str]:
        """Names of the tools containing every term of ``required``."""
        names: set[str] = set()
        for group in self._groups.values():
            if not group.members:
                continue
            if group.index is None:
                group.indexed = list(group.members.values())
                group.index = TermIndex(group.indexed)
            indexed = group.indexed
            names.update(indexed[i].name for i in group.index.required_filter(required))
        return names
