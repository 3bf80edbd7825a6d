"""Every configured MCP server behind one searchable, callable tool pool.

:class:`McpHub` connects to all servers of a config at once and keeps a :class:`ToolSearch`
engine over their tools current while they come and go:

- a server that is still connecting is a *pending* server: its name is in no-match results
  ("Some MCP servers are still connecting: ...", docs/reference-behaviour.md §2);
- a server that failed to start is reported as failed, with its error, in no-match results and
  when one of its tools is called — never as "no such tool";
- a server that disconnects has its tools removed from the pool, and the removal is recorded
  as a :class:`ToolChange` (and named when a removed tool is called);
- a server's ``tools/list_changed`` re-lists it and updates the index incrementally: the
  engine re-indexes only tools whose content changed;
- a change of :data:`OFF_LOOP_TOOLS` tools or more (a large server connecting) is indexed off
  the event loop: a new engine is built in a worker thread while searches keep using the
  current one, then swapped in; until then the server counts as pending
  (docs/security.md, "Updates").

Deny rules (docs/reference-behaviour.md §6) are applied before the engine sees a tool, so a
denied tool is neither found nor callable. Calls forward to the tool's server; whatever goes
wrong comes back as a :class:`ToolCallResult` with ``is_error`` set.

:class:`McpHub` is async (anyio). :class:`BlockingMcpHub` runs one on a background event-loop
thread for synchronous agent loops.
"""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import TracebackType
from typing import Any

import anyio
import anyio.abc
import anyio.to_thread

from toolsearch.backend import SearchBackend
from toolsearch.engine import DEFAULT_MAX_RESULTS, DEFAULT_MAX_RESULTS_CAP, SearchResult, ToolSearch
from toolsearch.errors import ConfigError
from toolsearch.mcp.client import (
    DEFAULT_CALL_TIMEOUT,
    DEFAULT_MAX_MESSAGE_BYTES,
    DEFAULT_MAX_TOOLS,
    DEFAULT_STARTUP_TIMEOUT,
    McpServerConnection,
    ProtocolMode,
    ServerStatus,
    ToolCallResult,
    require_sdk,
)
from toolsearch.mcp.config import McpConfig, ServerConfig, check_tool_prefixes
from toolsearch.permissions import DenyRule, filter_denied, parse_rules, unmatched_rules
from toolsearch.tool import MCP_PREFIX, Tool, normalize_name_part

__all__ = [
    "OFF_LOOP_TOOLS",
    "BlockingMcpHub",
    "HubSearchResult",
    "McpHub",
    "ServerState",
    "ToolChange",
]


#: A server change touching at least this many tools is indexed in a worker thread.
OFF_LOOP_TOOLS = 500


@dataclass(frozen=True, slots=True)
class ServerState:
    """A snapshot of one server: its status, why it failed or left, and its tool names."""

    name: str
    status: ServerStatus
    error: str | None
    tools: tuple[str, ...]
    protocol_version: str | None = None
    transport: str = "stdio"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form for CLIs and logs."""
        return {
            "name": self.name,
            "status": self.status,
            "error": self.error,
            "tools": len(self.tools),
            "protocol_version": self.protocol_version,
            "transport": self.transport,
        }


@dataclass(frozen=True, slots=True)
class ToolChange:
    """Tools that entered, left or changed the pool because of one server event.

    ``reason`` is ``"connected"``, ``"list_changed"``, ``"disconnected"`` or ``"failed"``;
    ``detail`` carries the server's error for the last two.
    """

    server: str
    reason: str
    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()
    detail: str | None = None
    at: float = field(default_factory=time.time)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "server": self.server,
            "reason": self.reason,
            "added": list(self.added),
            "removed": list(self.removed),
            "changed": list(self.changed),
            "detail": self.detail,
        }


@dataclass(frozen=True, slots=True)
class HubSearchResult:
    """A ToolSearch result plus what the hub knows about servers that are not there.

    ``tools`` are the matched tools (with schemas), best first. ``failed_servers`` maps a
    failed or disconnected server to its error; they are named in :meth:`text` when nothing
    matched, as pending servers are.
    """

    result: SearchResult
    tools: tuple[Tool, ...]
    failed_servers: Mapping[str, str] = field(default_factory=dict)

    @property
    def names(self) -> list[str]:
        """Matched tool names, best first."""
        return self.result.names

    @property
    def pending_servers(self) -> tuple[str, ...]:
        """Servers still connecting when the search ran."""
        return self.result.pending_mcp_servers

    def text(self) -> str:
        """The no-match text (docs/reference-behaviour.md §2), followed by failed servers and
        their errors; empty when something matched."""
        if self.result.matches:
            return ""
        text = self.result.text()
        if self.failed_servers:
            listing = "; ".join(f"{name} ({error})" for name, error in self.failed_servers.items())
            stop = "" if text.endswith(".") else "."
            text += f"{stop} Some MCP servers are unavailable: {listing}"
        return text

    def to_record(self) -> dict[str, Any]:
        """The engine's record plus ``failed_mcp_servers``."""
        record = self.result.to_record()
        record["failed_mcp_servers"] = dict(self.failed_servers)
        return record


