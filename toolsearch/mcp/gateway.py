"""``toolsearch serve``: one MCP server in front of many, with tool search instead of a wall of
tool definitions.

An MCP host (Claude Desktop, Cursor, an agent framework) connects to the gateway like to any
other MCP server and sees two tools, whatever the configured servers offer:

``search_tools``  ``{query, max_results?}`` — the ToolSearch query syntax (``select:a,b``, exact
                  names, ``mcp__server`` prefixes, keywords with ``+required`` terms); returns
                  the matching tools with their input schemas. ``{queries: [...]}`` instead
                  of ``query`` searches several queries (the steps of a task) in one call and
                  merges them round-robin, each tool once (``ToolSearch.search_many``)
``call_tool``     ``{name, arguments?}`` — runs a tool by its ``mcp__<server>__<tool>`` name on
                  its server and returns that server's result unchanged

Servers still connecting are named in no-match results, failed servers with their errors;
tools removed because their server disconnected are announced in the next search. Permission
rules apply before search: a denied tool is neither found nor run.

The gateway serves stdio (the default, what hosts launch) or streamable HTTP, where every
request passes Host/Origin allow-lists and, off loopback, a bearer token (docs/security.md,
"HTTP gateway").
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import os
import signal
import socket
import stat
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import anyio

from toolsearch.engine import DEFAULT_MAX_RESULTS, tool_search_tool
from toolsearch.errors import BackendError, ConfigError, QueryError
from toolsearch.mcp.client import ToolCallResult, require_sdk
from toolsearch.mcp.config import McpConfig
from toolsearch.mcp.http_connections import ConnectionLimits
from toolsearch.mcp.hub import HubSearchResult, McpHub, ToolChange

if TYPE_CHECKING:
    import mcp_types
    from mcp.server.lowlevel import Server

__all__ = [
    "CALL_TOOL_NAME",
    "LOOPBACK_WARNING",
    "MAX_QUERIES",
    "MAX_REMOVED_NOTICES",
    "MAX_SESSIONS",
    "SEARCH_TOOL_NAME",
    "SHUTDOWN_GRACE",
    "Gateway",
    "GatewayTransport",
    "serve",
]

logger = logging.getLogger("toolsearch.mcp.gateway")

SEARCH_TOOL_NAME = "search_tools"
#: Removed tools named in one search result (the rest are counted).
MAX_REMOVED_NOTICES = 50
#: Client sessions whose place in the change history is kept (least recently used dropped).
MAX_SESSIONS = 4096
#: The most queries one ``search_tools`` call may carry in ``queries``.
MAX_QUERIES = 10
CALL_TOOL_NAME = "call_tool"
GatewayTransport = Literal["stdio", "http"]

SEARCH_DESCRIPTION = """\
Search the tools of every MCP server behind this gateway and get their full definitions \
(name, description, input_schema). Tools are not listed up front: search first, then run one \
with call_tool.

Query forms:
- "slack send message" - keyword search, up to max_results best matches
- "+github issue" - require "github" in the name, description or hint, rank by the rest
- "select:mcp__github__create_issue,mcp__slack__post" - fetch these exact tools by name
- "mcp__github" - the tools of one server

For a task of several steps, pass "queries" (one query a step) instead of "query": each is \
searched and the results merged, each tool once."""

CALL_DESCRIPTION = """\
Run a tool found with search_tools. Pass its exact name (mcp__<server>__<tool>) and its \
arguments as an object matching the tool's input_schema. The tool's own result is returned; \
errors from the tool or its server come back as error results."""


def _search_schema(base: dict[str, Any]) -> dict[str, Any]:
    """The ToolSearch input schema plus ``queries`` (the steps of a task, searched in one
    call); one of ``query`` and ``queries`` is needed, which the handler checks."""
    properties = dict(base.get("properties", {}))
    properties["queries"] = {
        "type": "array",
        "items": {"type": "string"},
        "minItems": 1,
        "maxItems": MAX_QUERIES,
        "description": "Instead of query: several queries (e.g. one per step of a task), "
        "searched one by one and merged round-robin, each tool once",
    }
    return {**base, "properties": properties, "required": []}


def _query_problem(query: object, queries: object) -> str | None:
    """What is wrong with a ``search_tools`` call's ``query`` / ``queries``, or None."""
    if queries is None:
        if not isinstance(query, str):
            return f"needs a string 'query' (or 'queries'), got {type(query).__name__}"
        return None
    if query is not None:
        return "give 'query' or 'queries', not both"
    if (
        not isinstance(queries, list)
        or not queries
        or not all(isinstance(item, str) for item in queries)
    ):
        return "'queries' must be a non-empty array of strings"
    if len(queries) > MAX_QUERIES:
        return f"'queries' holds {len(queries)} queries; at most {MAX_QUERIES} a call"
    return None


