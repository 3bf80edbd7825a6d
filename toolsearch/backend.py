"""The search-backend contract: build an index from tools, rank a parsed query.

A backend only ranks (step 4 of ToolSearch dispatch); ``select:``, exact names, the ``mcp__``
prefix and the ``+required`` filter are handled by the engine the same way for every backend.
The contract is a :class:`typing.Protocol`, so a third-party backend type-checks without
inheriting from anything here. Optional capabilities are plain class attributes:

``name``         the registry name (``"bm25"``)
``incremental``  has ``upsert(tools)`` and ``remove(names)`` that give the same results as a rebuild
``persistent``   keeps its index outside the process (a file or cache)
``isolated_writes``  its writes are transactions that searches from other threads never see
                 half-done, so the engine lets searches run while it writes (docs/concurrency.md)
``extra``        the ``toolsearch[...]`` extra that installs its dependencies
``requires``     import names that must be importable for it to work
``server_env``   the environment variable that names the server it needs (``None``: none)
``reference_syntax``  the query is parsed exactly as the reference parses it: a ``+`` followed
                 only by digits is a required term (only ``keyword``; elsewhere it is an
                 ordinary term, a phone number; :func:`toolsearch.query.parse_query`)

Promises every backend keeps (checked by one contract test suite): hits are best first with
score > 0; ties keep pool order (:func:`toolsearch.tool.pool_sort_key`); at most ``k`` hits and
all of them when ``k`` exceeds the catalogue; an empty catalogue or query gives no hits; no
input text ever raises; inputs are never mutated.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar, Protocol, runtime_checkable

from toolsearch.query import ParsedQuery
from toolsearch.tool import Tool, pool_sort_key

__all__ = [
    "BaseBackend",
    "Hit",
    "IncrementalBackend",
    "SearchBackend",
    "hits_to_run",
    "top_hits",
]


@dataclass(frozen=True, slots=True)
class Hit:
    """One ranked tool: its name and the backend's score (higher is better)."""

    name: str
    score: float


@runtime_checkable
class SearchBackend(Protocol):
    """What the engine needs from a ranker."""

    def index(self, tools: Sequence[Tool]) -> None:
        """Replace the index with ``tools`` (given in pool order)."""
        ...

    def search(self, query: ParsedQuery, k: int) -> list[Hit]:
        """The best ``k`` tools for ``query``, best first, scores above zero."""
        ...


@runtime_checkable
class IncrementalBackend(SearchBackend, Protocol):
    """A backend that can change part of its index without rebuilding it."""

    def upsert(self, tools: Sequence[Tool]) -> None:
        """Add ``tools``, replacing indexed tools of the same name."""
        ...

    def remove(self, names: Iterable[str]) -> None:
        """Drop the named tools; unknown names are ignored."""
        ...


class BaseBackend:
    """Optional conveniences for backend authors: capability defaults and an ``upsert`` /
    ``remove`` that rebuild the index, so any backend can be driven incrementally."""

    name: ClassVar[str] = ""
    incremental: ClassVar[bool] = False
    persistent: ClassVar[bool] = False
    isolated_writes: ClassVar[bool] = False
    reference_syntax: ClassVar[bool] = False
    extra: ClassVar[str | None] = None
    requires: ClassVar[tuple[str, ...]] = ()

    def __init__(self) -> None:
        self._tools: dict[str, Tool] = {}

    @property
    def tools(self) -> Mapping[str, Tool]:
        """The indexed tools by name."""
        return self._tools

    def index(self, tools: Sequence[Tool]) -> None:
        self._tools = {tool.name: tool for tool in tools}
        self._build(list(self._tools.values()))

    def upsert(self, tools: Sequence[Tool]) -> None:
        merged = dict(self._tools)
        merged.update((tool.name, tool) for tool in tools)
        self.index(sorted(merged.values(), key=pool_sort_key))

    def remove(self, names: Iterable[str]) -> None:
        drop = set(names)
        self.index([tool for name, tool in self._tools.items() if name not in drop])

    def _build(self, tools: list[Tool]) -> None:
        """Build the index structures for ``tools``; subclasses override."""
        raise NotImplementedError

    def search(self, query: ParsedQuery, k: int) -> list[Hit]:
        raise NotImplementedError

    def params(self) -> dict[str, object]:
        """The settings that shape this backend's ranking, for benchmark reports."""
        return {}


def top_hits(scored: Iterable[tuple[float, Tool]], k: int) -> list[Hit]:
    """Best ``k`` of ``(score, tool)`` pairs with score > 0; ties keep pool order."""
    if k <= 0:
        return []
    positive = ((score, tool) for score, tool in scored if score > 0)
    best = heapq.nsmallest(k, positive, key=lambda pair: (-pair[0], pool_sort_key(pair[1])))
    return [Hit(tool.name, float(score)) for score, tool in best]


def hits_to_run(results: Mapping[str, Sequence[Hit]]) -> dict[str, dict[str, float]]:
    """``{query_id: hits}`` as ``{query_id: {tool: score}}``, the mapping ranx and TREC read."""
    return {qid: {hit.name: hit.score for hit in hits} for qid, hits in results.items()}