def _check_options(
    configs: list[ServerConfig],
    startup_timeout: float,
    call_timeout: float,
    max_tools: int,
    max_message_bytes: int,
) -> None:
    names = [c.name for c in configs]
    if len(set(names)) != len(names):
        duplicate = next(n for n in names if names.count(n) > 1)
        raise ConfigError(f"MCP server {duplicate!r} is configured twice")
    for value, label in ((startup_timeout, "startup_timeout"), (call_timeout, "call_timeout")):
        if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
            raise ConfigError(f"{label} must be a positive number of seconds, got {value!r}")
    for limit, label in ((max_tools, "max_tools"), (max_message_bytes, "max_message_bytes")):
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ConfigError(f"{label} must be a positive integer, got {limit!r}")
    check_tool_prefixes(configs)


def _server_of(name: str, prefixes: Mapping[str, str]) -> str | None:
    if not name.startswith(MCP_PREFIX):
        return None
    for prefix, server in prefixes.items():
        if name.startswith(prefix):
            return server
    return None


class McpHub:
    """Connects to every server of an MCP config and searches and calls their tools.

    Use it as an async context manager; entering starts every connection concurrently and
    returns at once (servers show up as pending until connected). ``tools`` are extra,
    non-MCP tools to put in the same pool (a built-in wins a name clash). ``deny`` holds
    permission rules; ``backend`` and ``backend_options`` choose the ranking backend as for
    :class:`ToolSearch`. ``on_change`` is called on the event loop with every
    :class:`ToolChange`. ``max_tools`` caps how many tools one server may list and
    ``max_message_bytes`` how large one message from a stdio server may be (a larger tool
    result is an error result; docs/security.md, "Hostile servers"). Servers whose tools could
    take each other's names are refused (:func:`~toolsearch.mcp.config.check_tool_prefixes`).
    """

    def __init__(
        self,
        servers: McpConfig | Iterable[ServerConfig],
        *,
        tools: Iterable[Tool] = (),
        deny: Iterable[str | DenyRule] = (),
        backend: SearchBackend | str | None = None,
        backend_options: Mapping[str, Any] | None = None,
        max_results_cap: int = DEFAULT_MAX_RESULTS_CAP,
        startup_timeout: float = DEFAULT_STARTUP_TIMEOUT,
        call_timeout: float = DEFAULT_CALL_TIMEOUT,
        mode: ProtocolMode = "auto",
        on_change: Callable[[ToolChange], None] | None = None,
        max_tools: int = DEFAULT_MAX_TOOLS,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    ) -> None:
        configs = list(servers.servers if isinstance(servers, McpConfig) else servers)
        if configs:
            require_sdk()
        names = [c.name for c in configs]
        _check_options(configs, startup_timeout, call_timeout, max_tools, max_message_bytes)
        self.rules: list[DenyRule] = parse_rules(deny)
        self._local = list(tools)
        #: Rules that match no local tool and no tool a configured server could offer.
        self.unmatched_rules: list[DenyRule] = unmatched_rules(
            self.rules, tools=self._local, servers=names
        )
        self.on_change = on_change
        self._defer_all = False
        self._visible: dict[int, tuple[Tool, Tool | None]] = {}
        self._connections: dict[str, McpServerConnection] = {}
        self._prefixes: dict[str, str] = {}
        for config in configs:
            self._connections[config.name] = McpServerConnection(
                config,
                startup_timeout=startup_timeout,
                call_timeout=call_timeout,
                mode=mode,
                on_change=self._connection_changed,
                max_tools=max_tools,
                max_message_bytes=max_message_bytes,
            )
            self._prefixes[f"{MCP_PREFIX}{normalize_name_part(config.name)}__"] = config.name
        self._server_tools: dict[str, dict[str, str]] = {name: {} for name in names}
        self._removed: dict[str, str] = {}
        self._changes: list[ToolChange] = []
        self._changed = anyio.Event()
        self._stack: contextlib.AsyncExitStack | None = None
        self._tasks: anyio.abc.TaskGroup | None = None
        #: Servers whose changed tools wait for an off-loop build; tools changed meanwhile.
        self._indexing: set[str] = set()
        self._backlog = 0
        self._engine_options: dict[str, Any] = {
            "backend": backend,
            "backend_options": backend_options,
            "max_results_cap": max_results_cap,
        }
        self.engine = ToolSearch(
            self._visible_pool(), **self._engine_options, pending_servers=self._pending()
        )
        # A second engine needs a second backend: only one given by name can be made again,
        # and a persistent one would share its file with the engine in use.
        self._can_swap = (backend is None or isinstance(backend, str)) and not getattr(
            type(self.engine.backend), "persistent", False
        )

    # ------------------------------------------------------------------ lifecycle

    async def __aenter__(self) -> McpHub:
        if self._stack is not None:
            raise RuntimeError("McpHub is already running")
        stack = contextlib.AsyncExitStack()
        tasks = await stack.enter_async_context(anyio.create_task_group())
        stack.callback(tasks.cancel_scope.cancel)
        for connection in self._connections.values():
            tasks.start_soon(connection.run, name=f"mcp server {connection.name}")
        self._stack, self._tasks = stack, tasks
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        stack, self._stack, self._tasks = self._stack, None, None
        if stack is not None:
            await stack.__aexit__(exc_type, exc, tb)

    async def wait_ready(self, timeout: float | None = None) -> bool:
        """Wait until no server is connecting any more; ``False`` if ``timeout`` ran out."""
        return await self.wait_until(lambda hub: not hub.pending_servers, timeout)

    async def wait_until(
        self, predicate: Callable[[McpHub], bool], timeout: float | None = None
    ) -> bool:
        """Wait until ``predicate(hub)`` holds (checked after every change)."""
        with anyio.move_on_after(timeout):
            while not predicate(self):
                await self._changed.wait()
            return True
        return False

    # ------------------------------------------------------------------ state

    @property
    def servers(self) -> dict[str, ServerState]:
        """Every configured server's current state, in config order."""
        return {
            name: ServerState(
                name=name,
                status=c.status,
                error=c.error,
                tools=tuple(t.name for t in c.tools),
                protocol_version=c.protocol_version,
                transport=c.config.transport,
            )
            for name, c in self._connections.items()
        }

    @property
    def pending_servers(self) -> tuple[str, ...]:
        """Servers still connecting, in config order."""
        return self._pending()

    @property
    def failed_servers(self) -> dict[str, str]:
        """Servers that failed or disconnected, with their errors."""
        return {
            name: c.error or c.status
            for name, c in self._connections.items()
            if c.status in ("failed", "disconnected")
        }

    @property
    def tools(self) -> list[Tool]:
        """The permitted pool (local and MCP tools), in pool order."""
        return list(self.engine.pool)

    @property
    def changes(self) -> list[ToolChange]:
        """Every tool change so far, oldest first."""
        return list(self._changes)

    def connection(self, server: str) -> McpServerConnection:
        """The connection object of one server (for inspection and tests)."""
        try:
            return self._connections[server]
        except KeyError:
            raise ConfigError(
                f"no MCP server named {server!r}; configured: {', '.join(self._connections)}"
            ) from None

    def tool(self, name: str) -> Tool | None:
        """A permitted tool by exact name."""
        return self.engine.get(name)

    def is_denied(self, name: str) -> bool:
        """Whether a permission rule denies the tool called ``name`` (any string)."""
        return any(rule.matches_name(name) for rule in self.rules)

    def _pending(self) -> tuple[str, ...]:
        return tuple(
            n
            for n, c in self._connections.items()
            if c.status == "connecting" or n in self._indexing
        )

    def defer_all_tools(self) -> None:
        """Make every MCP tool searchable, ``alwaysLoad`` ones included: for a gateway, which
        sends no tool definitions up front, "always loaded" must still mean "findable"."""
        if not self._defer_all:
            self._defer_all = True
            self._visible = {}
            self.engine.set_tools(self._visible_pool())

    def _visible_pool(self) -> list[Tool]:
        """The permitted pool. Each tool's visible form (denied: None; else itself, or a copy
        without denied aliases or, for a gateway, without ``alwaysLoad``) is kept while the
        tool is the same object, so a change costs rule checks for the changed tools only and
        the engine sees the other tools unchanged."""
        cache: dict[int, tuple[Tool, Tool | None]] = {}
        pool: list[Tool] = []
        sources: list[tuple[Sequence[Tool], bool]] = [(self._local, False)]
        sources += [(c.tools, self._defer_all) for c in self._connections.values()]
        for tools, defer in sources:
            for tool in tools:
                kept = self._visible.get(id(tool))
                if kept is None or kept[0] is not tool:
                    kept = (tool, self._visible_form(tool, defer))
                cache[id(tool)] = kept
                if kept[1] is not None:
                    pool.append(kept[1])
        self._visible = cache
        return pool

    def _visible_form(self, tool: Tool, defer: bool) -> Tool | None:
        if defer and tool.always_load:
            tool = replace(tool, always_load=False)
        permitted = filter_denied([tool], self.rules)
        return permitted[0] if permitted else None

    def _connection_changed(self, connection: McpServerConnection) -> None:
        before = self._server_tools[connection.name]
        after = {tool.name: tool.content_hash() for tool in connection.tools}
        added = tuple(sorted(n for n in after if n not in before))
        removed = tuple(sorted(n for n in before if n not in after))
        changed = tuple(sorted(n for n in after if n in before and before[n] != after[n]))
        self._server_tools[connection.name] = after
        status = connection.status
        if status == "connecting" and not (before or after):
            self.engine.pending_servers = self._pending()
            self._wake()
            return
        if status == "disconnected":
            reason = "disconnected"
        elif status == "failed":
            reason = "failed"
        elif before or connection.listings > 1:
            reason = "list_changed"
        else:
            reason = "connected"
        for name in added:
            self._removed.pop(name, None)
        why = {
            "disconnected": f"MCP server {connection.name!r} disconnected"
            + (f": {connection.error}" if connection.error else ""),
            "failed": f"MCP server {connection.name!r} failed: {connection.error}",
        }.get(reason, f"MCP server {connection.name!r} no longer lists it")
        for name in removed:
            self._removed[name] = why
        if added or removed or changed:
            self._update_pool(connection.name, len(added) + len(removed) + len(changed))
        self.engine.pending_servers = self._pending()
        if added or removed or changed or reason in ("connected", "failed", "disconnected"):
            change = ToolChange(
                server=connection.name,
                reason=reason,
                added=added,
                removed=removed,
                changed=changed,
                detail=connection.error if reason in ("failed", "disconnected") else None,
            )
            self._changes.append(change)
            if self.on_change is not None:
                self.on_change(change)
        self._wake()

    def _update_pool(self, server: str, size: int) -> None:
        """Give the engine the new pool: in place for a small change (it costs what changed),
        else by an off-loop build, so searches never wait behind a large re-index."""
        tasks = self._tasks
        if self._indexing or (tasks is not None and self._can_swap and size >= OFF_LOOP_TOOLS):
            starting = not self._indexing
            self._indexing.add(server)
            self._backlog += size
            if starting and tasks is not None:
                tasks.start_soon(self._index_off_loop, name="toolsearch index build")
            return
        self.engine.set_tools(self._visible_pool())

    async def _index_off_loop(self) -> None:
        """Build a new engine over the pool in a worker thread while searches use the current
        one; changes that arrive meanwhile are applied to it in place (or, if large, built
        again) before it is swapped in."""
        pool = self._visible_pool()
        try:
            while True:
                self._backlog = 0
                build = functools.partial(ToolSearch, pool, **self._engine_options)
                engine = await anyio.to_thread.run_sync(build, abandon_on_cancel=True)
                pool = self._visible_pool()
                if self._backlog < OFF_LOOP_TOOLS:
                    break
            engine.set_tools(pool)
            self.engine = engine
        except Exception:
            self.engine.set_tools(self._visible_pool())  # the in-place path, errors and all
            raise
        finally:
            self._indexing.clear()
            self._backlog = 0
            self.engine.pending_servers = self._pending()
            self._wake()

    def _wake(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    # ------------------------------------------------------------------ search and call

    def search(self, query: str, max_results: int = DEFAULT_MAX_RESULTS) -> HubSearchResult:
        """Run one ToolSearch query over the permitted pool (raises :class:`QueryError` on
        invalid arguments, like :meth:`ToolSearch.search`)."""
        return self._hub_result(self.engine.search(query, max_results))

    def search_many(
        self, queries: Sequence[str], max_results: int = DEFAULT_MAX_RESULTS
    ) -> HubSearchResult:
        """Several queries in one call, merged as :meth:`ToolSearch.search_many` merges them."""
        return self._hub_result(self.engine.search_many(queries, max_results))

    def _hub_result(self, result: SearchResult) -> HubSearchResult:
        found = (self.engine.get(name) for name in result.names)
        return HubSearchResult(
            result=result,
            tools=tuple(tool for tool in found if tool is not None),
            failed_servers=self.failed_servers,
        )

    def unavailable_reason(self, name: str) -> str:
        """Why ``name`` cannot be called now: denied, removed, its server failed or is still
        connecting, or no such tool."""
        if self.is_denied(name):
            return f"tool {name!r} is not available: denied by a permission rule"
        if name in self._removed:
            return f"tool {name!r} was removed: {self._removed[name]}"
        server = _server_of(name, self._prefixes)
        if server is not None:
            connection = self._connections[server]
            if connection.status == "connecting" or server in self._indexing:
                doing = "connecting" if connection.status == "connecting" else "being indexed"
                return (
                    f"tool {name!r} is not available yet: MCP server {server!r} is still "
                    f"{doing}; try again shortly"
                )
            if connection.status in ("failed", "disconnected"):
                return (
                    f"tool {name!r} is not available: MCP server {server!r} "
                    f"{connection.status}: {connection.error}"
                )
            return f"no such tool {name!r} on MCP server {server!r}"
        return f"no such tool {name!r}"

    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        timeout: float | None = None,
    ) -> ToolCallResult:
        """Call a permitted MCP tool on its server. Denied, unknown and unreachable tools,
        and every server-side error, come back as error results."""
        tool = None if self.is_denied(name) else self.tool(name)
        if tool is None or tool.server is None or tool.server not in self._connections:
            if tool is not None:
                return ToolCallResult.error(f"tool {name!r} is not an MCP tool of this hub")
            return ToolCallResult.error(self.unavailable_reason(name))
        return await self._connections[tool.server].call_tool(name, arguments, timeout=timeout)

    def tool_runner(self) -> Callable[[Any, Tool], Awaitable[Any]]:
        """A tool runner for :class:`toolsearch.agent.loop.AgentLoop` (use ``arun``): each
        call the loop lets through is forwarded to its server; the result becomes the loop's
        ``ToolOutput``, server errors included as error results."""

        async def run(call: Any, tool: Tool) -> Any:
            result = await self.call_tool(tool.name, dict(call.input))
            return _tool_output(result)

        return run

    async def refresh(self, server: str) -> None:
        """Re-list one server's tools now (as its list-changed notification would)."""
        self.connection(server).request_refresh()


