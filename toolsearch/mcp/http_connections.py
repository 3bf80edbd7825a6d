"""Bounds on the HTTP gateway's connections, applied before any request reaches the app.

uvicorn reads a request as slowly as a client sends it and accepts every connection the
operating system hands it. A client that opens many connections and sends a header line now
and then holds a file descriptor each, until the process runs out and every accept fails with
"Too many open files" — logged with a traceback per attempt. :func:`guarded_protocol` makes
uvicorn's HTTP/1.1 protocol (h11) enforce :class:`ConnectionLimits` (docs/security.md, "HTTP
gateway"):

- at most ``max_connections`` open connections, at most ``per_address`` of them from one peer
  address; a connection over either bound is answered ``503`` and closed at once, before its
  request is read, so the process never holds more descriptors than the bound;
- a request's headers must arrive within ``header_timeout`` seconds of the connection opening
  (or of the first byte of the next request on a kept-alive one), and its body within
  ``body_timeout`` seconds of its headers; otherwise the connection is closed;
- an idle kept-alive connection is closed after uvicorn's ``timeout_keep_alive``.

Refusals are logged by :class:`RefusalLog`: one line per kind of refusal per interval, with
the count of the others, never a line (or a traceback) per connection.
"""

from __future__ import annotations

import asyncio
import logging
import resource
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from toolsearch.errors import ConfigError

__all__ = [
    "ConnectionLimits",
    "QuietUvicornWarnings",
    "RefusalLog",
    "default_max_connections",
    "guarded_protocol",
    "quiet_accept_errors",
]

logger = logging.getLogger("toolsearch.mcp.gateway")

#: File descriptors kept free for everything but client connections (MCP servers' pipes,
#: index files, the log) when the connection bound is derived from the process's limit.
_RESERVED_DESCRIPTORS = 128
_BUSY = (
    b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain; charset=utf-8\r\n"
    b"content-length: 44\r\nretry-after: 5\r\nconnection: close\r\n\r\n"
    b"Too many open connections; retry in a while\n"
)


