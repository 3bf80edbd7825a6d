"""The framework-neutral part of every integration: one deferred pool with ToolSearch over it
(docs/integrations/index.md).

A framework runs the agent loop; :class:`DeferredPool` supplies what toolsearch adds to it, in
the agent layer's order (docs/reference-behaviour.md §6): the framework's own tools plus an MCP
hub's tools → deny rules → deferral → the ToolSearch engine. Each turn the framework sends
:meth:`DeferredPool.visible` — tools loaded up front, ToolSearch, and the deferred tools
discovered so far — and answers a ToolSearch call with :meth:`DeferredPool.search_text`.

The discovered set lives here, not in the framework's message history, so trimming or
summarising the history never unloads a tool; :attr:`DeferredPool.discovered` can be saved
with a conversation and handed back through ``discovered=``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from toolsearch.agent.announce import announcement_block
from toolsearch.agent.hygiene import call_error
from toolsearch.agent.pool import ResolvedTools, resolve_tools
from toolsearch.agent.providers.plain import LOADED_HEADER, loaded_text
from toolsearch.backend import SearchBackend
from toolsearch.engine import DEFAULT_MAX_RESULTS, DEFAULT_MAX_RESULTS_CAP, ToolSearch
from toolsearch.errors import ConfigError, QueryError
from toolsearch.permissions import DenyRule, parse_rules
from toolsearch.tokens import TokenCounter, default_counter, tool_tokens
from toolsearch.tool import TOOL_SEARCH_NAME, Tool, is_deferred

if TYPE_CHECKING:
    from toolsearch.mcp.client import ToolCallResult
    from toolsearch.mcp.hub import BlockingMcpHub, McpHub

__all__ = ["DeferredPool", "Savings", "SearchAnswer", "framework_tool", "loaded_names"]


def framework_tool(
    name: str, description: str | None, schema: Mapping[str, Any] | None, *, deferred: bool
) -> Tool:
    """A framework's tool as a toolsearch :class:`Tool` (deferred unless loaded up front)."""
    input_schema = dict(schema) if schema else {"type": "object", "properties": {}}
    return Tool(
        name,
        description or "",
        input_schema,
        should_defer=deferred,
        always_load=not deferred,
    )


def loaded_names(text: str) -> tuple[str, ...]:
    """The tools a ToolSearch result loaded, read back from the text the model got (the
    definitions :meth:`DeferredPool.search` returns, one JSON object a line): how an
    integration restores the discovered set from the history a framework keeps."""
    lines = text.splitlines()
    if not lines or lines[0] != LOADED_HEADER:
        return ()
    names: list[str] = []
    for line in lines[1:]:
        try:
            definition = json.loads(line)
        except ValueError:
            break
        if not isinstance(definition, dict) or not isinstance(definition.get("name"), str):
            break
        names.append(definition["name"])
    return tuple(names)


@dataclass(frozen=True, slots=True)
class SearchAnswer:
    """One ToolSearch call's outcome: what the model reads and which tools it loaded."""

    text: str
    names: tuple[str, ...]
    is_error: bool = False


@dataclass(frozen=True, slots=True)
class Savings:
    """Tool-definition tokens of model requests with ToolSearch against every tool bound.

    ``requests`` is how many model requests were counted; the token figures add up over them,
    counted by the pool's token counter (:mod:`toolsearch.tokens`).
    """

    requests: int
    tokens_sent: int
    tokens_without_search: int

    @property
    def saved(self) -> int:
        """Tokens not sent thanks to deferral."""
        return self.tokens_without_search - self.tokens_sent

    @property
    def percent(self) -> float:
        """The share saved, in per cent (0 when nothing was counted)."""
        if not self.tokens_without_search:
            return 0.0
        return round(100 * self.saved / self.tokens_without_search, 1)

    def __add__(self, other: Savings) -> Savings:
        return Savings(
            self.requests + other.requests,
            self.tokens_sent + other.tokens_sent,
            self.tokens_without_search + other.tokens_without_search,
        )

    def to_json(self) -> dict[str, Any]:
        """The figures as JSON-ready data."""
        return {
            "requests": self.requests,
            "tokens_sent": self.tokens_sent,
            "tokens_without_search": self.tokens_without_search,
            "saved_tokens": self.saved,
            "saving_percent": self.percent,
        }


