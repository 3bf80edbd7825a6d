"""Bounds on the streamable HTTP sessions the gateway keeps, per client and in time.

The MCP SDK's session manager keeps every session a client opens with ``initialize`` until the
client sends ``DELETE``, the session has been idle for 30 minutes, or 10,000 are open — and
then refuses every new session, from anyone, with ``503``. :class:`SessionLimits` sits in
front of it (docs/security.md, "HTTP gateway"):

- a client (a peer address) keeps at most ``per_client`` sessions: opening one more closes
  that client's least recently used idle session, so a client that never sends ``DELETE``
  only ever replaces its own sessions. Only when all of them have a request in flight is the
  new one refused, with ``429``;
- a client keeps at most ``streams_per_client`` event streams (``GET`` requests, which stay
  open) at once, half its sessions by default; one more stream is refused with ``429``. So
  open streams alone never leave a client without an idle session to replace, and a new
  session from the same address (on loopback, another local user) still opens;
- the gateway keeps at most ``max_sessions`` sessions in all: at the bound, a new session
  closes the least recently used idle session of the client holding the most, so clients
  spread over many addresses replace each other's sessions, not those of a client with few;
  ``503`` only when every session has a request in flight;
- a session with no request in flight for ``idle_timeout`` seconds is closed the next time any
  session is opened.

A session is closed as its client would close it: a ``DELETE`` for it is passed to the SDK's
app, which ends the session and frees everything it held; the session's id then answers 404.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any

from toolsearch.errors import ConfigError

__all__ = [
    "DEFAULT_IDLE_TIMEOUT",
    "DEFAULT_MAX_SESSIONS",
    "DEFAULT_SESSIONS_PER_CLIENT",
    "SessionLimits",
]

#: Sessions one client (peer address) may keep open; more replace its least recently used.
DEFAULT_SESSIONS_PER_CLIENT = 64
#: Sessions the gateway keeps in all (the SDK's own bound, 10,000, refuses everyone beyond).
DEFAULT_MAX_SESSIONS = 1024
#: Seconds without a request in flight after which a session is closed.
DEFAULT_IDLE_TIMEOUT = 600.0

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]

_SESSION_HEADER = b"mcp-session-id"
_VERSION_HEADER = b"mcp-protocol-version"
#: The request headers a closing DELETE carries over from the request that opened the session.
_KEPT_HEADERS = (b"host", b"authorization")


@dataclass(slots=True)
class _Session:
    client: str
    scope: Scope  # the opening request's, for the DELETE that closes the session
    last_used: float
    in_flight: int = 0


@dataclass(slots=True)
class _Request:
    """One request's part in the bookkeeping: its session, and what was counted already."""

    session: str | None = None
    settled: bool = False
    finished: bool = False


def _last_body(message: Message) -> bool:
    return message["type"] == "http.response.body" and not message.get("more_body", False)


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key.lower() == name:
            return bytes(value).decode("latin-1")
    return None


def _client(scope: Scope) -> str:
    peer = scope.get("client")
    return str(peer[0]) if peer else "unknown"


async def _discard(message: Message) -> None:
    return None


async def _no_body() -> Message:
    return {"type": "http.request", "body": b"", "more_body": False}