def default_max_connections() -> int:
    """At most 1,000 connections, and never more than half the descriptors the process may
    open (less a reserve), so connections alone cannot exhaust them."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return 1000
    return max(16, min(1000, (soft - _RESERVED_DESCRIPTORS) // 2))


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    """How many connections the gateway holds and how long a request may take to arrive.
    ``per_address`` of ``None`` is a quarter of ``max_connections`` (``None``: derived from
    the descriptor limit, :func:`default_max_connections`)."""

    max_connections: int | None = None
    per_address: int | None = None
    header_timeout: float = 10.0
    body_timeout: float = 60.0
    keep_alive: int = 5
    #: Seconds between two log lines about one kind of refusal.
    log_interval: float = 60.0

    def __post_init__(self) -> None:
        for label in ("max_connections", "per_address"):
            value = getattr(self, label)
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value < 1
            ):
                raise ConfigError(f"{label} must be a positive integer, got {value!r}")
        for label in ("header_timeout", "body_timeout", "keep_alive", "log_interval"):
            value = getattr(self, label)
            if not (isinstance(value, int | float) and 0 < value < float("inf")):
                raise ConfigError(f"{label} must be a positive number of seconds, got {value!r}")

    def connection_bound(self) -> int:
        """The bound on open connections."""
        return self.max_connections or default_max_connections()

    def address_bound(self) -> int:
        """The bound on one peer address's open connections."""
        return self.per_address or max(1, self.connection_bound() // 4)


class RefusalLog:
    """Logs refusals by kind: the first at once, then at most one line per ``interval``
    seconds saying how many more there were."""

    def __init__(
        self,
        interval: float,
        log: Callable[[str], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.interval = interval
        self.log = log or logger.warning
        self.clock = clock
        self._last: dict[str, float] = {}
        self._held: dict[str, int] = {}
        #: Every refusal counted, by kind (for tests and operators).
        self.counts: dict[str, int] = {}

    def refuse(self, kind: str, message: str) -> None:
        """Count one refusal of ``kind``; log ``message`` unless one was logged recently."""
        self.counts[kind] = self.counts.get(kind, 0) + 1
        now = self.clock()
        last = self._last.get(kind)
        if last is not None and now - last < self.interval:
            self._held[kind] = self._held.get(kind, 0) + 1
            return
        held = self._held.pop(kind, 0)
        more = f" ({held} more since the last report)" if held else ""
        self._last[kind] = now
        self.log(f"{message}{more}")


def guarded_protocol(limits: ConnectionLimits, refusals: RefusalLog) -> type[Any]:
    """uvicorn's h11 protocol class enforcing ``limits``, logging to ``refusals``."""
    from uvicorn.protocols.http.h11_impl import H11Protocol

    max_connections = limits.connection_bound()
    per_address = limits.address_bound()
    by_address: dict[str, int] = {}

    class GuardedH11Protocol(H11Protocol):
        _deadline: asyncio.TimerHandle | None = None
        _deadline_kind = ""
        _address: str | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            peer = self.client[0] if self.client else "unknown"
            if len(self.connections) > max_connections:
                self._refuse("connections", f"at the limit of {max_connections} connections")
                return
            if by_address.get(peer, 0) >= per_address:
                self._refuse(
                    "address", f"a client address is at its limit of {per_address} connections"
                )
                return
            self._address = peer
            by_address[peer] = by_address.get(peer, 0) + 1
            self._arm(limits.header_timeout, "headers")

        def _refuse(self, kind: str, why: str) -> None:
            refusals.refuse(kind, f"refusing HTTP connections: {why}")
            self.transport.write(_BUSY)
            self.transport.close()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            if self._address is not None:
                left = by_address.get(self._address, 1) - 1
                if left > 0:
                    by_address[self._address] = left
                else:
                    by_address.pop(self._address, None)
                self._address = None
            super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            self._follow()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._follow()

        def _follow(self) -> None:
            """Keep the deadline matching what the client still owes: headers, then body."""
            import h11

            if self.transport.is_closing():
                self._disarm()
                return
            state = self.conn.their_state
            if state is h11.SEND_BODY:
                if self._deadline is None or self._deadline_kind != "body":
                    self._arm(limits.body_timeout, "body")
            elif state is h11.IDLE:
                # between requests uvicorn's keep-alive timer runs; a partial request has begun
                if self.timeout_keep_alive_task is None and self._deadline is None:
                    self._arm(limits.header_timeout, "headers")
            else:
                self._disarm()

        def _arm(self, seconds: float, kind: str) -> None:
            self._disarm()
            self._deadline = self.loop.call_later(seconds, self._expired, kind, seconds)
            self._deadline_kind = kind

        def _disarm(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None

        def _expired(self, kind: str, seconds: float) -> None:
            self._deadline = None
            if self.transport.is_closing():
                return
            refusals.refuse(
                f"slow-{kind}",
                f"closing HTTP connections whose request {kind} did not arrive within "
                f"{seconds:g} s",
            )
            self.transport.close()

    return GuardedH11Protocol


def quiet_accept_errors(
    loop: asyncio.AbstractEventLoop, refusals: RefusalLog
) -> Callable[[], None]:
    """Make ``loop`` report a failing ``accept()`` (out of descriptors or memory) through
    ``refusals`` — one line per interval — instead of a traceback per attempt; every other
    error goes to the loop's previous handler. Returns what puts that handler back."""
    previous = loop.get_exception_handler()

    def handle(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        message = str(context.get("message", ""))
        if message.startswith("socket.accept() out of system resource"):
            error = context.get("exception")
            refusals.refuse("accept", f"cannot accept HTTP connections: {error}")
            return
        if previous is not None:
            previous(loop, context)
        else:
            loop.default_exception_handler(context)

    loop.set_exception_handler(handle)
    return lambda: loop.set_exception_handler(previous)


class QuietUvicornWarnings(logging.Filter):
    """A filter for uvicorn's error logger: its per-request warnings ("Invalid HTTP request
    received.", "Exceeded concurrency limit.") go through ``refusals``, one line per kind per
    interval; errors (an exception in the app) pass unchanged."""

    def __init__(self, refusals: RefusalLog) -> None:
        super().__init__()
        self.refusals = refusals

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno != logging.WARNING:
            return True
        message = record.getMessage()
        self.refusals.refuse(f"uvicorn: {message}", f"HTTP: {message}")
        return False
