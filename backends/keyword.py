"""Backend ``keyword``: Claude Code's ToolSearch keyword scorer, reproduced exactly.

Per scoring term (required terms first, then optional), added up per tool:

=====================================================  =========  =====
condition                                              MCP tool   other
=====================================================  =========  =====
term equals a name part                                +12        +10
else term is a substring of a name part                +6         +5
the full name contains it and the running score is 0   +3         +3
the search hint matches it as a whole word             +4         +4
the description matches it as a whole word             +2         +2
=====================================================  =========  =====

Tools failing the ``+required`` filter are dropped; scores above zero are kept, best first,
ties in pool order. Like the other lexical backends, a query is cut to its first 1,024 terms
(``MAX_QUERY_TOKENS``): a query is a request, and a megabyte of terms must not stall every other
search. The index precomputes name parts and lower-cased texts once, so a query is a
handful of dictionary look-ups rather than a regex per tool per term; ``upsert`` and ``remove``
change only the tools they name and give exactly the results of a rebuild
(docs/security.md, "Updates").
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Iterable, Sequence
from typing import Any, ClassVar

from toolsearch.backend import BaseBackend, Hit
from toolsearch.matching import TermIndex
from toolsearch.query import ParsedQuery
from toolsearch.tokenize import MAX_QUERY_TOKENS
from toolsearch.tool import Tool, pool_sort_key

__all__ = ["KeywordBackend", "KeywordWeights"]


class KeywordWeights:
    """The anchor's weights (named so tests and docs can refer to them)."""

    EXACT_PART_MCP = 12
    EXACT_PART = 10
    PART_SUBSTRING_MCP = 6
    PART_SUBSTRING = 5
    FULL_NAME = 3
    SEARCH_HINT = 4
    DESCRIPTION = 2


class KeywordBackend(BaseBackend):
    """Reference keyword scorer of Claude Code's ToolSearch (name parts, hint, description)."""

    name: ClassVar[str] = "keyword"
    incremental: ClassVar[bool] = True
    #: ``+447700900123`` is a required term, as in the reference (toolsearch.query).
    reference_syntax: ClassVar[bool] = True

    def __init__(self) -> None:
        super().__init__()
        self._terms = TermIndex()
        self._ids: dict[str, int] = {}
        self._mcp: list[bool] = []
        # What breaks a tie between two ids: pool_sort_key when the index is in pool order
        # (always, once it was updated), else the position in the sequence given to index().
        self._tie: list[Any] = []
        self._pool_ordered = True

    def _build(self, tools: list[Tool]) -> None:
        keys = [pool_sort_key(tool) for tool in tools]
        self._pool_ordered = all(a < b for a, b in itertools.pairwise(keys))
        self._terms = TermIndex(tools)
        self._ids = {tool.name: i for i, tool in enumerate(tools)}
        self._mcp = [parsed.is_mcp for parsed in self._terms.parsed]
        self._tie = keys if self._pool_ordered else list(range(len(tools)))

    def upsert(self, tools: Sequence[Tool]) -> None:
        """Add ``tools``, replacing same-named ones, touching only them: the result equals
        an index of the merged tools in pool order."""
        if not self._pool_ordered:
            super().upsert(tools)
            self._pool_ordered = True
            return
        batch = {tool.name: tool for tool in tools}
        self._drop(batch)
        self._tools.update(batch)
        ids = self._terms.add(batch.values())
        for tool_id, tool in zip(ids, batch.values(), strict=True):
            self._ids[tool.name] = tool_id
            if tool_id == len(self._mcp):
                self._mcp.append(False)
                self._tie.append(None)
            self._mcp[tool_id] = self._terms.parsed[tool_id].is_mcp
            self._tie[tool_id] = pool_sort_key(tool)

    def remove(self, names: Iterable[str]) -> None:
        """Drop the named tools (unknown names are ignored), touching only them."""
        self._drop(names)

    def _drop(self, names: Iterable[str]) -> None:
        gone = [self._ids.pop(name) for name in names if name in self._ids]
        for tool_id in gone:
            tool = self._terms.tools[tool_id]
            if tool is not None:
                del self._tools[tool.name]
        self._terms.discard(gone)

    def search(self, query: ParsedQuery, k: int) -> list[Hit]:
        terms = self._terms
        if k <= 0 or query.is_empty or terms.size == 0:
            return []
        candidates: set[int] | None = None
        if query.required:
            candidates = terms.required_filter(query.required[:MAX_QUERY_TOKENS])
            if not candidates:
                return []
        w = KeywordWeights
        mcp = self._mcp
        scores: dict[int, int] = {}
        for term in query.scoring_terms[:MAX_QUERY_TOKENS]:
            exact = terms.exact_part(term)
            for i in exact:
                scores[i] = scores.get(i, 0) + (w.EXACT_PART_MCP if mcp[i] else w.EXACT_PART)
            exact_set = set(exact)
            for i in terms.substring_part(term):
                if i not in exact_set:
                    scores[i] = scores.get(i, 0) + (
                        w.PART_SUBSTRING_MCP if mcp[i] else w.PART_SUBSTRING
                    )
            for i in terms.irregular_full:
                if scores.get(i, 0) == 0 and terms.full_contains(term, i):
                    scores[i] = w.FULL_NAME
            for i in terms.hint_word(term):
                scores[i] = scores.get(i, 0) + w.SEARCH_HINT
            for i in terms.description_word(term):
                scores[i] = scores.get(i, 0) + w.DESCRIPTION
        ranked = [
            (score, i)
            for i, score in scores.items()
            if score > 0 and (candidates is None or i in candidates)
        ]
        tie = self._tie
        best = heapq.nsmallest(k, ranked, key=lambda pair: (-pair[0], tie[pair[1]]))
        return [Hit(self._name(i), float(score)) for score, i in best]

    def _name(self, tool_id: int) -> str:
        tool = self._terms.tools[tool_id]
        assert tool is not None
        return tool.name

    def params(self) -> dict[str, object]:
        return {"weights": "12/10, 6/5, 3, 4, 2"}


def keyword_search(tools: Sequence[Tool], query: ParsedQuery, k: int) -> list[Hit]:
    """One-shot convenience: index ``tools`` and search them."""
    backend = KeywordBackend()
    backend.index(tools)
    return backend.search(query, k)