@dataclass(frozen=True, slots=True)
class _Removed:
    """Tools removed since a session's last search: ``names`` (name -> why) named, ``more``
    not named, ``missed`` changes older than the hub's bounded history."""

    names: dict[str, str]
    more: int = 0
    missed: int = 0

    def counts(self) -> dict[str, int]:
        return {"removed_tools_not_shown": self.more, "changes_missed": self.missed}

    def summary(self) -> str:
        parts = []
        if self.more:
            parts.append(f"{self.more} more tools were removed")
        if self.missed:
            parts.append(f"{self.missed} older changes are no longer known")
        return "; ".join(parts) + "; search again for current tools"


def _found_payload(
    found: HubSearchResult, tools: list[dict[str, Any]], removed: _Removed, merged: int
) -> dict[str, Any]:
    """The text payload of a result that matched: the tools, and every server or removal
    that makes it partial."""
    payload: dict[str, Any] = {"tools": tools}
    if merged:
        payload["merged"] = f"{merged} queries, merged round-robin, each tool once"
    if found.result.not_found:
        payload["not_found"] = list(found.result.not_found)
    if found.pending_servers:
        payload["pending_mcp_servers"] = list(found.pending_servers)
    if found.failed_servers:
        payload["failed_mcp_servers"] = dict(found.failed_servers)
    if found.index_error is not None:
        payload["index_error"] = f"{found.index_error}; retrying, results may miss recent changes"
    if found.degraded:
        payload["search_degraded"] = found.degraded_text()
    if removed.names:
        payload["removed_tools"] = dict(removed.names)
    if removed.more or removed.missed:
        payload["removed_tools_note"] = removed.summary()
    return payload


def _session_key(ctx: Any) -> Hashable:
    """Who is asking: the HTTP ``Mcp-Session-Id`` when there is one; else ``None``, one place
    shared by every request without a session (the stdio client, or sessionless HTTP, where
    a request carries nothing that says which client sent it)."""
    headers = getattr(getattr(ctx, "request", None), "headers", None)
    session_id = headers.get("mcp-session-id") if headers is not None else None
    return str(session_id) if session_id else None