class DeferredPool:
    """The framework's tools and an MCP hub's tools as one permitted, deferred, searchable pool.

    ``tools`` are the framework's tools converted with :func:`framework_tool`; ``hub`` is a
    running :class:`~toolsearch.mcp.hub.McpHub` or :class:`~toolsearch.mcp.hub.BlockingMcpHub`
    whose tools join the pool (re-read every turn, so servers that connect late appear).
    ``deny`` rules remove tools before anything else sees them. ``backend`` and
    ``backend_options`` choose the ranking as for :class:`~toolsearch.engine.ToolSearch`;
    ``counter`` counts tokens for :meth:`savings`; ``discovered`` restores a saved state.
    ``announce`` names the deferred tools to the model in an ``<available-deferred-tools>``
    block (:meth:`announcement`) that the integration adds to the system prompt.
    """

    def __init__(
        self,
        tools: Iterable[Tool] = (),
        *,
        hub: McpHub | BlockingMcpHub | None = None,
        deny: Iterable[str | DenyRule] = (),
        backend: SearchBackend | str | None = None,
        backend_options: Mapping[str, Any] | None = None,
        max_results_cap: int = DEFAULT_MAX_RESULTS_CAP,
        counter: TokenCounter | None = None,
        discovered: Iterable[str] = (),
        announce: bool = True,
    ) -> None:
        self._local = list(tools)
        self._check_names(self._local)
        self.hub = hub
        self.rules: list[DenyRule] = parse_rules(deny)
        self.max_results_cap = max_results_cap
        self.counter = counter
        self.announce = announce
        self._discovered: dict[str, None] = dict.fromkeys(discovered)
        self._hub_names: frozenset[str] = frozenset()
        self._counted = Savings(0, 0, 0)
        self._pool = self._resolve()
        self.engine = ToolSearch(
            self._pool.tools,
            backend=backend,
            backend_options=backend_options,
            max_results_cap=max_results_cap,
        )

    @staticmethod
    def _check_names(tools: Sequence[Tool]) -> None:
        names = [t.name for t in tools]
        if TOOL_SEARCH_NAME in names:
            raise ConfigError(
                f"a framework tool is named {TOOL_SEARCH_NAME!r}, the name the integration "
                "gives its own search tool; rename it"
            )
        doubled = sorted({n for n in names if names.count(n) > 1})
        if doubled:
            raise ConfigError(f"two framework tools share a name: {', '.join(doubled)}")

    # -- the pool --------------------------------------------------------------------------

    def _resolve(self) -> ResolvedTools:
        hub_tools = list(self.hub.tools) if self.hub is not None else []
        local = {t.name for t in self._local}
        self._hub_names = frozenset(t.name for t in hub_tools if t.name not in local)
        return resolve_tools(
            [*self._local, *hub_tools], deny=self.rules, max_results_cap=self.max_results_cap
        )

    def set_tools(self, tools: Iterable[Tool]) -> None:
        """Replace the framework's tools (for a framework that lists its tools per run); the
        engine re-indexes in proportion to what changed."""
        local = list(tools)
        self._check_names(local)
        self._local = local
        self._pool = self._resolve()
        self.engine.set_tools(self._pool.tools)

    def refresh(self) -> ResolvedTools:
        """Re-read the hub's tools (servers come and go) and update the engine in proportion
        to what changed; returns the permitted pool."""
        if self.hub is not None:
            self._pool = self._resolve()
            self.engine.set_tools(self._pool.tools)
        return self._pool

    @property
    def pool(self) -> ResolvedTools:
        """The permitted pool (ToolSearch included), as of the last refresh."""
        return self._pool

    @property
    def discovered(self) -> tuple[str, ...]:
        """Deferred tools loaded so far and still permitted, in the order they were found."""
        present = {t.name for t in self._pool.deferred}
        return tuple(name for name in self._discovered if name in present)

    def discover(self, names: Iterable[str]) -> None:
        """Mark tools as loaded (what a ToolSearch match does)."""
        self._discovered.update(dict.fromkeys(names))

    def is_hub_tool(self, name: str) -> bool:
        """Whether ``name`` is one of the hub's tools (called through the hub)."""
        return name in self._hub_names

    def _loaded(self, discovered: Iterable[str] | None) -> set[str]:
        return set(self._discovered if discovered is None else discovered)

    def visible(self, discovered: Iterable[str] | None = None) -> list[Tool]:
        """What the next request carries: tools loaded up front, ToolSearch, then the
        discovered deferred tools, in pool order. ``discovered`` replaces the pool's own set
        when the framework keeps the state (a LangGraph state key)."""
        pool = self.refresh()
        found = self._loaded(discovered)
        plain = [t for t in pool.tools if not is_deferred(t)]
        return [*plain, *(t for t in pool.deferred if t.name in found)]

    def announcement(self) -> str:
        """The ``<available-deferred-tools>`` block naming every deferred tool of the pool
        (empty when announcing is off or nothing is deferred)."""
        names = [t.name for t in self._pool.deferred]
        return announcement_block(names) if self.announce and names else ""

    # -- ToolSearch ------------------------------------------------------------------------

    def search(self, query: Any, max_results: Any = DEFAULT_MAX_RESULTS) -> SearchAnswer:
        """Run one ToolSearch call: the text the model reads (the loaded tools' definitions,
        the no-match text, or an error naming the bad argument) and the names it loaded,
        which join the pool's discovered set."""
        self.refresh()
        try:
            if not isinstance(query, str):
                raise QueryError(f"'query' must be a string, got {query!r}")
            result = self.engine.search(query, max_results)
        except QueryError as exc:
            return SearchAnswer(f"{TOOL_SEARCH_NAME} error: {exc}", (), is_error=True)
        self.discover(result.names)
        found = [tool for name in result.names if (tool := self.engine.get(name)) is not None]
        text = loaded_text(found) if found else result.text()
        text = "\n".join(filter(None, (text, result.not_found_text())))
        return SearchAnswer(text, tuple(result.names))

    def call_error(self, name: str, discovered: Iterable[str] | None = None) -> str | None:
        """Why the model may not call ``name`` now (denied, unknown, or deferred and not yet
        loaded — with the ``select:`` hint), or None when it may."""
        pool = {t.name: t for t in self._pool.tools}
        return call_error(name, pool=pool, loaded=self._loaded(discovered), search_enabled=True)

    def is_denied(self, name: str) -> bool:
        """Whether a deny rule removes the tool called ``name`` (for tools a framework holds
        outside the pool)."""
        return any(rule.matches_name(name) for rule in self.rules)

    # -- calling hub tools -----------------------------------------------------------------

    def call_hub(self, name: str, arguments: Mapping[str, Any]) -> ToolCallResult:
        """Call one of the hub's tools from synchronous code (a :class:`BlockingMcpHub`)."""
        from toolsearch.mcp.hub import BlockingMcpHub

        hub = self._require_hub()
        if not isinstance(hub, BlockingMcpHub):
            raise ConfigError(
                "an async McpHub cannot be called from synchronous code; use BlockingMcpHub "
                "or run the agent asynchronously"
            )
        return hub.call_tool(name, dict(arguments))

    async def acall_hub(self, name: str, arguments: Mapping[str, Any]) -> ToolCallResult:
        """Call one of the hub's tools from async code (either hub kind; a blocking hub's call
        runs in a worker thread so the event loop keeps going)."""
        from toolsearch.mcp.hub import BlockingMcpHub

        hub = self._require_hub()
        if isinstance(hub, BlockingMcpHub):
            return await asyncio.to_thread(hub.call_tool, name, dict(arguments))
        return await hub.call_tool(name, dict(arguments))

    def _require_hub(self) -> McpHub | BlockingMcpHub:
        if self.hub is None:
            raise ConfigError("this pool has no MCP hub")
        return self.hub

    # -- tokens ----------------------------------------------------------------------------

    def request_savings(
        self, sent: Iterable[Tool] | None = None, *, announced: bool = True
    ) -> Savings:
        """One request's figures: ``sent`` (default: :meth:`visible`) plus the announcement,
        against every permitted tool bound plainly (ToolSearch left out, as with search off)."""
        sent_tools = list(self.visible() if sent is None else sent)
        everything = [t for t in self._pool.tools if t.name != TOOL_SEARCH_NAME]
        counter = self.counter or default_counter()
        block = self.announcement() if announced else ""
        tokens = tool_tokens(sent_tools, counter) + (counter.count(block) if block else 0)
        return Savings(1, tokens, tool_tokens(everything, counter))

    def count_request(
        self, sent: Iterable[Tool] | None = None, *, announced: bool = True
    ) -> Savings:
        """Count one model request into :meth:`savings` and return its own figures."""
        figures = self.request_savings(sent, announced=announced)
        self._counted = self._counted + figures
        return figures

    def savings(self) -> Savings:
        """Every request counted so far, added up."""
        return self._counted
