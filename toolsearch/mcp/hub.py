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
- every index update runs in one worker thread, never on the event loop, and updates
  coalesce: changes that arrive while one is applied are applied together next, as one diff,
  so a server that changes its tools all the time costs work in proportion to its changes and
  never holds up the others. A server is pending until its first listing is searchable, and
  never again because of another server; a change of :data:`OFF_LOOP_TOOLS` tools or more (a
  large server connecting) builds a new engine aside while searches use the current one;
- a backend that fails to write (a database outage) keeps every server: the update is retried
  until it succeeds, and the engine then re-indexes the whole pool (docs/concurrency.md);
- searches from :meth:`McpHub.asearch` run in the hub's own threads, at most
  ``search_threads`` at a time and at a lower CPU priority (:data:`SEARCH_NICE`), so calls,
  listings and health answers never wait behind them; index updates never run in those
  threads.

Deny rules (docs/reference-behaviour.md §6) are applied before the engine sees a tool, so a
denied tool is neither found nor callable. Calls forward to the tool's server; whatever goes
wrong comes back as a :class:`ToolCallResult` with ``is_error`` set.

:class:`McpHub` is async (anyio). :class:`BlockingMcpHub` runs one on a background event-loop
thread for synchronous agent loops.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import time
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import TracebackType
from typing import Any

import anyio
import anyio.abc
import anyio.to_thread

from toolsearch.backend import SearchBackend
from toolsearch.engine import DEFAULT_MAX_RESULTS, DEFAULT_MAX_RESULTS_CAP, SearchResult, ToolSearch
from toolsearch.errors import ConfigError, QueryError
from toolsearch.mcp.client import (
    DEFAULT_CALL_TIMEOUT,
    DEFAULT_MAX_MESSAGE_BYTES,
    DEFAULT_MAX_TOOLS,
    DEFAULT_STARTUP_TIMEOUT,
    RECONNECT_DELAYS,
    McpServerConnection,
    ProtocolMode,
    ServerStatus,
    ToolCallResult,
    require_sdk,
)
from toolsearch.mcp.config import McpConfig, ServerConfig, check_tool_prefixes
from toolsearch.mcp.search_threads import SearchThreads
from toolsearch.permissions import DenyRule, filter_denied, parse_rules, unmatched_rules
from toolsearch.tool import MCP_PREFIX, Tool, normalize_name_part

__all__ = [
    "MAX_CHANGES",
    "MAX_REMOVED",
    "OFF_LOOP_TOOLS",
    "SERVER_SHARE",
    "UPDATE_INTERVAL",
    "BlockingMcpHub",
    "HubSearchResult",
    "McpHub",
    "ServerState",
    "ToolChange",
]


logger = logging.getLogger("toolsearch.mcp.hub")