class Gateway:
    """The MCP server side: ``search_tools`` and ``call_tool`` over an :class:`McpHub`."""

    def __init__(self, hub: McpHub, *, name: str = "toolsearch") -> None:
        self.hub = hub
        self.name = name
        #: Per client session: how many hub changes its last search had seen (bounded LRU).
        self._sessions: OrderedDict[Hashable, int] = OrderedDict()
        hub.defer_all_tools()  # a gateway client has no other way to learn of alwaysLoad tools

    def tool_definitions(self) -> list[dict[str, Any]]:
        """The gateway's two tools as MCP ``tools/list`` entries."""
        cap = self.hub.engine.max_results_cap
        search_schema = _search_schema(dict(tool_search_tool(cap).input_schema))
        call_schema: dict[str, Any] = {
            "type": "object",
            "properties": {
                "name": {
                    "type": "string",
                    "description": "The tool's exact name, as search_tools returned it",
                },
                "arguments": {
                    "type": "object",
                    "description": "The tool's arguments, matching its input_schema",
                },
            },
            "required": ["name"],
            "additionalProperties": False,
        }
        read_only = {"readOnlyHint": True, "openWorldHint": False}
        return [
            {
                "name": SEARCH_TOOL_NAME,
                "description": SEARCH_DESCRIPTION,
                "inputSchema": search_schema,
                "annotations": read_only,
            },
            {"name": CALL_TOOL_NAME, "description": CALL_DESCRIPTION, "inputSchema": call_schema},
        ]

    # ------------------------------------------------------------------ handlers

    async def search(
        self, arguments: Mapping[str, Any], session: Hashable = None
    ) -> ToolCallResult:
        """Answer one ``search_tools`` call for the client ``session`` (bad arguments and an
        unavailable index are error results; the search runs off the event loop)."""
        query, queries = arguments.get("query"), arguments.get("queries")
        max_results = arguments.get("max_results", DEFAULT_MAX_RESULTS)
        problem = _query_problem(query, queries)
        if problem is not None:
            return ToolCallResult.error(f"search_tools: {problem}")
        try:
            asked = query if isinstance(query, str) else list(queries or ())
            found = await self.hub.asearch(asked, max_results)
        except QueryError as exc:
            return ToolCallResult.error(f"search_tools: {exc}")
        except BackendError as exc:
            return ToolCallResult.error(
                f"search_tools: the search index is unavailable: {exc}; retrying — "
                "search again shortly"
            )
        except Exception as exc:
            logger.exception("search_tools failed")
            return ToolCallResult.error(f"search_tools failed: {type(exc).__name__}: {exc}")
        removed = self._removed_since_last_search(session)
        return self._search_result(found, removed, len(queries) if queries is not None else 0)

    def _removed_since_last_search(self, session: Hashable) -> _Removed:
        """Tools removed since ``session``'s previous search, at most
        :data:`MAX_REMOVED_NOTICES` of them named (a new session starts from now: it has
        seen no tool yet)."""
        seen = self._sessions.pop(session, None)
        start = self.hub.change_count if seen is None else seen
        changes, now, missed = self.hub.changes_since(start)
        self._sessions[session] = now
        while len(self._sessions) > MAX_SESSIONS:
            self._sessions.popitem(last=False)
        removed: dict[str, str] = {}
        for change in changes:
            for name in change.removed:
                removed[name] = self.hub.unavailable_reason(name)
            for name in change.added:
                removed.pop(name, None)
        shown = dict(itertools.islice(removed.items(), MAX_REMOVED_NOTICES))
        return _Removed(shown, len(removed) - len(shown), missed)

    def _search_result(
        self, found: HubSearchResult, removed: _Removed, merged: int
    ) -> ToolCallResult:
        """The call's result; ``merged`` is how many ``queries`` were merged (0: one query).
        Pending and failed servers are named whether or not something matched, so a client
        knows when a result may be partial."""
        tools = [{**tool.definition(), "server": tool.server} for tool in found.tools]
        record: dict[str, Any] = {
            "query": found.result.query,
            "merged_queries": merged,
            "tools": tools,
            "total_deferred_tools": found.result.total_deferred_tools,
            "pending_mcp_servers": list(found.pending_servers),
            "failed_mcp_servers": dict(found.failed_servers),
            "removed_tools": dict(removed.names),
            "not_found": list(found.result.not_found),
        }
        record.update(removed.counts())
        if found.index_error is not None:
            record["index_error"] = found.index_error
        if found.degraded:
            record["search_degraded"] = dict(found.degraded)
        if tools:
            text = json.dumps(
                _found_payload(found, tools, removed, merged), ensure_ascii=False, indent=1
            )
        else:
            text = "\n".join(filter(None, (found.text(), found.result.not_found_text())))
            if removed.names:
                text += "\nRemoved since the last search: " + "; ".join(removed.names.values())
            if removed.more or removed.missed:
                text += f"\n{removed.summary()}"
        return ToolCallResult(({"type": "text", "text": text},), False, record)

    async def call(self, arguments: Mapping[str, Any]) -> ToolCallResult:
        """Answer one ``call_tool`` call: forward to the named tool's server."""
        name = arguments.get("name")
        tool_arguments = arguments.get("arguments")
        if not isinstance(name, str) or not name.strip():
            return ToolCallResult.error("call_tool needs the tool's 'name' as a non-empty string")
        if tool_arguments is not None and not isinstance(tool_arguments, Mapping):
            return ToolCallResult.error(
                f"call_tool: 'arguments' must be an object, got {type(tool_arguments).__name__}"
            )
        return await self.hub.call_tool(name.strip(), tool_arguments)

    async def handle(
        self, name: str, arguments: Mapping[str, Any] | None, session: Hashable = None
    ) -> ToolCallResult:
        """Dispatch one ``tools/call`` of the gateway from the client ``session``."""
        arguments = arguments or {}
        if name == SEARCH_TOOL_NAME:
            return await self.search(arguments, session)
        if name == CALL_TOOL_NAME:
            return await self.call(arguments)
        return ToolCallResult.error(
            f"unknown tool {name!r}; this gateway has {SEARCH_TOOL_NAME} and {CALL_TOOL_NAME}"
        )

    # ------------------------------------------------------------------ the MCP server

    def server(self) -> Server[Any]:
        """The gateway as a low-level SDK ``Server``."""
        import mcp_types as types
        from mcp.server.context import ServerRequestContext
        from mcp.server.lowlevel import Server

        from toolsearch import __version__

        definitions = self.tool_definitions()
        listing = types.ListToolsResult.model_validate({"tools": definitions})
        schemas = {tool["name"]: tool["inputSchema"] for tool in definitions}

        async def list_tools(
            ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
        ) -> types.ListToolsResult:
            return listing

        async def call_tool(
            ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
        ) -> types.CallToolResult:
            return _to_mcp(await self.handle(params.name, params.arguments, _session_key(ctx)))

        return Server(
            self.name,
            version=__version__,
            title="toolsearch gateway",
            description="Tool search over the tools of many MCP servers",
            instructions="Use search_tools to find a tool and get its schema, then call_tool "
            "to run it.",
            on_list_tools=list_tools,
            on_call_tool=call_tool,
            # without it the SDK runs the tools/list handler on every tools/call to check
            # Mcp-Param-* headers: a second request's work for each search
            get_tool_input_schema=schemas.get,
        )

    async def run_stdio(self) -> None:
        """Serve on stdin/stdout until the client closes stdin (or Ctrl-D in a terminal)."""
        from mcp.server.stdio import stdio_server

        server = self.server()
        with _stdin_lines() as lines:
            async with stdio_server(stdin=lines) as (read, write):  # type: ignore[arg-type]
                await server.run(read, write, server.create_initialization_options())

    async def run_http(
        self,
        host: str = "127.0.0.1",
        port: int = 8000,
        *,
        path: str = "/mcp",
        on_ready: Callable[[str], None] | None = None,
        token: str | None = None,
        allow_hosts: Iterable[str] = (),
        allow_origins: Iterable[str] = (),
        connections: ConnectionLimits | None = None,
        log: Callable[[str], None] | None = None,
        unix_socket: str | Path | None = None,
    ) -> int | None:
        """Serve streamable HTTP on ``host:port`` (``port=0`` picks a free one), or on the
        Unix domain socket ``unix_socket`` instead, until SIGINT or SIGTERM, and return that
        signal's number; ``on_ready`` gets the endpoint URL (``unix:<file>:<path>`` for a
        socket) once it listens.

        Every request passes :class:`~toolsearch.mcp.http_security.HttpSecurity` first:
        ``Host`` and ``Origin`` allow-lists and, when ``token`` is set, a bearer token — which
        a non-loopback ``host`` requires (``ConfigError`` otherwise, before listening). A Unix
        socket is made readable and writable by its owner only (mode 0600): the file's
        permissions decide who connects, and ``token`` is optional there too.
        Before that, ``connections`` bounds open connections and how long a request may take
        to arrive (:mod:`toolsearch.mcp.http_connections`); refusals are reported to ``log``
        (default: this module's logger), one line per kind per interval."""
        from mcp.server.transport_security import TransportSecuritySettings

        from toolsearch.mcp.http_security import HttpSecurity, SecurityMiddleware

        if unix_socket is not None:
            security = HttpSecurity.for_unix_socket(token=token)
            sock = unix_listening_socket(unix_socket)
            url = f"unix:{unix_socket}:{path}"
        else:
            # Checked before binding so a refused address never listens; re-made for port 0.
            HttpSecurity.for_address(host, port or 1, token=token)
            sock = listening_socket(host, port)
            bound = sock.getsockname()[1]
            security = HttpSecurity.for_address(
                host, bound, allow_hosts=allow_hosts, allow_origins=allow_origins, token=token
            )
            shown = f"[{host}]" if sock.family == socket.AF_INET6 else host
            url = f"http://{shown}:{bound}{path}"
        own_checks_off = TransportSecuritySettings(enable_dns_rebinding_protection=False)
        app = SecurityMiddleware(
            self.server().streamable_http_app(
                streamable_http_path=path, host=host, transport_security=own_checks_off
            ),
            security,
        )
        try:
            with sock:
                return await _serve_uvicorn(
                    app, sock, connections or ConnectionLimits(), log, url, on_ready
                )
        finally:
            if unix_socket is not None:
                with contextlib.suppress(OSError):
                    os.unlink(unix_socket)


