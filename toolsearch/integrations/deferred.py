"""The framework-neutral part of every integration: one deferred pool with ToolSearch over it
(docs/integrations/index.md).

A framework runs the agent loop; :class:`DeferredPool` supplies what toolsearch adds to it, in
the agent layer's order (docs/reference-behaviour.md §6): the framework's own tools plus an MCP
hub's tools → deny rules → deferral → the ToolSearch engine. Each turn the framework sends
:meth:`DeferredPool.visible` — tools loaded up front, ToolSearch, and the deferred tools
discovered so far — and answers a ToolSearch call with :meth:`DeferredPool.search`.

One pool serves every conversation of an agent, so a conversation's found tools are not kept
on it: an integration keeps a :class:`FoundTools` per conversation in what the framework
already keeps (graph state, message history, run items — :func:`loaded_names` reads a
ToolSearch result back) and hands :meth:`FoundTools.loaded` to :meth:`DeferredPool.visible`
and :meth:`DeferredPool.call_error`. The pool's own set (:attr:`DeferredPool.discovered`,
``discovered=``) serves a single-conversation loop of one's own.
"""

from __future__ import annotations

import asyncio
import json
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from toolsearch.agent.announce import announcement_block
from toolsearch.agent.hygiene import call_error
from toolsearch.agent.pool import ResolvedTools, resolve_tools
from toolsearch.agent.providers.plain import LOADED_HEADER, loaded_text
from toolsearch.backend import SearchBackend
from toolsearch.engine import DEFAULT_MAX_RESULTS, DEFAULT_MAX_RESULTS_CAP, ToolSearch
from toolsearch.errors import ConfigError, QueryError
from toolsearch.permissions import DenyRule, name_key, parse_rules, unmatched_rules
from toolsearch.tokens import TokenCounter, default_counter, tool_tokens
from toolsearch.tool import MCP_PREFIX, TOOL_SEARCH_NAME, Tool, is_deferred, mcp_tool_name

if TYPE_CHECKING:
    from toolsearch.mcp.client import ToolCallResult
    from toolsearch.mcp.hub import BlockingMcpHub, McpHub

__all__ = [
    "KEEP_LOADED",
    "DeferredPool",
    "DenyRuleWarning",
    "FoundTools",
    "Savings",
    "SearchAnswer",
    "found_in_same_response",
    "framework_tool",
    "loaded_names",
]


class DenyRuleWarning(UserWarning):
    """A deny rule matches none of the pool's tools: usually a typo (``mcp__gitlab__``, a bare
    server name, look-alike letters), which would otherwise deny nothing in silence."""


def framework_tool(
    name: str,
    description: str | None,
    schema: Mapping[str, Any] | None,
    *,
    deferred: bool,
    server: str | None = None,
    server_tool: str | None = None,
) -> Tool:
    """A framework's tool as a toolsearch :class:`Tool` (deferred unless loaded up front).

    ``server`` names the MCP server an adapter brought the tool from, under the adapter's own
    name for it (``workspace_github_delete_repository``); ``server_tool`` is the tool's name on
    that server. The tool then answers to its Claude Code name ``mcp__<server>__<tool>`` too:
    deny rules written that way (``mcp__workspace``, ``mcp__workspace__*``,
    ``mcp__workspace__github_delete_repository``) remove it, and ``select:`` finds it."""
    input_schema = dict(schema) if schema else {"type": "object", "properties": {}}
    aliases: tuple[str, ...] = ()
    if server:
        canonical = mcp_tool_name(server, server_tool or name)
        aliases = () if canonical == name else (canonical,)
    return Tool(
        name,
        description or "",
        input_schema,
        should_defer=deferred,
        always_load=not deferred,
        aliases=aliases,
        server=server or None,
    )