#: A change of at least this many tools builds a new engine aside (searches keep the old one).
OFF_LOOP_TOOLS = 500
#: Tool changes kept for :attr:`McpHub.changes` (older ones are dropped; their count is kept).
MAX_CHANGES = 1000
#: Removed tool names remembered to say why they are gone (the oldest are forgotten first).
MAX_REMOVED = 10_000
#: Seconds between two index updates of one server while its changes keep arriving: a
#: server that re-lists all the time is applied at most this often, its changes coalesced
#: into one diff.
UPDATE_INTERVAL = 0.5
#: The share of the indexing time one re-listing server may take: after an update of it
#: that took t seconds, its next one waits t * (1 - share) / share (and at least
#: :data:`UPDATE_INTERVAL`), and other servers' updates run in between.
SERVER_SHARE = 0.25
#: How much nicer search threads are than the process's main thread (its event loop), so a
#: saturated machine serves calls first.
SEARCH_NICE = 10
#: Searches run at once in the hub's search threads by default.
DEFAULT_SEARCH_THREADS = 4
#: Seconds between attempts to apply an index update that failed (doubling up to the last).
_RETRY_DELAYS = (0.25, 0.5, 1.0, 2.0)


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
    #: Why the latest index update failed (it is being retried), or None.
    index_error: str | None = None
    #: Members of the search backend that failed (a hybrid's embedding member whose model
    #: cannot be loaded), with why: results come from the other members only.
    degraded: Mapping[str, str] = field(default_factory=dict)

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
        if self.degraded:
            text += f"\n{self.degraded_text()}"
        return text

    def degraded_text(self) -> str:
        """One sentence naming the failed search members ("" when none failed)."""
        if not self.degraded:
            return ""
        listing = "; ".join(f"{name} ({why})" for name, why in self.degraded.items())
        return f"Search is degraded, ranking without: {listing}"

    def to_record(self) -> dict[str, Any]:
        """The engine's record plus ``failed_mcp_servers``."""
        record = self.result.to_record()
        record["failed_mcp_servers"] = dict(self.failed_servers)
        if self.index_error is not None:
            record["index_error"] = self.index_error
        if self.degraded:
            record["search_degraded"] = dict(self.degraded)
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
    returns at once (servers show up as pending until their tools are searchable). ``tools``
    are extra, non-MCP tools to put in the same pool (a built-in wins a name clash). ``deny``
    holds permission rules; ``backend`` and ``backend_options`` choose the ranking backend as
    for :class:`ToolSearch`. ``on_change`` is called on the event loop with every
    :class:`ToolChange`. ``max_tools`` caps how many tools one server may list and
    ``max_message_bytes`` how large one message from a stdio server may be (a larger tool
    result is an error result; docs/security.md, "Hostile servers"). ``search_threads`` bounds
    how many :meth:`asearch` calls run at once. Servers whose tools could take each other's
    names are refused (:func:`~toolsearch.mcp.config.check_tool_prefixes`).
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
        search_threads: int = DEFAULT_SEARCH_THREADS,
        reconnect_delays: Sequence[float] = RECONNECT_DELAYS,
    ) -> None:
        configs = list(servers.servers if isinstance(servers, McpConfig) else servers)
        if configs:
            require_sdk()
        names = [c.name for c in configs]
        _check_options(configs, startup_timeout, call_timeout, max_tools, max_message_bytes)
        if isinstance(search_threads, bool) or not isinstance(search_threads, int):
            raise ConfigError(f"search_threads must be a positive integer, got {search_threads!r}")
        if search_threads < 1:
            raise ConfigError(f"search_threads must be a positive integer, got {search_threads!r}")
        self.search_threads = search_threads
        if not all(isinstance(d, int | float) and 0 <= d < float("inf") for d in reconnect_delays):
            raise ConfigError(
                f"reconnect_delays must be seconds (0 or more), got {list(reconnect_delays)!r}"
            )
        #: Pauses before reconnecting a server that went away (empty: never reconnect).
        self.reconnect_delays = tuple(reconnect_delays)
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
        self._removed: OrderedDict[str, str] = OrderedDict()
        self._changes: deque[ToolChange] = deque(maxlen=MAX_CHANGES)
        self._change_count = 0
        self._changed = anyio.Event()
        self._stack: contextlib.AsyncExitStack | None = None
        self._tasks: anyio.abc.TaskGroup | None = None
        #: Servers whose latest listing the engine has not applied yet, and the names of the
        #: tools changed since (a tool changed by several listings counts once).
        self._unapplied: set[str] = set()
        self._applying: set[str] = set()
        self._unapplied_tools: dict[str, set[str]] = {}
        #: When each relisting server may next be applied (its share of the indexing time).
        self._next_update: dict[str, float] = {}
        #: Connected servers whose tools have been searchable at least once.
        self._searchable: set[str] = set()
        self._dirty = anyio.Event()
        self._searchers = SearchThreads(search_threads, SEARCH_NICE)
        self.index_error: str | None = None
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
        stack.callback(self._search_threads().close)
        tasks.start_soon(self._index_loop, name="toolsearch index updates")
        for connection in self._connections.values():
            run = functools.partial(connection.run_supervised, self.reconnect_delays)
            tasks.start_soon(run, name=f"mcp server {connection.name}")
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
        """Wait until no server is pending (every server's tools are searchable, or it
        failed); ``False`` if ``timeout`` ran out."""
        return await self.wait_until(lambda hub: not hub.pending_servers, timeout)

    async def wait_until(
        self, predicate: Callable[[McpHub], bool], timeout: float | None = None
    ) -> bool:
        """Wait until ``predicate(hub)`` holds (checked after every change and index update)."""
        with anyio.move_on_after(timeout):
            while not predicate(self):
                await self._changed.wait()
            return True
        return False

    async def wait_indexed(self, timeout: float | None = None) -> bool:
        """Wait until the engine holds every server's latest listing."""
        return await self.wait_until(lambda hub: not (hub._unapplied or hub._applying), timeout)

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
        """Servers still connecting or whose first listing is not searchable yet."""
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
        """The permitted pool (local and MCP tools), in pool order; a tool whose server no
        longer lists it is gone at once, before the index update that drops it."""
        return [tool for tool in self.engine.pool if self._listed(tool)]

    @property
    def changes(self) -> list[ToolChange]:
        """The latest :data:`MAX_CHANGES` tool changes, oldest first."""
        return list(self._changes)

    @property
    def change_count(self) -> int:
        """How many tool changes the hub has made since it started."""
        return self._change_count

    def changes_since(self, seen: int) -> tuple[list[ToolChange], int, int]:
        """Changes after the first ``seen`` ever made: ``(changes, now_seen, missed)``, where
        ``missed`` counts changes already dropped from the bounded history."""
        total = self._change_count
        kept_from = total - len(self._changes)
        start = max(seen, kept_from)
        fresh = list(self._changes)[start - kept_from :] if start < total else []
        return fresh, total, max(0, kept_from - seen)

    def connection(self, server: str) -> McpServerConnection:
        """The connection object of one server (for inspection and tests)."""
        try:
            return self._connections[server]
        except KeyError:
            raise ConfigError(
                f"no MCP server named {server!r}; configured: {', '.join(self._connections)}"
            ) from None

    def tool(self, name: str) -> Tool | None:
        """A permitted tool by exact name (not one its server no longer lists)."""
        tool = self.engine.get(name)
        return tool if tool is not None and self._listed(tool) else None

    def _listed(self, tool: Tool) -> bool:
        """Whether ``tool`` is local or its server still lists it."""
        listed = self._server_tools.get(tool.server or "")
        return listed is None or tool.name in listed

    def is_denied(self, name: str) -> bool:
        """Whether a permission rule denies the tool called ``name`` (any string)."""
        return any(rule.matches_name(name) for rule in self.rules)

    def _pending(self) -> tuple[str, ...]:
        return tuple(
            n
            for n, c in self._connections.items()
            if c.status == "connecting" or (c.status == "connected" and n not in self._searchable)
        )

    def defer_all_tools(self) -> None:
        """Make every MCP tool searchable, ``alwaysLoad`` ones included: for a gateway, which
        sends no tool definitions up front, "always loaded" must still mean "findable"."""
        if not self._defer_all:
            self._defer_all = True
            self._visible = {}
            self.engine.set_tools(self._visible_pool())

    def _visible_pool(self, only: set[str] | None = None) -> list[Tool]:
        """The permitted pool. Each tool's visible form (denied: None; else itself, or a copy
        without denied aliases or, for a gateway, without ``alwaysLoad``) is kept while the
        tool is the same object, so a change costs rule checks for the changed tools only and
        the engine sees the other tools unchanged. With ``only``, servers not in it keep the
        tools the engine holds for them now (their changes wait for their own update)."""
        cache: dict[int, tuple[Tool, Tool | None]] = {}
        pool: list[Tool] = []
        sources: list[tuple[Sequence[Tool], bool]] = [(self._local, False)]
        if only is not None:
            held = {n for n in self._connections if n not in only}
            pool += [t for t in self.engine.pool if t.server in held and t.mcp]
            cache = {k: v for k, v in self._visible.items() if v[0].server in held}
        sources += [
            (c.tools, self._defer_all)
            for n, c in self._connections.items()
            if only is None or n in only
        ]
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

    # ------------------------------------------------------------------ server changes

    def _connection_changed(self, connection: McpServerConnection) -> None:
        """Record what one server event changed and hand the pool to the index loop. Runs on
        the event loop inside the connection's task, so it never raises and never waits."""
        before = self._server_tools[connection.name]
        after = {tool.name: tool.content_hash() for tool in connection.tools}
        added = tuple(sorted(n for n in after if n not in before))
        removed = tuple(sorted(n for n in before if n not in after))
        changed = tuple(sorted(n for n in after if n in before and before[n] != after[n]))
        self._server_tools[connection.name] = after
        status = connection.status
        if status != "connected":
            self._searchable.discard(connection.name)
        if status == "connecting" and not (before or after):
            self.engine.pending_servers = self._pending()
            self._wake()
            return
        reason = _reason(connection, bool(before))
        self._forget_removed(added)
        self._remember_removed(removed, _why_removed(connection, reason))
        if added or removed or changed or status == "connected":
            self._unapplied.add(connection.name)
            self._unapplied_tools.setdefault(connection.name, set()).update(added, removed, changed)
            self._dirty.set()
        self.engine.pending_servers = self._pending()
        if added or removed or changed or reason in ("connected", "failed", "disconnected"):
            self._record(
                ToolChange(
                    server=connection.name,
                    reason=reason,
                    added=added,
                    removed=removed,
                    changed=changed,
                    detail=connection.error if reason in ("failed", "disconnected") else None,
                )
            )
        self._wake()

    def _forget_removed(self, names: Iterable[str]) -> None:
        for name in names:
            self._removed.pop(name, None)

    def _remember_removed(self, names: Iterable[str], why: str) -> None:
        for name in names:
            self._removed[name] = why
            self._removed.move_to_end(name)
        while len(self._removed) > MAX_REMOVED:
            self._removed.popitem(last=False)

    def _record(self, change: ToolChange) -> None:
        self._changes.append(change)
        self._change_count += 1
        if self.on_change is not None:
            try:
                self.on_change(change)
            except Exception:
                logger.exception("the hub's on_change callback failed")

    # ------------------------------------------------------------------ index updates

    async def _index_loop(self) -> None:
        """Apply pool changes one update at a time, off the event loop, one batch of servers
        at a time (:meth:`_next_batch`): a server's first listing before any relisting, and a
        server that keeps relisting at most as often as its share of the indexing time allows.
        A failed update is retried (with growing pauses) until the backend takes it, and no
        server is dropped for it."""
        failures = 0
        while True:
            if not self._unapplied:
                await self._dirty.wait()
            self._dirty = anyio.Event()
            batch, wait = self._next_batch(anyio.current_time())
            if not batch:  # every server with changes is over its share: until the first may
                with anyio.move_on_after(wait):
                    await self._dirty.wait()
                continue
            self._applying = batch
            self._unapplied -= batch
            changed = set().union(*(self._unapplied_tools.pop(n, set()) for n in batch))
            connected = {n for n in batch if self._connections[n].status == "connected"}
            relisted = batch & self._searchable
            began = anyio.current_time()
            try:
                await self._apply(self._visible_pool(batch), len(changed))
            except Exception as exc:
                failures += 1
                self._unapplied |= batch
                self._index_failed(exc, dict.fromkeys(batch, changed))
                await anyio.sleep(_RETRY_DELAYS[min(failures, len(_RETRY_DELAYS)) - 1])
                continue
            finally:
                self._applying = set()
            if failures:
                logger.warning("the search index is up to date again")
            failures, self.index_error = 0, None
            cost = anyio.current_time() - began
            for name in relisted:  # its next relisting waits in proportion to this one's cost
                self._next_update[name] = anyio.current_time() + max(
                    UPDATE_INTERVAL, cost * (1 - SERVER_SHARE) / SERVER_SHARE
                )
            self._searchable |= {n for n in connected if self._connections[n].status == "connected"}
            self.engine.pending_servers = self._pending()
            self._wake()

    def _next_batch(self, now: float) -> tuple[set[str], float]:
        """The servers to apply next, or none and how long until one may be: servers whose
        tools are not searchable yet (connecting, or just gone) come first and alone, so a
        static server is searchable after its own indexing whatever its neighbours do; then
        every server whose share allows it (:data:`SERVER_SHARE`)."""
        due = {n for n in self._unapplied if self._next_update.get(n, 0.0) <= now}
        fresh = {n for n in due if n not in self._searchable}
        if fresh or due:
            return fresh or due, 0.0
        return set(), min(self._next_update[n] for n in self._unapplied) - now

    def _index_failed(self, exc: Exception, changed: Mapping[str, set[str]]) -> None:
        """Keep the failed update for the next attempt and say why, once per new reason."""
        for name, tools in changed.items():
            self._unapplied_tools.setdefault(name, set()).update(tools)
        self._dirty.set()
        message = str(exc) or type(exc).__name__
        if message != self.index_error:
            logger.warning("the search index could not be updated (%s); retrying", message)
        self.index_error = message
        self._wake()

    async def _apply(self, pool: list[Tool], size: int) -> None:
        """Give the engine ``pool``: in place (a worker thread; the engine takes the change
        under its lock, at a cost in proportion to the change) or, for a change of
        :data:`OFF_LOOP_TOOLS` tools or more that is also a quarter of the pool or more (a
        large server connecting), on a backend that can be made again, by building a new
        engine aside while searches use the current one, then swapping it in."""
        if self._can_swap and size >= OFF_LOOP_TOOLS and size * 4 >= len(pool):
            pending = self.engine.pending_servers
            build = functools.partial(
                ToolSearch, pool, **self._engine_options, pending_servers=pending
            )
            self.engine = await anyio.to_thread.run_sync(build, abandon_on_cancel=True)
            return
        await anyio.to_thread.run_sync(self.engine.set_tools, pool, abandon_on_cancel=True)

    def _wake(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    # ------------------------------------------------------------------ search and call

    def search(self, query: str, max_results: int = DEFAULT_MAX_RESULTS) -> HubSearchResult:
        """Run one ToolSearch query over the permitted pool, in the calling thread (any
        thread; raises :class:`QueryError` on invalid arguments, like
        :meth:`ToolSearch.search`, and :class:`~toolsearch.errors.BackendError` when the
        backend cannot answer)."""
        return self._hub_result(self.engine.search(query, max_results))

    def search_many(
        self, queries: Sequence[str], max_results: int = DEFAULT_MAX_RESULTS
    ) -> HubSearchResult:
        """Several queries in one call, merged as :meth:`ToolSearch.search_many` merges them."""
        return self._hub_result(self.engine.search_many(queries, max_results))

    async def asearch(
        self, query: str | Sequence[str], max_results: int = DEFAULT_MAX_RESULTS
    ) -> HubSearchResult:
        """:meth:`search` (or, for a list of queries, :meth:`search_many`) in one of the hub's
        search threads, at most ``search_threads`` at once, so the event loop stays free for
        calls."""
        if not isinstance(query, str) and (isinstance(query, bytes) or not query):
            raise QueryError("queries must be a non-empty list of strings")
        if isinstance(query, str):
            run = functools.partial(self.search, query, max_results)
        else:
            run = functools.partial(self.search_many, list(query), max_results)
        return await self._search_threads().run(run)

    def _search_threads(self) -> SearchThreads:
        """The hub's search threads (made again after the hub stopped and closed them)."""
        if self._searchers.closed:
            self._searchers = SearchThreads(self.search_threads, SEARCH_NICE)
        return self._searchers

    def _hub_result(self, result: SearchResult) -> HubSearchResult:
        found = {name: self.tool(name) for name in result.names}
        if None in found.values():  # removed since the engine last changed
            kept = tuple(m for m in result.matches if found[m.name] is not None)
            result = replace(result, matches=kept)
        return HubSearchResult(
            result=result,
            tools=tuple(tool for tool in found.values() if tool is not None),
            failed_servers=self.failed_servers,
            index_error=self.index_error,
            degraded=self.degraded_members(),
        )

    def degraded_members(self) -> dict[str, str]:
        """Members of the engine's backend that failed, with why (a hybrid reports its
        members' states; other backends have none)."""
        states = getattr(self.engine.backend, "member_states", None)
        if not callable(states):
            return {}
        return {
            name: state.removeprefix("failed: ")
            for name, state in states().items()
            if isinstance(state, str) and state.startswith("failed")
        }

    def unavailable_reason(self, name: str) -> str:
        """Why ``name`` cannot be called now: denied, removed, its server failed or is still
        connecting, or no such tool."""
        if self.is_denied(name):
            return f"tool {name!r} is not available: denied by a permission rule"
        server = _server_of(name, self._prefixes)
        coming_back = (
            server is not None
            and bool(self.reconnect_delays)
            and self._connections[server].ever_connected
            and self._connections[server].status != "connected"
        )
        if name in self._removed and not coming_back:
            return f"tool {name!r} was removed: {self._removed[name]}"
        if server is not None:
            connection = self._connections[server]
            if server in self._pending():
                doing = "connecting" if connection.status == "connecting" else "being indexed"
                if connection.status == "connecting" and connection.ever_connected:
                    doing = "reconnecting"
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


def _reason(connection: McpServerConnection, had_tools: bool) -> str:
    """The :class:`ToolChange` reason of a server event."""
    if connection.status in ("disconnected", "failed"):
        return connection.status
    return "list_changed" if had_tools or not connection.first_listing else "connected"


def _why_removed(connection: McpServerConnection, reason: str) -> str:
    name = connection.name
    if reason == "disconnected":
        return f"MCP server {name!r} disconnected" + (
            f": {connection.error}" if connection.error else ""
        )
    if reason == "failed":
        return f"MCP server {name!r} failed: {connection.error}"
    return f"MCP server {name!r} no longer lists it"


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
        return self.hub.search(query, max_results)  # the engine is thread-safe

    def search_many(
        self, queries: Sequence[str], max_results: int = DEFAULT_MAX_RESULTS
    ) -> HubSearchResult:
        """:meth:`McpHub.search_many`, from any thread."""
        return self.hub.search_many(queries, max_results)

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