async def _serve_uvicorn(
    app: Any,
    sock: socket.socket,
    connections: ConnectionLimits,
    log: Callable[[str], None] | None,
    url: str,
    on_ready: Callable[[str], None] | None,
) -> int | None:
    """Run uvicorn on ``sock`` under ``connections``, its refusals logged once per kind per
    interval; ``on_ready(url)`` once it is about to accept. Returns the signal that stopped
    it."""
    import uvicorn

    from toolsearch.mcp.http_connections import (
        QuietUvicornWarnings,
        RefusalLog,
        guarded_protocol,
        quiet_accept_errors,
    )

    refusals = RefusalLog(connections.log_interval, log)
    config = uvicorn.Config(
        app,
        log_config=None,
        log_level="warning",
        lifespan="on",
        http=guarded_protocol(connections, refusals),
        timeout_keep_alive=connections.keep_alive,
        # open streams must not hold a stopping gateway for longer than this
        timeout_graceful_shutdown=int(SHUTDOWN_GRACE),
    )
    restore_handler = quiet_accept_errors(asyncio.get_running_loop(), refusals)
    quiet = QuietUvicornWarnings(refusals)
    uvicorn_log = logging.getLogger("uvicorn.error")
    uvicorn_log.addFilter(quiet)
    if on_ready is not None:
        on_ready(url)
    server = _QuietServer(config)
    try:
        await server.serve(sockets=[sock])
        return server.stopped_by
    finally:
        uvicorn_log.removeFilter(quiet)
        restore_handler()


