"""The engine's look-up structures over a tool pool, updated in proportion to what changed.

:class:`PoolIndex` keeps the pool in pool order, the deferred tools, and the name, lower-cased
name and alias look-ups the fast paths use. :meth:`PoolIndex.set_tools` compares the new pool
with the current one by object identity and, when only a part changed (one MCP server
re-listed), removes and inserts just those tools — sorted lists stay sorted by bisection —
instead of rebuilding everything (docs/security.md, "Updates").
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from dataclasses import dataclass, field

from toolsearch.tool import Tool, is_deferred, pool_order, pool_sort_key

__all__ = ["PoolChange", "PoolIndex"]

#: Above this share of changed tools a full rebuild is cheaper than the incremental path.
_REBUILD_SHARE = 0.25


@dataclass(frozen=True, slots=True)
class PoolChange:
    """What one :meth:`PoolIndex.set_tools` did: tools that left and entered the pool."""

    removed: tuple[Tool, ...] = ()
    added: tuple[Tool, ...] = ()
    rebuilt: bool = False


@dataclass(slots=True)
class _MultiMap:
    """Key → the tools having it; a look-up returns the first in pool order."""

    items: dict[str, list[Tool]] = field(default_factory=dict)

    def add(self, key: str, tool: Tool) -> None:
        self.items.setdefault(key, []).append(tool)

    def discard(self, key: str, tool: Tool) -> None:
        tools = self.items.get(key)
        if tools is not None:
            tools[:] = [t for t in tools if t is not tool]
            if not tools:
                del self.items[key]

    def first(self, key: str) -> Tool | None:
        tools = self.items.get(key)
        if not tools:
            return None
        return tools[0] if len(tools) == 1 else min(tools, key=pool_sort_key)


def _dedupe(tools: Iterable[Tool]) -> dict[str, Tool]:
    """The pool's tools by name, with :func:`pool_order`'s rule: a built-in wins a clash with
    an MCP tool, else the first seen."""
    by_name: dict[str, Tool] = {}
    for tool in tools:
        kept = by_name.get(tool.name)
        if kept is None or (kept.mcp and not tool.mcp):
            by_name[tool.name] = tool
    return by_name


class PoolIndex:
    """The pool, its deferred tools and the fast paths' look-ups."""

    def __init__(self) -> None:
        self._clear()

    def _clear(self) -> None:
        self.pool: list[Tool] = []
        self.deferred: list[Tool] = []
        self.by_name: dict[str, Tool] = {}
        self._lower = _MultiMap()
        self._deferred_lower = _MultiMap()
        self._alias = _MultiMap()
        self._deferred_alias = _MultiMap()

    def set_tools(self, tools: Iterable[Tool]) -> PoolChange:
        """Make ``tools`` the pool; returns what left and entered it."""
        wanted = _dedupe(tools)
        current = self.by_name
        removed = [tool for name, tool in current.items() if wanted.get(name) is not tool]
        added = [tool for name, tool in wanted.items() if current.get(name) is not tool]
        if not current or len(removed) + len(added) > _REBUILD_SHARE * max(len(wanted), 1):
            self._rebuild(wanted.values())
            return PoolChange(tuple(removed), tuple(added), rebuilt=True)
        for tool in removed:
            self._remove(tool)
        for tool in added:
            self._insert(tool)
        return PoolChange(tuple(removed), tuple(added))

    def first_lower(self, lowered: str) -> Tool | None:
        """The tool whose lower-cased name is ``lowered`` (deferred tools first)."""
        return self._deferred_lower.first(lowered) or self._lower.first(lowered)

    def first_alias(self, alias: str) -> Tool | None:
        """The tool with ``alias`` among its aliases (deferred tools first)."""
        return self._deferred_alias.first(alias) or self._alias.first(alias)

    def _rebuild(self, tools: Iterable[Tool]) -> None:
        self._clear()
        self.pool = pool_order(tools)
        self.deferred = [tool for tool in self.pool if is_deferred(tool)]
        for tool in self.pool:
            self._index(tool)

    def _index(self, tool: Tool, *, remove: bool = False) -> None:
        deferred = is_deferred(tool)
        keys = [(self._lower, tool.name.lower())]
        keys += [(self._alias, alias) for alias in tool.aliases]
        if deferred:
            keys.append((self._deferred_lower, tool.name.lower()))
            keys += [(self._deferred_alias, alias) for alias in tool.aliases]
        for multimap, key in keys:
            if remove:
                multimap.discard(key, tool)
            else:
                multimap.add(key, tool)
        if remove:
            self.by_name.pop(tool.name, None)
        else:
            self.by_name[tool.name] = tool

    def _insert(self, tool: Tool) -> None:
        key = pool_sort_key(tool)
        bisect.insort(self.pool, tool, key=pool_sort_key)
        if is_deferred(tool):
            self.deferred.insert(bisect.bisect_left(self.deferred, key, key=pool_sort_key), tool)
        self._index(tool)

    def _remove(self, tool: Tool) -> None:
        _drop(self.pool, tool)
        if is_deferred(tool):
            _drop(self.deferred, tool)
        self._index(tool, remove=True)


def _drop(tools: list[Tool], tool: Tool) -> None:
    """Remove ``tool`` (that object) from the pool-ordered list ``tools``."""
    key = pool_sort_key(tool)
    at = bisect.bisect_left(tools, key, key=pool_sort_key)
    while at < len(tools) and pool_sort_key(tools[at]) == key:
        if tools[at] is tool:
            del tools[at]
            return
        at += 1
