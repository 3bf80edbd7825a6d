"""One live connection to one MCP server, through the official ``mcp`` SDK.

:class:`McpServerConnection` owns the whole life of a server: it starts the transport (a stdio
subprocess or streamable HTTP), negotiates the protocol (``server/discover`` with a fall back
to the ``initialize`` handshake, as the SDK's ``Client`` does), lists every page of
``tools/list``, keeps that list current when the server announces a change, and forwards tool
calls. Its state is one of:

``connecting``    started, handshake or first listing not finished yet
``connected``     tools listed; calls are forwarded
``failed``        never got connected (spawn error, crash during start, timeout, bad listing)
``disconnected``  was connected, then the server went away; its tools are gone

Tool-list changes arrive as ``notifications/tools/list_changed`` on handshake-era sessions and
on a ``subscriptions/listen`` stream on 2026-07-28 sessions; both trigger one re-listing
(bursts coalesce). A failed re-listing keeps the last good list.

Nothing here raises because a *server* misbehaved: failures become the connection's state,
and tool calls return a :class:`ToolCallResult` with ``is_error`` set. Every error text made
here — the server's stderr tail included — passes :meth:`ServerConfig.redact`, so no value
expanded from ``${VAR}`` reaches a log, a search result or a client (docs/security.md,
"Secrets in the config"). ``mcp`` is imported only when a connection runs, so importing this
module stays light.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import IO, TYPE_CHECKING, Any, Literal

import anyio

from toolsearch.catalog import tools_from_mcp_result
from toolsearch.errors import CatalogError, ConfigError, ToolSearchError
from toolsearch.mcp.config import ServerConfig
from toolsearch.mcp.stdio import DEFAULT_MAX_MESSAGE_BYTES, MESSAGE_TOO_LARGE, stdio_transport
from toolsearch.tool import MAX_TOOL_NAME, Tool, normalize_name_part

if TYPE_CHECKING:
    from mcp import Client

__all__ = [
    "DEFAULT_CALL_TIMEOUT",
    "DEFAULT_MAX_MESSAGE_BYTES",
    "DEFAULT_MAX_TOOLS",
    "DEFAULT_STARTUP_TIMEOUT",
    "McpProtocolError",
    "McpServerConnection",
    "ProtocolMode",
    "ServerStatus",
    "ToolCallResult",
    "require_sdk",
]

logger = logging.getLogger(__name__)

ServerStatus = Literal["connecting", "connected", "failed", "disconnected"]
ProtocolMode = Literal["auto", "legacy"]

DEFAULT_STARTUP_TIMEOUT = 30.0
DEFAULT_CALL_TIMEOUT = 120.0
#: Most tools one server may list; a server listing more fails with a clear error.
DEFAULT_MAX_TOOLS = 10_000
#: Seconds between attempts to reconnect a server that went away after connecting: each
#: failed attempt waits the next delay, the last one repeating; a connection that stays up
#: for :data:`STABLE_AFTER` seconds starts again from the first.
RECONNECT_DELAYS: tuple[float, ...] = (1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 60.0)
STABLE_AFTER = 60.0
#: A server that pages forever cannot hang a listing.
MAX_LIST_PAGES = 1000
_STDERR_TAIL_LINES = 5
_STDERR_TAIL_BYTES = 8192
_LISTEN_BACKOFF = (0.5, 1.0, 2.0, 5.0)
#: Seconds between two listings of one server: its change notifications coalesce into one
#: listing at most this often (docs/concurrency.md).
RELIST_INTERVAL = 0.5


def require_sdk() -> None:
    """Fail early, with the install line, when the ``mcp`` SDK is not installed."""
    import importlib.util

    if importlib.util.find_spec("mcp") is None or importlib.util.find_spec("mcp_types") is None:
        raise ConfigError(
            "connecting to MCP servers needs the official MCP SDK (mcp>=2.3); "
            "install it with: pip install 'toolsearch[mcp]'"
        )


class McpProtocolError(ToolSearchError):
    """A server answered, but not in a way toolsearch can use (e.g. a looping cursor)."""


@dataclass(frozen=True, slots=True)
class ToolCallResult:
    """What a tool call returned, in MCP's own shape.

    ``content`` holds the MCP content blocks as JSON objects (``{"type": "text", "text": ...}``).
    ``is_error`` marks both errors the tool reported and errors on the way to it (server gone,
    timeout, unknown tool), so an agent loop shows them to the model instead of crashing.
    """

    content: tuple[Mapping[str, Any], ...] = ()
    is_error: bool = False
    structured_content: Any = None
    metadata: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def error(cls, message: str, **metadata: Any) -> ToolCallResult:
        """An error result carrying ``message`` as its only text block."""
        return cls(({"type": "text", "text": message},), True, None, metadata)

    @property
    def text(self) -> str:
        """The text blocks joined by newlines (non-text blocks are skipped)."""
        return "\n".join(
            str(block.get("text", "")) for block in self.content if block.get("type") == "text"
        )

    def as_text(self) -> str:
        """Everything a text-only model API can carry: text blocks as they are, other blocks
        (images, audio, resources) as a short note, the structured result when there is no
        text at all."""
        parts: list[str] = []
        for block in self.content:
            kind = block.get("type")
            if kind == "text":
                parts.append(str(block.get("text", "")))
            elif kind == "resource_link":
                parts.append(f"[resource {block.get('uri', '')}]")
            elif kind == "resource":
                resource = block.get("resource") or {}
                text = resource.get("text") if isinstance(resource, Mapping) else None
                uri = resource.get("uri", "") if isinstance(resource, Mapping) else ""
                parts.append(str(text) if isinstance(text, str) else f"[resource {uri}]")
            else:
                mime = block.get("mimeType", "")
                parts.append(f"[{kind} content{f' ({mime})' if mime else ''} omitted]")
        if not parts and self.structured_content is not None:
            return json.dumps(self.structured_content, ensure_ascii=False, sort_keys=True)
        return "\n".join(parts)

    def to_dict(self) -> dict[str, Any]:
        """The MCP ``CallToolResult`` wire shape (camelCase keys)."""
        data: dict[str, Any] = {
            "content": [dict(b) for b in self.content],
            "isError": self.is_error,
        }
        if self.structured_content is not None:
            data["structuredContent"] = self.structured_content
        return data


class _WatchedRead:
    """A transport read stream that reports end-of-stream, so a dead server is noticed even
    when no request is in flight."""

    def __init__(self, inner: Any, on_eof: Callable[[], None]) -> None:
        self._inner = inner
        self._on_eof = on_eof

    @property
    def last_context(self) -> Any:
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> Any:
        try:
            return await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._on_eof()
            raise

    def __aiter__(self) -> _WatchedRead:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> _WatchedRead:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


class _WatchedTransport(contextlib.AbstractAsyncContextManager[Any]):
    """Wraps an SDK transport so its read side reports end-of-stream."""

    def __init__(
        self, inner: contextlib.AbstractAsyncContextManager[Any], on_eof: Callable[[], None]
    ):
        self._inner = inner
        self._on_eof = on_eof

    async def __aenter__(self) -> tuple[Any, Any]:
        read, write = await self._inner.__aenter__()
        return _WatchedRead(read, self._on_eof), write

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        return await self._inner.__aexit__(exc_type, exc, tb)


def _leaf(exc: BaseException) -> BaseException:
    """The first real exception inside (possibly nested) exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


