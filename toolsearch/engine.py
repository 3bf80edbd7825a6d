"""The ToolSearch engine: fixed query dispatch over a tool pool, with a pluggable ranker.

Dispatch order (docs/reference-behaviour.md §2), identical for every backend:

1. ``select:a,b`` — exact, case-sensitive names, then aliases (deferred tools first); an alias
   never claims the name of a real tool;
2. exact name — the lower-cased query equals a tool's lower-cased name;
3. ``mcp__`` prefix — deferred tools whose name starts with the query, pool order;
4. ranked search by the backend over the deferred tools, with the ``+required`` filter.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from fasteners import ReaderWriterLock

from toolsearch.backend import IncrementalBackend, SearchBackend
from toolsearch.errors import QueryError
from toolsearch.pool_index import PoolIndex
from toolsearch.query import cut_query, parse_query, parse_select
from toolsearch.required import RequiredIndex
from toolsearch.tokenize import MAX_QUERY_TOKENS
from toolsearch.tool import MCP_PREFIX, TOOL_SEARCH_NAME, Tool, is_deferred

__all__ = [
    "DEFAULT_MAX_RESULTS",
    "DEFAULT_MAX_RESULTS_CAP",
    "NO_MATCH_TEXT",
    "Match",
    "SearchResult",
    "ToolSearch",
    "no_deferred_notice",
    "tool_search_tool",
]

#: Where the engine warns of a search that cannot find anything (a pool without deferred
#: tools); unconfigured logging prints it on stderr, the ``toolsearch`` command as one line.
log = logging.getLogger(__name__)

DEFAULT_MAX_RESULTS = 5
DEFAULT_MAX_RESULTS_CAP = 100
NO_MATCH_TEXT = "No matching deferred tools found"

MatchSource = Literal["select", "exact", "prefix", "ranked"]

TOOL_SEARCH_DESCRIPTION = """\
Fetches full schema definitions for deferred tools so they can be called.

Deferred tools appear by name in <available-deferred-tools> messages. Until fetched, only the \
name is known - there is no parameter schema, so the tool cannot be invoked. This tool takes a \
query, matches it against the deferred tool list, and returns the matched tools' complete \
definitions. Once a tool's definition appears in a result, it is callable exactly like any tool \
defined at the top of the prompt.