def unix_listening_socket(file: str | Path) -> socket.socket:
    """A Unix domain socket listening at ``file``, made with mode 0600 (created under a
    umask that gives no one else access, so there is no moment it is open to others). A
    socket file left by a gateway that is gone is replaced; a live one, or any other file,
    is a :class:`ConfigError`."""
    file = Path(file)
    if file.exists() or file.is_symlink():
        if not stat.S_ISSOCK(file.lstat().st_mode):
            raise ConfigError(f"cannot listen on {file}: it exists and is not a socket")
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
            if probe.connect_ex(str(file)) == 0:
                raise ConfigError(f"cannot listen on {file}: another server is listening there")
        file.unlink()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    previous = os.umask(0o177)
    try:
        sock.bind(str(file))
        os.chmod(file, 0o600)
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        raise ConfigError(f"cannot listen on {file}: {exc.strerror or exc}") from exc
    finally:
        os.umask(previous)
    return sock


class _StdinLines:
    """The lines of a file descriptor as an async iterator, for the SDK's ``stdio_server``.

    A daemon thread reads them: the SDK reads stdin on one of anyio's worker threads, which a
    cancellation (Ctrl-C) does not abandon and the interpreter waits for at exit, so a gateway
    run by hand in a terminal could not be stopped while nobody typed. Waiting here is an
    asyncio queue, cancelled at once; the bounded queue keeps the SDK's backpressure."""

    def __init__(self, fd: int) -> None:
        import asyncio

        self._loop = asyncio.get_running_loop()
        self._lines: asyncio.Queue[str | None] = asyncio.Queue(maxsize=1)
        reader = threading.Thread(target=self._read, args=(fd,), name="stdin", daemon=True)
        reader.start()

    def _read(self, fd: int) -> None:
        import asyncio

        with open(fd, encoding="utf-8", errors="replace", closefd=False) as stream:
            for line in itertools.chain(iter(stream.readline, ""), [None]):
                try:
                    asyncio.run_coroutine_threadsafe(self._lines.put(line), self._loop).result()
                except (RuntimeError, asyncio.CancelledError):  # the loop is gone or stopping
                    return

    def __aiter__(self) -> _StdinLines:
        return self

    async def __anext__(self) -> str:
        line = await self._lines.get()
        if line is None:
            raise StopAsyncIteration
        return line