class BlockingMcpHub:
    """An :class:`McpHub` on a background event-loop thread, for synchronous callers.

    ``with BlockingMcpHub(config) as hub:`` starts every connection; ``hub.search``,
    ``hub.call_tool`` and ``hub.wait_ready`` block the calling thread only. Arguments are
    those of :class:`McpHub`.
    """

    def __init__(self, servers: McpConfig | Iterable[ServerConfig], **options: Any) -> None:
        self._servers = servers
        self._options = options
        self._stack: contextlib.ExitStack | None = None
        self._portal: Any = None
        self._hub: McpHub | None = None

    def __enter__(self) -> BlockingMcpHub:
        from anyio.from_thread import start_blocking_portal

        stack = contextlib.ExitStack()
        try:
            portal = stack.enter_context(start_blocking_portal())
            hub = portal.call(lambda: McpHub(self._servers, **self._options))
            stack.enter_context(portal.wrap_async_context_manager(hub))
        except BaseException:
            stack.close()
            raise
        self._stack, self._portal, self._hub = stack, portal, hub
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        stack, self._stack = self._stack, None
        if stack is not None:
            stack.__exit__(exc_type, exc, tb)
        self._portal = self._hub = None

    @property
    def hub(self) -> McpHub:
        """The underlying async hub (touch it only from its own event loop)."""
        if self._hub is None:
            raise RuntimeError("BlockingMcpHub is not running; use it in a with block")
        return self._hub

    def _call(self, func: Callable[..., Any], *args: Any) -> Any:
        if self._portal is None:
            raise RuntimeError("BlockingMcpHub is not running; use it in a with block")
        return self._portal.call(func, *args)

    def wait_ready(self, timeout: float | None = None) -> bool:
        """Block until no server is connecting; ``False`` if ``timeout`` ran out."""
        return bool(self._call(self.hub.wait_ready, timeout))

    def wait_until(self, predicate: Callable[[McpHub], bool], timeout: float | None = None) -> bool:
        """Block until ``predicate(hub)`` holds; ``False`` if ``timeout`` ran out."""
        return bool(self._call(self.hub.wait_until, predicate, timeout))

    def search(self, query: str, max_results: int = DEFAULT_MAX_RESULTS) -> HubSearchResult:
        """:meth:`McpHub.search`, from any thread."""
        result: HubSearchResult = self._call(self.hub.search, query, max_results)
        return result

    def search_many(
        self, queries: Sequence[str], max_results: int = DEFAULT_MAX_RESULTS
    ) -> HubSearchResult:
        """:meth:`McpHub.search_many`, from any thread."""
        result: HubSearchResult = self._call(self.hub.search_many, queries, max_results)
        return result

    def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        timeout: float | None = None,
    ) -> ToolCallResult:
        """:meth:`McpHub.call_tool`, from any thread."""

        async def call() -> ToolCallResult:
            return await self.hub.call_tool(name, arguments, timeout=timeout)

        result: ToolCallResult = self._call(call)
        return result

    @property
    def tools(self) -> list[Tool]:
        """The permitted pool, in pool order."""
        tools: list[Tool] = self._call(lambda: self.hub.tools)
        return tools

    @property
    def servers(self) -> dict[str, ServerState]:
        """Every server's current state."""
        servers: dict[str, ServerState] = self._call(lambda: self.hub.servers)
        return servers

    @property
    def pending_servers(self) -> tuple[str, ...]:
        """Servers still connecting."""
        pending: tuple[str, ...] = self._call(lambda: self.hub.pending_servers)
        return pending

    @property
    def failed_servers(self) -> dict[str, str]:
        """Servers that failed or disconnected, with their errors."""
        failed: dict[str, str] = self._call(lambda: self.hub.failed_servers)
        return failed

    @property
    def changes(self) -> list[ToolChange]:
        """Every tool change so far."""
        changes: list[ToolChange] = self._call(lambda: self.hub.changes)
        return changes

    def tool_runner(self) -> Callable[[Any, Tool], Any]:
        """A synchronous tool runner for :meth:`toolsearch.agent.loop.AgentLoop.run`: calls
        block this thread while the hub's loop thread talks to the server."""

        def run(call: Any, tool: Tool) -> Any:
            return _tool_output(self.call_tool(tool.name, dict(call.input)))

        return run


def _tool_output(result: ToolCallResult) -> Any:
    from toolsearch.agent.loop import ToolOutput

    return ToolOutput(result.as_text(), is_error=result.is_error)