Query forms:
- "select:Read,Edit,Grep" - fetch these exact tools by name
- "notebook jupyter" - keyword search, up to max_results best matches
- "+slack send" - require "slack" in the name, description or hint, rank by the remaining terms"""


def tool_search_tool(max_results_cap: int = DEFAULT_MAX_RESULTS_CAP) -> Tool:
    """The ToolSearch tool itself, as sent to the model (never deferred)."""
    schema = {
        "type": "object",
        "properties": {
            "query": {
                "type": "string",
                "description": 'Query to find deferred tools. Use "select:<tool_name>" for '
                "direct selection, or keywords to search.",
            },
            "max_results": {
                "type": "integer",
                "description": "Maximum number of results to return (default: 5)",
                "default": DEFAULT_MAX_RESULTS,
                "minimum": 1,
                "maximum": max_results_cap,
            },
        },
        "required": ["query"],
        "additionalProperties": False,
    }
    return Tool(TOOL_SEARCH_NAME, TOOL_SEARCH_DESCRIPTION, schema, always_load=True)


@dataclass(frozen=True, slots=True)
class Match:
    """A tool a query found; ``score`` is None for the fast paths (steps 1-3)."""

    name: str
    score: float | None
    source: MatchSource


@dataclass(frozen=True, slots=True)
class SearchResult:
    """The internal record of one ToolSearch call, for the model, benchmarks and logs."""

    query: str
    matches: tuple[Match, ...]
    total_deferred_tools: int
    pending_mcp_servers: tuple[str, ...] = field(default=())
    #: Names a ``select:`` query asked for that no tool in the pool has (dropped from matches).
    not_found: tuple[str, ...] = field(default=())
    #: Tools in the pool, deferred or not (0 when unknown).
    total_tools: int = 0

    @property
    def names(self) -> list[str]:
        """Matched tool names, best first."""
        return [m.name for m in self.matches]

    def text(self) -> str:
        """What the model reads when nothing matched (empty when something did)."""
        if self.matches:
            return ""
        if self.pending_mcp_servers:
            servers = ", ".join(self.pending_mcp_servers)
            return (
                f"{NO_MATCH_TEXT}. Some MCP servers are still connecting: {servers}. "
                "Their tools will become available shortly — try searching again."
            )
        return NO_MATCH_TEXT

    def notice(self) -> str:
        """Why nothing could be found, for people reading a result: the pool has tools but
        none is deferred (empty otherwise, and whenever something matched)."""
        if self.matches or self.total_deferred_tools or not self.total_tools:
            return ""
        if self.pending_mcp_servers:
            return ""
        return no_deferred_notice(self.total_tools)

    def not_found_text(self) -> str:
        """Which ``select:`` names matched no tool, for people reading a result; empty when
        every name was found."""
        return f"Not found: {', '.join(self.not_found)}" if self.not_found else ""

    def to_record(self) -> dict[str, Any]:
        """The record ``{matches, query, total_deferred_tools, pending_mcp_servers}``."""
        return {
            "matches": self.names,
            "query": self.query,
            "total_deferred_tools": self.total_deferred_tools,
            "pending_mcp_servers": list(self.pending_mcp_servers),
        }

    def to_json(self) -> dict[str, Any]:
        """The CLI's JSON object: matches with their scores (null for fast-path matches), and
        ``not_found`` when a ``select:`` name matched nothing."""
        data: dict[str, Any] = {
            "query": self.query,
            "matches": [{"name": m.name, "score": m.score} for m in self.matches],
            "total_deferred_tools": self.total_deferred_tools,
            "pending_mcp_servers": list(self.pending_mcp_servers),
        }
        if self.not_found:
            data["not_found"] = list(self.not_found)
        return data


def no_deferred_notice(total_tools: int) -> str:
    """The notice for a pool of ``total_tools`` tools none of which is deferred."""
    return (
        f"none of the pool's {total_tools} tools is deferred, so only select: and exact names "
        "can find them; a tool is deferred when it is an MCP tool or says should_defer "
        "(a catalogue file defers its plain tools unless a record says always_load: true or "
        "should_defer: false)"
    )


class ToolSearch:
    """Searches a tool pool with the fixed dispatch and a configurable ranking backend.

    The pool is re-ordered into pool order and deduplicated; only deferred tools are indexed.
    Permission filtering happens before a pool reaches the engine: a tool that is not in the
    pool cannot be found by any path.
    """

    def __init__(
        self,
        tools: Iterable[Tool] = (),
        *,
        backend: SearchBackend | str | None = None,
        backend_options: Mapping[str, Any] | None = None,
        max_results_cap: int = DEFAULT_MAX_RESULTS_CAP,
        pending_servers: Iterable[str] = (),
    ) -> None:
        if isinstance(max_results_cap, bool) or not isinstance(max_results_cap, int):
            raise QueryError(f"max_results_cap must be an integer, got {max_results_cap!r}")
        if max_results_cap < 1:
            raise QueryError(f"max_results_cap must be at least 1, got {max_results_cap}")
        if backend is None or isinstance(backend, str):
            from toolsearch.config import resolve_backend

            backend = resolve_backend(backend, options=backend_options)
        elif backend_options:
            raise QueryError("backend_options apply only when the backend is given by name")
        self.backend: SearchBackend = backend
        #: ``+`` and digits is required only under the reference rules (toolsearch.query).
        self._reference_syntax = bool(getattr(backend, "reference_syntax", False))
        self.max_results_cap = max_results_cap
        self.pending_servers: tuple[str, ...] = tuple(pending_servers)
        self._index = PoolIndex()
        self._indexed: dict[str, str] = {}
        self._required = RequiredIndex()
        #: Searches share the engine; a pool change takes it alone (docs/concurrency.md).
        self._lock = ReaderWriterLock()
        self._writer = threading.Lock()
        self._resync = False
        #: A search over a pool without deferred tools warns once per engine.
        self._warned = False
        self.set_tools(tools)

    @property
    def pool(self) -> Sequence[Tool]:
        """Every tool, in pool order."""
        return self._index.pool

    @property
    def deferred(self) -> Sequence[Tool]:
        """The deferred tools (what the backend indexes), in pool order."""
        return self._index.deferred

    def get(self, name: str) -> Tool | None:
        """The pool's tool called exactly ``name``, if any."""
        return self._index.by_name.get(name)

    def set_tools(self, tools: Iterable[Tool]) -> None:
        """Replace the pool, at a cost in proportion to what changed (docs/security.md,
        "Updates"): tools are compared by identity, content hashes are cached per tool, an
        incremental backend re-indexes only tools whose content changed (any other backend
        rebuilds), and the ``+required`` index changes in place for the tools that changed.

        Safe to call while other threads search (docs/concurrency.md): the engine's own
        structures change under a write lock; the backend's writes run under it too, unless
        the backend's writes are ``isolated_writes`` (a database transaction), when searches
        go on meanwhile. A backend write that fails leaves the engine to re-index the whole
        pool on the next call, so a retried ``set_tools`` repairs what the failure missed."""
        with self._writer:
            with self._lock.write_lock():
                write = self._stage(tools)
                if not getattr(self.backend, "isolated_writes", False):
                    self._write(write)
                    return
            self._write(write)

    def _write(self, write: Callable[[], None] | None) -> None:
        if write is None:
            return
        try:
            write()
        except BaseException:
            self._resync = True
            raise
        self._resync = False

    def _stage(self, tools: Iterable[Tool]) -> Callable[[], None] | None:
        """Apply a new pool to the engine's own structures; returns the backend write that
        brings the backend level with them (None: nothing to write)."""
        change = self._index.set_tools(tools)
        deferred = self._index.deferred
        incremental = isinstance(self.backend, IncrementalBackend)
        if self._resync or change.rebuilt or not incremental:
            wanted = {tool.name: tool.content_hash() for tool in deferred}
            write: Callable[[], None] | None = None
            if self._resync:
                write = functools.partial(self.backend.index, list(deferred))
            elif self._indexed and incremental:
                removed = [name for name in self._indexed if name not in wanted]
                changed = [t for t in deferred if self._indexed.get(t.name) != wanted[t.name]]
                write = functools.partial(self._reindex, removed, changed)
            elif change.rebuilt or change.removed or change.added:
                write = functools.partial(self.backend.index, list(deferred))
            self._indexed = wanted
            self._required.rebuild(deferred)
            return write
        gone = [tool for tool in change.removed if is_deferred(tool)]
        new = [tool for tool in change.added if is_deferred(tool)]
        staying = {tool.name for tool in new}
        removed = [tool.name for tool in gone if tool.name not in staying]
        changed = [tool for tool in new if self._indexed.get(tool.name) != tool.content_hash()]
        for name in removed:
            self._indexed.pop(name, None)
        self._indexed.update((tool.name, tool.content_hash()) for tool in new)
        self._required.apply(gone, new)
        if not (removed or changed):
            return None
        return functools.partial(self._reindex, removed, changed)

    def _reindex(self, removed: Sequence[str], changed: Sequence[Tool]) -> None:
        assert isinstance(self.backend, IncrementalBackend)
        if removed:
            self.backend.remove(removed)
        if changed:
            self.backend.upsert(changed)

    def search(self, query: str, max_results: int = DEFAULT_MAX_RESULTS) -> SearchResult:
        """Run one ToolSearch call. Invalid arguments raise :class:`QueryError`."""
        if not isinstance(query, str):
            raise QueryError(f"query must be a string, got {type(query).__name__}")
        query = cut_query(query)
        if isinstance(max_results, bool) or not isinstance(max_results, int):
            raise QueryError(f"max_results must be an integer, got {max_results!r}")
        if not 1 <= max_results <= self.max_results_cap:
            raise QueryError(
                f"max_results must be between 1 and {self.max_results_cap}, got {max_results}"
            )
        selected = parse_select(query) or []
        with self._lock.read_lock():
            result = SearchResult(
                query=query,
                matches=tuple(self._dispatch(query, max_results)),
                total_deferred_tools=len(self._index.deferred),
                pending_mcp_servers=self.pending_servers,
                not_found=tuple(dict.fromkeys(n for n in selected if self._selectable(n) is None)),
                total_tools=len(self._index.pool),
            )
        if result.notice() and not self._warned:
            self._warned = True
            log.warning("%s", result.notice())
        return result

    def search_many(
        self, queries: Sequence[str], max_results: int = DEFAULT_MAX_RESULTS
    ) -> SearchResult:
        """One call for several queries (the steps of a task): each is searched as by
        :meth:`search` and the matches merged round-robin, each tool once, at most
        ``max_results`` (:func:`toolsearch.multistep.merge_matches`)."""
        from toolsearch.multistep import merge_matches

        if isinstance(queries, str) or not isinstance(queries, Sequence) or not queries:
            raise QueryError("queries must be a non-empty list of strings")
        results = [self.search(query, max_results) for query in queries]
        return SearchResult(
            query=" | ".join(queries),
            matches=tuple(merge_matches([r.matches for r in results], max_results)),
            total_deferred_tools=len(self._index.deferred),
            pending_mcp_servers=self.pending_servers,
            not_found=tuple(dict.fromkeys(n for r in results for n in r.not_found)),
            total_tools=len(self._index.pool),
        )

    def _dispatch(self, query: str, max_results: int) -> list[Match]:
        selected = parse_select(query)
        if selected is not None:
            return self._select(selected)
        lowered = query.lower().strip()
        exact = self._index.first_lower(lowered)
        if exact is not None:
            return [Match(exact.name, None, "exact")]
        if lowered.startswith(MCP_PREFIX) and len(lowered) > len(MCP_PREFIX):
            prefixed = [t for t in self._index.deferred if t.name.lower().startswith(lowered)]
            if prefixed:
                return [Match(t.name, None, "prefix") for t in prefixed[:max_results]]
        return self._ranked(query, max_results)

    def _select(self, names: Sequence[str]) -> list[Match]:
        found: dict[str, Match] = {}
        for name in names:
            tool = self._selectable(name)
            if tool is not None and tool.name not in found:
                found[tool.name] = Match(tool.name, None, "select")
        return list(found.values())

    def _selectable(self, name: str) -> Tool | None:
        """The tool ``select:`` resolves ``name`` to. A real tool's name always wins: an alias
        never stands in for another tool."""
        return self._index.by_name.get(name) or self._index.first_alias(name)

    def _ranked(self, query: str, max_results: int) -> list[Match]:
        parsed = parse_query(query, digits_required=self._reference_syntax)
        deferred = self._index.deferred
        if parsed.is_empty or not deferred:
            return []
        allowed: set[str] | None = None
        if parsed.required:
            allowed = self._required.matching(parsed.required[:MAX_QUERY_TOKENS])
            if not allowed:
                return []
        indexed = self._indexed
        depth = max_results if allowed is None else min(len(deferred), max_results * 4)
        while True:
            hits = self.backend.search(parsed, depth)
            kept = [
                h
                for h in hits
                if h.score > 0 and h.name in indexed and (allowed is None or h.name in allowed)
            ]
            if len(kept) >= max_results or len(hits) < depth or depth >= len(deferred):
                break
            depth = min(len(deferred), depth * 4)
        return [Match(h.name, float(h.score), "ranked") for h in kept[:max_results]]