@contextlib.contextmanager
def _stdin_lines() -> Iterator[_StdinLines]:
    """Stdin's lines, with fd 0 pointing at the null device meanwhile (as the SDK does), so
    tool servers and other children never read the client's messages."""
    private = os.dup(0)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    try:
        yield _StdinLines(private)
    finally:
        os.dup2(private, 0)  # `private` stays open: the reader thread may still block on it


def listening_socket(host: str, port: int) -> socket.socket:
    """A TCP socket listening on ``host:port``, made before the server starts so that
    connections queue from the moment the URL is announced.

    It is made with protocol ``IPPROTO_TCP`` on purpose: asyncio turns Nagle's algorithm off
    (``TCP_NODELAY``) only on connections whose socket says so, and uvicorn writes a response's
    headers and body in two sends. With Nagle on, the body waits for the client's delayed ACK
    of the headers, about 40 ms on Linux, on every request (docs/gateway.md, "Latency")."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind((host, port))
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc
    return sock


#: Logged by an HTTP gateway on loopback without a token (docs/security.md, "Local users").
LOOPBACK_WARNING = (
    "warning: HTTP on a loopback address without a token: every user of this machine can "
    "search and run these tools as you. Use --unix-socket FILE (only you can connect) or "
    "--token-file FILE"
)

#: Seconds a cancelled HTTP gateway waits for open requests and its lifespan to finish.
SHUTDOWN_GRACE = 5.0


class _QuietServer:
    """uvicorn's server, stopping on SIGINT/SIGTERM without re-raising the signal afterwards
    (the hub still has servers to shut down cleanly)."""

    def __init__(self, config: Any) -> None:
        import uvicorn

        server = uvicorn.Server(config)
        server.capture_signals = self._capture(server)  # type: ignore[method-assign,assignment]
        self._server = server
        #: The signal that stopped the server (the command exits 130 after a SIGINT).
        self.stopped_by: int | None = None

    def _capture(self, server: Any) -> Callable[[], contextlib.AbstractContextManager[None]]:
        def stop(sig: int, frame: Any) -> None:
            self.stopped_by = sig
            server.handle_exit(sig, frame)

        @contextlib.contextmanager
        def capture() -> Iterator[None]:
            if threading.current_thread() is not threading.main_thread():
                yield
                return
            signals = (signal.SIGINT, signal.SIGTERM)
            previous = {sig: signal.signal(sig, stop) for sig in signals}
            try:
                yield
            finally:
                for sig, handler in previous.items():
                    signal.signal(sig, handler)

        return capture

    async def serve(self, sockets: list[socket.socket]) -> None:
        """Serve until a signal or until cancelled. A cancelled uvicorn skips its shutdown,
        leaving its listeners registered with the event loop after their sockets close; a
        later socket that reuses the descriptor would then never accept. So a cancelled
        server still shuts down, shielded, for at most :data:`SHUTDOWN_GRACE` seconds."""
        import anyio

        try:
            await self._server.serve(sockets=sockets)
        except BaseException:
            if self._server.started:
                with anyio.CancelScope(shield=True), anyio.move_on_after(SHUTDOWN_GRACE):
                    await self._server.shutdown(sockets=sockets)
            raise


def _to_mcp(result: ToolCallResult) -> mcp_types.CallToolResult:
    import mcp_types as types

    data: dict[str, Any] = {"content": [dict(block) for block in result.content]}
    if result.is_error:
        data["isError"] = True
    if result.structured_content is not None:
        data["structuredContent"] = result.structured_content
    return types.CallToolResult.model_validate(data)


async def serve(
    config: McpConfig,
    *,
    transport: GatewayTransport = "stdio",
    host: str = "127.0.0.1",
    port: int = 8000,
    on_ready: Callable[[str], None] | None = None,
    log: Callable[[str], None] | None = None,
    token: str | None = None,
    allow_hosts: Iterable[str] = (),
    allow_origins: Iterable[str] = (),
    connections: ConnectionLimits | None = None,
    unix_socket: str | Path | None = None,
    **hub_options: Any,
) -> int | None:
    """Run the gateway for ``config`` until its client goes away (stdio) or it is stopped
    (HTTP: returns the stopping signal's number, once every server is shut down).
    ``hub_options`` go to :class:`McpHub` (``deny``, ``backend``, timeouts...).

    ``log`` gets one line per event worth an operator's eye: a deny rule that matches nothing,
    a server connected (with its tool count), failed or disconnected (with its error), and
    once every server has settled, and refused HTTP connections (one line per kind per
    interval). ``token``, ``allow_hosts``, ``allow_origins`` and ``connections`` guard the
    HTTP transport, which listens on ``unix_socket`` instead of ``host:port`` when it is
    given (see :meth:`Gateway.run_http`). A config without enabled servers is a
    :class:`ConfigError`: such a gateway would serve nothing."""
    _check_servable(config, transport, None if unix_socket else host, port, token)
    require_sdk()
    log = log or (lambda line: None)
    user_change = hub_options.pop("on_change", None)
    watcher = _ServerLog(log)

    def on_change(change: ToolChange) -> None:
        watcher.change(hub, change)
        if user_change is not None:
            user_change(change)

    if transport == "http" and unix_socket is None and token is None:
        log(LOOPBACK_WARNING)
    hub = McpHub(config, on_change=on_change, **hub_options)
    for rule in hub.unmatched_rules:
        log(f"warning: deny rule {rule.text!r} matches no configured server or tool")
    async with hub, anyio.create_task_group() as tasks:
        tasks.start_soon(watcher.settle, hub)
        gateway = Gateway(hub)
        stopped_by: int | None = None
        if transport == "stdio":
            if on_ready is not None:
                on_ready("stdio")
            await gateway.run_stdio()
        else:
            stopped_by = await gateway.run_http(
                host,
                port,
                on_ready=on_ready,
                token=token,
                allow_hosts=allow_hosts,
                allow_origins=allow_origins,
                connections=connections,
                log=log,
                unix_socket=unix_socket,
            )
        tasks.cancel_scope.cancel()
    return stopped_by


def _check_servable(
    config: McpConfig, transport: str, host: str | None, port: int, token: str | None
) -> None:
    """Refuse, before connecting anything, a gateway that would serve nothing or listen
    unprotected."""
    if transport not in ("stdio", "http"):
        raise ConfigError(f"unknown gateway transport {transport!r}; expected 'stdio' or 'http'")
    if not config.servers:
        where = config.path or "the MCP config"
        why = f"every server is disabled ({', '.join(config.disabled)})" if config.disabled else ""
        raise ConfigError(
            f"{where} has no enabled MCP servers{': ' + why if why else ''}; the gateway would "
            "serve nothing. Add servers under 'mcpServers'"
        )
    if transport == "http" and host is not None:  # None: a Unix socket
        from toolsearch.mcp.http_security import HttpSecurity

        HttpSecurity.for_address(host, port or 1, token=token)


class _ServerLog:
    """Turns hub changes into log lines: connected / failed / disconnected, then "ready"."""

    def __init__(self, log: Callable[[str], None]) -> None:
        self.log = log

    async def settle(self, hub: McpHub) -> None:
        """Say once that every server has settled — connected *and searchable*, or failed:
        no server is pending any more (docs/concurrency.md)."""
        await hub.wait_ready()
        states = [state.status for state in hub.servers.values()]
        counts = ", ".join(f"{states.count(s)} {s}" for s in dict.fromkeys(states))
        self.log(f"every MCP server has settled: {counts}; all their tools are searchable")

    def change(self, hub: McpHub, change: ToolChange) -> None:
        server = change.server
        if change.reason == "connected":
            count = len(hub.servers[server].tools)
            again = "re" if hub.connection(server).reconnects else ""
            self.log(f"MCP server {server!r} {again}connected: {count} tools")
        elif change.reason in ("failed", "disconnected"):
            self.log(f"MCP server {server!r} {change.reason}: {change.detail}")