_CLOSED_DURING_START = "the server closed the connection before it was ready"


def _is_connection_closed(exc: BaseException) -> bool:
    from mcp.shared.exceptions import MCPError
    from mcp_types import CONNECTION_CLOSED

    return isinstance(exc, MCPError) and exc.code == CONNECTION_CLOSED


def _describe(exc: BaseException) -> str:
    """A one-line reason for a connection failure."""
    from mcp.shared.exceptions import MCPError

    if isinstance(exc, MCPError):
        return f"{exc.message} (MCP error {exc.code})"
    if isinstance(exc, FileNotFoundError):
        return f"cannot start the server: {exc.strerror or exc}: {exc.filename or ''}".rstrip(": ")
    if isinstance(exc, OSError):
        return f"cannot start or reach the server: {exc.strerror or exc}"
    if isinstance(exc, ToolSearchError):
        return str(exc)
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class McpServerConnection:
    """Connects to one configured server and keeps its tool list current.

    Run :meth:`run` in a task (it returns when the server is gone, and records why); read
    :attr:`status`, :attr:`error` and :attr:`tools` at any time; ``on_change`` is called (on
    the event loop) after every change of status or tools. ``mode="legacy"`` forces the
    ``initialize`` handshake instead of probing for the 2026-07-28 protocol.
    """

    def __init__(
        self,
        config: ServerConfig,
        *,
        startup_timeout: float = DEFAULT_STARTUP_TIMEOUT,
        call_timeout: float = DEFAULT_CALL_TIMEOUT,
        mode: ProtocolMode = "auto",
        on_change: Callable[[McpServerConnection], None] | None = None,
        max_tools: int = DEFAULT_MAX_TOOLS,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    ) -> None:
        self.config = config
        self.max_tools = max_tools
        self.max_message_bytes = max_message_bytes
        self.startup_timeout = config.startup_timeout or startup_timeout
        self.call_timeout = config.call_timeout or call_timeout
        self.mode: ProtocolMode = mode
        self.on_change = on_change
        self.status: ServerStatus = "connecting"
        self.error: str | None = None
        self.tools: tuple[Tool, ...] = ()
        self.protocol_version: str | None = None
        #: How many times the tool list was fetched (the first listing included).
        self.listings = 0
        #: Listings since the latest (re)connection began.
        self._run_listings = 0
        #: Whether the server ever connected, and how often it was reconnected since.
        self.ever_connected = False
        self.reconnects = 0
        self._client: Client | None = None
        self._original_names: dict[str, str] = {}
        self._dirty = anyio.Event()
        self._eof = anyio.Event()
        self._errlog: IO[bytes] | None = None
        #: Tool names listed shortened and already logged.
        self._shortened: set[str] = set()
        #: Why the transport gave up on the server (invalid UTF-8, an oversized message).
        self._fatal_reason: str | None = None

    @property
    def first_listing(self) -> bool:
        """Whether the latest listing is the first since the server (re)connected."""
        return self._run_listings <= 1

    @property
    def name(self) -> str:
        """The server's name in the config."""
        return self.config.name

    def original_name(self, tool_name: str) -> str | None:
        """The server's own name for one of its ``mcp__<server>__<tool>`` tools."""
        return self._original_names.get(tool_name)

    def _fatal(self, reason: str) -> None:
        reason = self.config.redact(reason)
        logger.warning("MCP server %r: %s", self.name, reason)
        self._fatal_reason = reason

    def request_refresh(self) -> None:
        """Ask for a re-listing, as a list-changed notification would."""
        self._dirty.set()

    # ------------------------------------------------------------------ running

    async def run_supervised(self, delays: Sequence[float] = RECONNECT_DELAYS) -> None:
        """:meth:`run`, and run again with growing pauses (``delays``) whenever a server that
        had connected goes away — a crash, a closed connection — so one call that crashes a
        server does not remove it for good. While it is down its error says when the next
        attempt is (``...; reconnecting in 4 s, attempt 3``). A server that never connected
        (a wrong command, a failed start) stays failed: retrying cannot fix its config."""
        failures = 0
        while True:
            started = anyio.current_time()
            await self.run()
            if not self.ever_connected or not delays:
                return
            if self.status == "disconnected" and anyio.current_time() - started >= STABLE_AFTER:
                failures = 0
            delay = delays[min(failures, len(delays) - 1)]
            failures += 1
            error = (self.error or "the server went away").split("; reconnecting in")[0]
            self._set(
                self.status, error=f"{error}; reconnecting in {delay:g} s, attempt {failures}"
            )
            await anyio.sleep(delay)
            self.reconnects += 1

    async def run(self) -> None:
        """Connect, list, follow changes; return once the server is gone (never raises for
        anything the server does; cancellation propagates)."""
        self._run_listings = 0
        self._eof = anyio.Event()  # a new transport: the last one's end is not this one's
        self._dirty = anyio.Event()
        self._set("connecting", error=None, tools=())
        self._fatal_reason = None
        startup = anyio.CancelScope(deadline=anyio.current_time() + self.startup_timeout)
        connected = False
        with contextlib.ExitStack() as files:
            if self.config.transport == "stdio":
                self._errlog = files.enter_context(tempfile.TemporaryFile("w+b"))
            try:
                with startup:
                    async with contextlib.AsyncExitStack() as stack:
                        client = await self._connect(stack)
                        self.protocol_version = client.protocol_version
                        async with anyio.create_task_group() as tasks:
                            if self._wants_listen(client):
                                await tasks.start(self._listen, client)
                            tools = await self._list_tools(client)
                            startup.deadline = math.inf
                            self._client = client
                            connected = self.ever_connected = True
                            self._set("connected", tools=tools)
                            tasks.start_soon(self._relist_loop, client)
                            await self._eof.wait()
                            # Calls from here on must not hear "connected" while the
                            # process is being shut down.
                            self._client = None
                            tasks.cancel_scope.cancel()
                if startup.cancelled_caught and not connected:
                    late = f"did not finish starting within {self.startup_timeout:g} s"
                    self._set("failed", error=self._with_stderr(self._fatal_reason or late))
                elif connected:
                    gone = self._fatal_reason or "the server closed the connection"
                    self._set("disconnected", error=self._with_stderr(gone), tools=())
                else:
                    closed = self._fatal_reason or _CLOSED_DURING_START
                    self._set("failed", error=self._with_stderr(closed))
            except Exception as exc:
                leaf = _leaf(exc)
                reason = _describe(leaf)
                if not connected and _is_connection_closed(leaf):
                    reason = _CLOSED_DURING_START
                reason = self._with_stderr(self._fatal_reason or reason)
                if connected:
                    self._set("disconnected", error=reason, tools=())
                else:
                    self._set("failed", error=reason)
            finally:
                self._client = None
                self._errlog = None

    async def _connect(self, stack: contextlib.AsyncExitStack) -> Client:
        from mcp import Client, Implementation

        from toolsearch import __version__

        config = self.config
        inner: contextlib.AbstractAsyncContextManager[Any]
        if config.transport == "stdio":
            assert config.command is not None and self._errlog is not None
            inner = stdio_transport(
                config.command,
                list(config.args),
                env=dict(config.env) or None,
                cwd=config.cwd,
                errlog=self._errlog,
                on_fatal=self._fatal,
                max_message_bytes=self.max_message_bytes,
            )
        else:
            inner = await self._http_transport(stack)
        client = Client(
            _WatchedTransport(inner, self._eof.set),
            mode=self.mode,
            message_handler=self._on_message,
            client_info=Implementation(name="toolsearch", version=__version__),
            cache=None,
        )
        return await stack.enter_async_context(client)

    async def _http_transport(
        self, stack: contextlib.AsyncExitStack
    ) -> contextlib.AbstractAsyncContextManager[Any]:
        """The streamable HTTP transport, with ``max_message_bytes`` capping each SSE event
        and each JSON response (docs/security.md, "Hostile servers")."""
        import httpx2
        from mcp.client.streamable_http import streamable_http_client

        from toolsearch.mcp.http_limits import CappedTransport

        config = self.config
        assert config.url is not None
        headers = {"Accept-Encoding": "identity", **config.headers}
        http = await stack.enter_async_context(
            httpx2.AsyncClient(
                headers=headers,
                timeout=httpx2.Timeout(30.0, read=300.0),
                transport=CappedTransport(self.max_message_bytes),
            )
        )
        return streamable_http_client(
            config.url, http_client=http, max_sse_event_size=self.max_message_bytes
        )

    def _is_modern(self, client: Client) -> bool:
        from mcp_types.version import MODERN_PROTOCOL_VERSIONS

        return client.protocol_version in MODERN_PROTOCOL_VERSIONS

    def _wants_listen(self, client: Client) -> bool:
        if not self._is_modern(client):
            return False
        tools = client.server_capabilities.tools
        return bool(tools and tools.list_changed)

    async def _on_message(self, message: Any) -> None:
        import mcp_types

        if isinstance(message, mcp_types.ToolListChangedNotification):
            client = self._client
            # On 2026-07-28 sessions the listen stream drives re-listing; the SDK also tees
            # the stream's frames here, which must not trigger a second listing.
            if client is None or not self._is_modern(client):
                self._dirty.set()
        elif isinstance(message, Exception):
            logger.debug(
                "MCP server %r transport error: %s", self.name, self.config.redact(str(message))
            )

    async def _listen(
        self, client: Client, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        from mcp.client.subscriptions import ListenNotSupportedError, SubscriptionLost
        from mcp.shared.exceptions import MCPError

        started = False
        attempt = 0
        try:
            while True:
                try:
                    async with client.listen(tools_list_changed=True) as subscription:
                        if not started:
                            started = True
                            task_status.started()
                        else:
                            self._dirty.set()  # changes while re-subscribing were not seen
                        attempt = 0
                        async for _event in subscription:
                            self._dirty.set()
                except (SubscriptionLost, TimeoutError) as exc:
                    logger.debug("MCP server %r: listen stream lost: %s", self.name, exc)
                except (ListenNotSupportedError, MCPError) as exc:
                    logger.debug("MCP server %r: no listen stream: %s", self.name, exc)
                    return
                await anyio.sleep(_LISTEN_BACKOFF[min(attempt, len(_LISTEN_BACKOFF) - 1)])
                attempt += 1
        finally:
            if not started:
                task_status.started()

    async def _relist_loop(self, client: Client) -> None:
        """Re-list on change notifications: one listing for any number of them, and at most
        one every :data:`RELIST_INTERVAL` seconds, so a server that announces changes all the
        time costs its gateway a few listings a second."""
        while True:
            await self._dirty.wait()
            self._dirty = anyio.Event()
            started = anyio.current_time()
            try:
                with anyio.fail_after(self.call_timeout):
                    tools = await self._list_tools(client)
            except Exception as exc:
                reason = self.config.redact(str(exc))
                logger.warning("MCP server %r: re-listing tools failed: %s", self.name, reason)
            else:
                self._set("connected", tools=tools)
            await anyio.sleep(max(0.0, started + RELIST_INTERVAL - anyio.current_time()))

    async def _list_tools(self, client: Client) -> tuple[Tool, ...]:
        raw: list[dict[str, Any]] = []
        cursor: str | None = None
        seen: set[str] = set()
        for _page in range(MAX_LIST_PAGES):
            result = await client.list_tools(cursor=cursor)
            raw.extend(
                tool.model_dump(by_alias=True, mode="json", exclude_none=True)
                for tool in result.tools
            )
            if len(raw) > self.max_tools:
                raise McpProtocolError(
                    f"the server lists more than {self.max_tools:,} tools, the limit per server "
                    "(raise it with --max-tools or McpHub(max_tools=...))"
                )
            cursor = result.next_cursor
            if cursor is None:
                break
            if cursor in seen:
                raise McpProtocolError(f"tools/list returned the cursor {cursor!r} twice")
            seen.add(cursor)
        else:
            raise McpProtocolError(f"tools/list did not end within {MAX_LIST_PAGES} pages")
        try:
            tools = tools_from_mcp_result(
                {"tools": raw}, self.name, always_load=self.config.always_load
            )
        except CatalogError as exc:
            raise McpProtocolError(f"invalid tools/list result: {exc}") from exc
        except RecursionError:
            raise McpProtocolError(
                "invalid tools/list result: a tool's input schema is nested too deeply"
            ) from None
        self.listings += 1
        self._run_listings += 1
        self._original_names = {
            tool.name: str(tool.metadata.get("mcp_name", tool.name)) for tool in tools
        }
        self._report_shortened(tools)
        return tuple(tools)

    def _report_shortened(self, tools: list[Tool]) -> None:
        """Log, once per tool, a name that was over 64 characters and is listed shortened
        (model APIs refuse longer names: docs/security.md, "Tool names")."""
        for tool in tools:
            own = self._original_names[tool.name]
            full = self.config.tool_prefix + normalize_name_part(own)
            if full != tool.name and tool.name not in self._shortened:
                self._shortened.add(tool.name)
                logger.warning(
                    "MCP server %r: tool %r would be named %r, over the %d characters model "
                    "APIs accept; it is listed and called as %r",
                    self.name,
                    own,
                    full,
                    MAX_TOOL_NAME,
                    tool.name,
                )

    # ------------------------------------------------------------------ calls

    async def call_tool(
        self,
        tool_name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        timeout: float | None = None,
    ) -> ToolCallResult:
        """Call one of this server's tools by its ``mcp__<server>__<tool>`` name (or the
        server's own name for it). Every failure comes back as an error result."""
        client = self._client
        if client is None or self.status != "connected":
            return self._unavailable()
        remote = self._original_names.get(tool_name, tool_name)
        if not isinstance(arguments, Mapping) and arguments is not None:
            return ToolCallResult.error(
                f"arguments for {tool_name!r} must be a JSON object, got {type(arguments).__name__}"
            )
        limit = timeout or self.call_timeout
        from mcp.shared.exceptions import MCPError

        try:
            with anyio.fail_after(limit + 1.0):
                result = await client.call_tool(
                    remote, dict(arguments or {}), read_timeout_seconds=limit
                )
        except MCPError as exc:
            return self._call_error(exc.code, exc.message, remote, limit)
        except TimeoutError:
            return ToolCallResult.error(
                f"MCP server {self.name!r} did not answer {remote!r} within {limit:g} s",
                server=self.name,
            )
        except Exception as exc:
            reason = self.config.redact(_describe(_leaf(exc)))
            return ToolCallResult.error(
                f"calling {remote!r} on MCP server {self.name!r} failed: {reason}",
                server=self.name,
            )
        return ToolCallResult(
            content=tuple(
                block.model_dump(by_alias=True, mode="json", exclude_none=True)
                for block in result.content
            ),
            is_error=bool(result.is_error),
            structured_content=result.structured_content,
            metadata={"server": self.name},
        )

    def _unavailable(self) -> ToolCallResult:
        status, error = self.status, self.error
        if status == "connected":  # gone, its state not recorded yet: never say connected
            status = "disconnected"
            error = self._fatal_reason or "the server closed the connection"
        reason = f": {error}" if error else ""
        return ToolCallResult.error(
            f"MCP server {self.name!r} is {status}{reason}", server=self.name
        )

    def _call_error(self, code: int, text: str, remote: str, limit: float) -> ToolCallResult:
        """The error result for a call the server (or the transport) answered with an error."""
        from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT

        from toolsearch.mcp.http_limits import too_large_detail

        detail = text if code == MESSAGE_TOO_LARGE else too_large_detail(text)
        if detail is not None:
            message = (
                f"the result of {remote!r} from MCP server {self.name!r} is too large: {detail} "
                "(raise it with --max-message-bytes or McpHub(max_message_bytes=...))"
            )
        elif code == REQUEST_TIMEOUT:
            message = f"MCP server {self.name!r} did not answer {remote!r} within {limit:g} s"
        elif code == CONNECTION_CLOSED:
            message = f"MCP server {self.name!r} disconnected during the call to {remote!r}"
        else:
            message = (
                f"MCP server {self.name!r} returned an error for {remote!r}: "
                f"{self.config.redact(text)} (MCP error {code})"
            )
        return ToolCallResult.error(message, server=self.name, code=code)

    # ------------------------------------------------------------------ state

    def _set(
        self,
        status: ServerStatus,
        *,
        error: str | Literal[False] | None = False,
        tools: Sequence[Tool] | None = None,
    ) -> None:
        self.status = status
        if error is not False:
            self.error = None if error is None else self.config.redact(error)
        if tools is not None:
            self.tools = tuple(tools)
            if not tools:
                self._original_names = {}
        if self.on_change is not None:
            self.on_change(self)

    def _with_stderr(self, reason: str) -> str:
        tail = self._stderr_tail()
        return f"{reason}; stderr: {tail}" if tail else reason

    def _stderr_tail(self) -> str:
        log = self._errlog
        if log is None:
            return ""
        try:
            # pread leaves the file offset alone: the child shares it and may still write.
            fd = log.fileno()
            size = os.fstat(fd).st_size
            start = max(0, size - _STDERR_TAIL_BYTES)
            # A secret cut by the window's start would show its tail: read enough before it
            # to redact any value that reaches into the window, then cut.
            margin = min(start, self.config.longest_secret_bytes)
            data = os.pread(fd, size - start + margin, start - margin)
        except (OSError, ValueError, AttributeError):
            return ""
        text = self.config.redact(data.decode("utf-8", errors="replace"))
        text = text[-_STDERR_TAIL_BYTES:]  # redacted already: a cut shows no value's tail
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        return " | ".join(lines[-_STDERR_TAIL_LINES:])