def found_in_same_response(name: str) -> str:
    """What the model reads when it called ``name`` in the same response as the ToolSearch
    call that loaded it: the framework had fixed that response's tools before the search
    ran, so the call was refused, and calling it again now works."""
    return (
        f"{name} was loaded by the {TOOL_SEARCH_NAME} call in this same response, so it could "
        "not be called in it. It can be called now: call it again."
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


#: Which found tools stay loaded: ``"all"`` — every tool any ToolSearch call of the
#: conversation loaded, for the rest of it (Claude Code's rule, the default); ``"called"`` —
#: the latest search's tools plus the tools the model has called.
KeepLoaded = Literal["all", "called"]
KEEP_LOADED: tuple[KeepLoaded, ...] = ("all", "called")


@dataclass
class FoundTools:
    """One conversation's ToolSearch results and called tools, rebuilt from the state the
    framework keeps (message history, session items) so that nothing of one user's
    conversation lives on an integration object shared by many."""

    #: tool call id → the names that ToolSearch call loaded, in the order of the calls
    searches: dict[str, tuple[str, ...]] = field(default_factory=dict)
    #: the deferred tools the model called, in order
    called: dict[str, None] = field(default_factory=dict)

    def record_search(self, call_id: str, names: Iterable[str]) -> None:
        """Add one ToolSearch call's result (again under the same id: no change)."""
        self.searches.setdefault(call_id, tuple(names))

    def record_call(self, name: str) -> None:
        """Note that the model called ``name``."""
        self.called[name] = None

    def loaded(self, keep: KeepLoaded = "all") -> tuple[str, ...]:
        """The tools to send, in the order they were found (see :data:`KeepLoaded`)."""
        found = [names for names in self.searches.values() if names]
        every = dict.fromkeys(name for names in found for name in names)
        if keep == "all" or not found:
            return tuple(every)
        latest = set(found[-1])
        return tuple(name for name in every if name in latest or name in self.called)


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


def _rule_hint(text: str, tools: Sequence[Tool]) -> str:
    """What an unmatched rule was probably meant to be, for its warning."""
    servers = {name_key(t.server) for t in tools if t.server}
    stripped = text.strip()
    if not stripped.lower().startswith(MCP_PREFIX) and name_key(stripped).startswith(MCP_PREFIX):
        return "; it is written with look-alike characters: write mcp__ in plain ASCII"
    if stripped.endswith("__") and stripped.lower().startswith(MCP_PREFIX):
        server = stripped[len(MCP_PREFIX) : -2]
        return f"; for the whole server write mcp__{server} or mcp__{server}__*"
    if name_key(stripped) in servers:
        return f"; {stripped!r} is a server: write mcp__{stripped}"
    return ""


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
    ``keep_loaded`` bounds what stays loaded (:data:`KeepLoaded`; ``"all"`` by default, as in
    Claude Code) for integrations that keep a :class:`FoundTools` per conversation.
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
        keep_loaded: KeepLoaded = "all",
    ) -> None:
        if keep_loaded not in KEEP_LOADED:
            raise ConfigError(
                f"keep_loaded must be one of {', '.join(KEEP_LOADED)}, got {keep_loaded!r}"
            )
        self.keep_loaded: KeepLoaded = keep_loaded
        self._local = list(tools)
        self._check_names(self._local)
        self.hub = hub
        self.rules: list[DenyRule] = parse_rules(deny)
        self.max_results_cap = max_results_cap
        self.counter = counter
        self.announce = announce
        self._discovered: dict[str, None] = dict.fromkeys(discovered)
        self._hub_names: frozenset[str] = frozenset()
        self._alias_denied: frozenset[str] = frozenset()
        self._given: list[Tool] = []
        self._outside: dict[str, Tool] = {}
        self._warned: set[str] = set()
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
        self._given = [*self._local, *hub_tools]
        permitted = [t for t in self._local if not self._denied_by_alias(t)]
        self._alias_denied = frozenset(t.name for t in self._local) - {t.name for t in permitted}
        return resolve_tools(
            [*permitted, *hub_tools], deny=self.rules, max_results_cap=self.max_results_cap
        )

    def _denied_by_alias(self, tool: Tool) -> bool:
        """Whether a rule denies an adapter's MCP tool by its ``mcp__<server>__<tool>`` name."""
        return tool.server is not None and any(
            rule.matches_name(alias, tool.server) for alias in tool.aliases for rule in self.rules
        )

    def note_outside(self, tools: Iterable[Tool]) -> None:
        """Tools the framework holds outside the pool (given to the agent directly): a deny
        rule that matches one of them is not a typo."""
        self._outside.update((tool.name, tool) for tool in tools)

    def _warn_unmatched(self) -> None:
        """Warn once for each rule that matches no tool given to the pool or noted outside
        it, nor a server the hub could still bring (as the gateway does at start-up)."""
        tools = [*self._given, *self._outside.values()]
        if not tools:
            return
        servers = list(self.hub.servers) if self.hub is not None else []
        pending = [r for r in self.rules if r.text not in self._warned]
        unmatched = unmatched_rules(pending, tools=tools, servers=servers)
        for rule in unmatched:
            if any(rule.matches_name(a, t.server) for t in tools for a in t.aliases):
                continue
            self._warned.add(rule.text)
            warnings.warn(
                f"deny rule {rule.text!r} matches no tool: it denies nothing"
                f"{_rule_hint(rule.text, tools)} (a whole server is mcp__<server> or "
                "mcp__<server>__*; a tool is its exact name)",
                DenyRuleWarning,
                stacklevel=3,
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
        self._warn_unmatched()
        found = self._loaded(discovered)
        plain = [t for t in pool.tools if not is_deferred(t)]
        return [*plain, *(t for t in pool.deferred if t.name in found)]

    def announcement(self) -> str:
        """The ``<available-deferred-tools>`` block naming every deferred tool of the pool
        (empty when announcing is off or nothing is deferred)."""
        names = [t.name for t in self._pool.deferred]
        return announcement_block(names) if self.announce and names else ""

    # -- ToolSearch ------------------------------------------------------------------------

    def search(
        self, query: Any, max_results: Any = DEFAULT_MAX_RESULTS, *, remember: bool = True
    ) -> SearchAnswer:
        """Run one ToolSearch call: the text the model reads (the loaded tools' definitions,
        the no-match text, or an error naming the bad argument) and the names it loaded,
        which join the pool's discovered set unless ``remember`` is off (an integration that
        keeps the set per conversation, in the framework's own state)."""
        self.refresh()
        try:
            if not isinstance(query, str):
                raise QueryError(f"'query' must be a string, got {query!r}")
            result = self.engine.search(query, max_results)
        except QueryError as exc:
            return SearchAnswer(f"{TOOL_SEARCH_NAME} error: {exc}", (), is_error=True)
        if remember:
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

    def is_denied(
        self, name: str, server: str | None = None, server_tool: str | None = None
    ) -> bool:
        """Whether a deny rule removes the tool called ``name`` (for tools a framework holds
        outside the pool); ``server`` and ``server_tool`` as for :func:`framework_tool` when an
        adapter brought the tool from an MCP server."""
        if name in self._alias_denied:
            return True
        if server:
            canonical = mcp_tool_name(server, server_tool or name)
            if any(rule.matches_name(canonical, server) for rule in self.rules):
                return True
        return any(rule.matches_name(name, server or None) for rule in self.rules)

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