def _check_count(value: object, label: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{label} must be a positive integer, got {value!r}")


class SessionLimits:
    """An ASGI middleware bounding the stateful MCP sessions of the app it wraps: at most
    ``per_client`` per peer address (``streams_per_client`` of them with an open event
    stream; default half), ``max_sessions`` in all, none idle for longer than
    ``idle_timeout`` seconds. ``clock`` is the monotonic time source."""

    def __init__(
        self,
        app: App,
        *,
        per_client: int = DEFAULT_SESSIONS_PER_CLIENT,
        idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
        max_sessions: int = DEFAULT_MAX_SESSIONS,
        streams_per_client: int | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        _check_count(per_client, "sessions per client")
        _check_count(max_sessions, "max_sessions")
        if streams_per_client is None:
            streams_per_client = max(1, per_client // 2)
        _check_count(streams_per_client, "streams per client")
        if not (isinstance(idle_timeout, int | float) and 0 < idle_timeout < float("inf")):
            raise ConfigError(
                "the session idle timeout must be a positive number of seconds, "
                f"got {idle_timeout!r}"
            )
        self.app = app
        self.per_client = per_client
        self.max_sessions = max_sessions
        self.streams_per_client = streams_per_client
        self.idle_timeout = idle_timeout
        #: Open event streams (GET requests) by client.
        self._streams: dict[str, int] = {}
        self.clock = clock
        #: Every open session, least recently used first.
        self._sessions: OrderedDict[str, _Session] = OrderedDict()
        self._by_client: dict[str, OrderedDict[str, None]] = {}
        self._opening: dict[str, int] = {}
        from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

        self._handshake_versions = frozenset(HANDSHAKE_PROTOCOL_VERSIONS)

    def open_sessions(self, client: str | None = None) -> int:
        """How many sessions are open (of ``client``, when given)."""
        if client is None:
            return len(self._sessions)
        return len(self._by_client.get(client, ()))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        session_id = _header(scope, _SESSION_HEADER)
        if session_id is not None:
            await self._use(session_id, scope, receive, send)
        elif scope.get("method") == "POST" and self._may_open(scope):
            await self._open(scope, receive, send)
        else:
            await self.app(scope, receive, send)

    def _may_open(self, scope: Scope) -> bool:
        """Whether a request without a session id may open one: it speaks a handshake-era
        protocol version, or names none (``initialize``); later protocols keep no sessions."""
        version = _header(scope, _VERSION_HEADER)
        return version is None or version in self._handshake_versions

    # -- opening ------------------------------------------------------------------------

    async def _open(self, scope: Scope, receive: Receive, send: Send) -> None:
        """A request that may open a session: make room for it first. It counts against its
        client's limit until it has answered (with or without a session)."""
        client = _client(scope)
        opening = dict(scope)  # as it arrived: the app's router adds its own keys
        await self._close_idle()
        held = self.open_sessions(client) + self._opening.get(client, 0)
        if held >= self.per_client and not await self._close_oldest_idle(client):
            await _refuse(send, 429, _client_full(self.per_client))
            return
        in_all = len(self._sessions) + sum(self._opening.values())
        if in_all >= self.max_sessions and not await self._close_for_room():
            await _refuse(send, 503, _gateway_full(self.max_sessions))
            return
        self._opening[client] = self._opening.get(client, 0) + 1
        request = _Request()

        def settle() -> None:
            if not request.settled:
                request.settled = True
                self._opening[client] -= 1
                if not self._opening[client]:
                    del self._opening[client]

        async def watch(message: Message) -> None:
            if message["type"] == "http.response.start":
                session_id = _header(message, _SESSION_HEADER)
                ok = message.get("status", 500) < 400
                if ok and session_id is not None and session_id not in self._sessions:
                    self._add(session_id, client, opening)
                    request.session = session_id
                settle()
            elif _last_body(message):
                self._finish(request)
            await send(message)

        try:
            await self.app(scope, receive, watch)
        finally:
            settle()
            self._finish(request)

    def _add(self, session_id: str, client: str, scope: Scope) -> None:
        self._sessions[session_id] = _Session(client, dict(scope), self.clock(), in_flight=1)
        self._by_client.setdefault(client, OrderedDict())[session_id] = None

    async def _close_idle(self) -> None:
        """Close every session idle for longer than the timeout (oldest first)."""
        cutoff = self.clock() - self.idle_timeout
        expired = []
        for session_id, session in self._sessions.items():
            if session.last_used > cutoff:
                break
            if not session.in_flight:
                expired.append(session_id)
        for session_id in expired:
            await self._close(session_id)

    async def _close_oldest_idle(self, client: str) -> bool:
        """Close ``client``'s least recently used session without a request in flight."""
        for session_id in self._by_client.get(client, ()):
            if not self._sessions[session_id].in_flight:
                await self._close(session_id)
                return True
        return False

    async def _close_for_room(self) -> bool:
        """At the total bound: close the least recently used idle session of the client that
        holds the most sessions (the next one if all of its are busy)."""
        holders = sorted(self._by_client, key=lambda c: len(self._by_client[c]), reverse=True)
        for client in holders:
            if await self._close_oldest_idle(client):
                return True
        return False

    async def _close(self, session_id: str) -> None:
        """End a session as its client would: a ``DELETE`` for it, to the app."""
        session = self._forget(session_id)
        if session is None:
            return
        headers = [(k, v) for k, v in session.scope.get("headers", []) if k in _KEPT_HEADERS]
        headers.append((_SESSION_HEADER, session_id.encode("latin-1")))
        scope = {**session.scope, "method": "DELETE", "headers": headers, "query_string": b""}
        await self.app(scope, _no_body, _discard)

    # -- using --------------------------------------------------------------------------

    async def _use(self, session_id: str, scope: Scope, receive: Receive, send: Send) -> None:
        """A request within a session keeps it busy until answered; a 404 or a DELETE that
        succeeded means the session is gone."""
        session = self._sessions.get(session_id)
        stream = scope.get("method") == "GET" and session is not None
        if stream and session is not None:
            if self._streams.get(session.client, 0) >= self.streams_per_client:
                await _refuse(send, 429, _streams_full(self.streams_per_client))
                return
            self._streams[session.client] = self._streams.get(session.client, 0) + 1
        request = _Request(session_id if session is not None else None)
        if session is not None:
            session.in_flight += 1
        status: list[int] = []

        async def watch(message: Message) -> None:
            if message["type"] == "http.response.start":
                status.append(int(message.get("status", 500)))
            elif _last_body(message):
                self._finish(request)
            await send(message)

        try:
            await self.app(scope, receive, watch)
        finally:
            if stream and session is not None:
                self._streams[session.client] -= 1
                if not self._streams[session.client]:
                    del self._streams[session.client]
            self._finish(request)
            deleted = scope.get("method") == "DELETE" and status and status[0] < 300
            if session is not None and status and (status[0] == 404 or deleted):
                self._forget(session_id)

    def _finish(self, request: _Request) -> None:
        """A request has answered: its session is idle from now unless others are in flight
        (called once per request)."""
        if request.finished:
            return
        request.finished = True
        session_id = request.session
        session = self._sessions.get(session_id) if session_id is not None else None
        if session_id is None or session is None:
            return
        session.in_flight -= 1
        session.last_used = self.clock()
        self._sessions.move_to_end(session_id)
        self._by_client[session.client].move_to_end(session_id)

    def _forget(self, session_id: str) -> _Session | None:
        session = self._sessions.pop(session_id, None)
        if session is not None:
            mine = self._by_client[session.client]
            mine.pop(session_id, None)
            if not mine:
                del self._by_client[session.client]
        return session


def _client_full(limit: int) -> str:
    return (
        f"Too many open sessions from this client (at most {limit}, each with a request in "
        "flight): close one with DELETE, or retry later"
    )


def _streams_full(limit: int) -> str:
    return (
        f"Too many open event streams from this client (at most {limit}): close one, or retry later"
    )


def _gateway_full(limit: int) -> str:
    return (
        f"The gateway holds its limit of {limit} sessions, each with a request in flight: "
        "retry later"
    )


async def _refuse(send: Send, status: int, reason: str) -> None:
    body = reason.encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"text/plain; charset=utf-8"),
                (b"content-length", str(len(body)).encode()),
                (b"retry-after", b"5"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
