"""What the HTTP gateway lets in: Host and Origin allow-lists and a bearer token.

The MCP specification says a streamable HTTP server must validate ``Origin`` and should bind to
localhost and authenticate. :class:`HttpSecurity` holds the rules for one listening address and
:class:`SecurityMiddleware` applies them to every HTTP request before the MCP app sees it
(docs/security.md, "HTTP gateway"):

- ``Host`` must name the gateway: its own address and port, the loopback names when it listens
  on loopback, the machine's names and addresses when it listens on every interface (an
  address is the machine's when a socket can be bound to it), plus ``--allow-host``;
- ``Origin``, when a browser sends one, must be one of those hosts as ``http://host:port`` or an
  ``--allow-origin`` value;
- ``Authorization: Bearer <token>`` must carry the token whenever one is configured, and one is
  required unless the address is loopback. A token is printable ASCII (what an HTTP header
  carries unchanged); tokens are compared in constant time, as bytes;
- what passes is then bounded in MCP sessions per client (:mod:`toolsearch.mcp.http_sessions`).
"""

from __future__ import annotations

import hmac
import ipaddress
import os
import socket
from collections.abc import Awaitable, Callable, Iterable, Mapping, MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toolsearch.errors import ConfigError
from toolsearch.mcp.http_sessions import SessionLimits

__all__ = [
    "MIN_TOKEN_LENGTH",
    "TOKEN_ENV",
    "HttpSecurity",
    "SecurityMiddleware",
    "check_token",
    "is_loopback",
    "load_token",
]

#: The environment variable the gateway reads its bearer token from.
TOKEN_ENV = "TOOLSEARCH_GATEWAY_TOKEN"
MIN_TOKEN_LENGTH = 16
_LOOPBACK_NAMES = ("localhost", "127.0.0.1", "[::1]")
_TOKEN_HINT = "e.g. python -c 'import secrets; print(secrets.token_urlsafe())'"

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address or ``localhost``) only accepts connections from this
    machine."""
    if host.strip("[]").lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def load_token(
    *, file: str | Path | None = None, environ: Mapping[str, str] | None = None
) -> str | None:
    """The bearer token from ``file`` (its first line) or else from ``$TOOLSEARCH_GATEWAY_TOKEN``;
    None when neither is set. A token shorter than 16 characters is a :class:`ConfigError`."""
    if file is not None:
        try:
            lines = Path(file).read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"cannot read the token file {file}: {exc}") from exc
        token, source = (lines[0].strip() if lines else ""), f"the token file {file}"
    else:
        value = (os.environ if environ is None else environ).get(TOKEN_ENV)
        if value is None:
            return None
        token, source = value.strip(), f"${TOKEN_ENV}"
    check_token(token, source)
    return token


def check_token(token: str, source: str = "the token") -> None:
    """Refuse (``ConfigError``) a token shorter than :data:`MIN_TOKEN_LENGTH` or with anything
    but printable ASCII: a header arrives as bytes, so any other character could never match."""
    if len(token) < MIN_TOKEN_LENGTH:
        raise ConfigError(
            f"the bearer token in {source} is {len(token)} characters long; use at least "
            f"{MIN_TOKEN_LENGTH} ({_TOKEN_HINT})"
        )
    bad = next((ch for ch in token if not "!" <= ch <= "~"), None)
    if bad is not None:
        raise ConfigError(
            f"the bearer token in {source} contains {bad!r} (U+{ord(bad):04X}); a token must be "
            f"printable ASCII without spaces, which is what HTTP headers carry ({_TOKEN_HINT})"
        )


def _with_port(host: str, port: int) -> str:
    host = host.strip().lower().rstrip("/")
    if host.startswith("["):
        return host if "]:" in host else f"{host}:{port}"
    if host.count(":") > 1:  # a bare IPv6 address
        return f"[{host}]:{port}"
    return host if ":" in host else f"{host}:{port}"


def _split_host(host: str) -> tuple[str, str | None]:
    """``(address or name, port)`` of a Host header value (brackets of IPv6 removed)."""
    if host.startswith("["):
        address, _, rest = host[1:].partition("]")
        return address, rest[1:] if rest.startswith(":") else None
    if host.count(":") == 1:
        name, port = host.split(":")
        return name, port
    return host, None


def is_own_address(text: str) -> bool:
    """Whether ``text`` is an IP address of this machine: one a socket can be bound to (any
    interface's, found when asked, so addresses added after start-up count too)."""
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return False
    if address.is_unspecified or address.is_multicast:
        return False
    family = socket.AF_INET6 if address.version == 6 else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_DGRAM) as probe:
            probe.bind((str(address), 0))
    except OSError:
        return False
    return True


def _machine_names() -> set[str]:
    names = {socket.gethostname(), socket.getfqdn()}
    try:
        infos = socket.getaddrinfo(socket.gethostname(), None)
    except OSError:
        infos = []
    names.update(str(info[4][0]) for info in infos)
    return {name for name in names if name}


@dataclass(frozen=True, slots=True)
class HttpSecurity:
    """The allowed ``Host`` values (``name:port``), ``Origin`` values and the token."""

    allowed_hosts: frozenset[str]
    allowed_origins: frozenset[str]
    token: str | None = None
    #: Listening on every interface: ``Host`` may also be any address of the machine's.
    any_own_address: bool = False
    port: int | None = None
    #: Listening on a Unix socket: any ``Host`` names it (no browser can reach one).
    any_host: bool = False

    @classmethod
    def for_unix_socket(cls, *, token: str | None = None) -> HttpSecurity:
        """The rules for a gateway on a Unix domain socket: its file's permissions decide
        who may connect, so ``Host`` is not checked (DNS rebinding needs a TCP address) and
        ``token`` is optional; a browser ``Origin`` is still refused."""
        if token is not None:
            check_token(token)
        return cls(frozenset(), frozenset(), token, any_host=True)

    @classmethod
    def for_address(
        cls,
        host: str,
        port: int,
        *,
        allow_hosts: Iterable[str] = (),
        allow_origins: Iterable[str] = (),
        token: str | None = None,
    ) -> HttpSecurity:
        """The rules for a gateway listening on ``host:port``; refuses (``ConfigError``) a
        non-loopback address without a token, and a token :func:`check_token` refuses."""
        if token is not None:
            check_token(token)
        loopback = is_loopback(host)
        if not loopback and token is None:
            raise ConfigError(
                f"serving HTTP on {host} (not a loopback address) needs a bearer token: set "
                f"{TOKEN_ENV} or pass --token-file FILE; clients then send "
                "'Authorization: Bearer <token>'. Use --host 127.0.0.1 to serve this machine only"
            )
        names = {host}
        if loopback or _is_unspecified(host):
            names.update(_LOOPBACK_NAMES)
        if _is_unspecified(host):
            names.update(_machine_names())
        hosts = {_with_port(name, port) for name in [*names, *allow_hosts]}
        if port == 80:
            hosts.update(h.rsplit(":", 1)[0] for h in list(hosts))
        origins = {f"http://{h}" for h in hosts} | {f"https://{h}" for h in hosts}
        origins.update(o.strip().lower().rstrip("/") for o in allow_origins)
        return cls(frozenset(hosts), frozenset(origins), token, _is_unspecified(host), port)

    def host_allowed(self, host: str) -> bool:
        """Whether a (lower-case) ``host[:port]`` names this gateway."""
        if self.any_host or host in self.allowed_hosts:
            return True
        if not self.any_own_address:
            return False
        address, port = _split_host(host)
        if port != str(self.port) and not (port is None and self.port == 80):
            return False
        return is_own_address(address)

    def origin_allowed(self, origin: str) -> bool:
        """Whether an ``Origin`` value is one of this gateway's (or an allowed one)."""
        origin = origin.strip().lower().rstrip("/")
        if origin in self.allowed_origins:
            return True
        if self.any_host:
            return False
        scheme, _, host = origin.partition("://")
        return scheme in ("http", "https") and "/" not in host and self.host_allowed(host)

    def check(self, headers: Mapping[str, str]) -> tuple[int, str] | None:
        """``(status, reason)`` when a request with these (lower-case) headers is refused."""
        host = headers.get("host", "").strip().lower()
        if not self.host_allowed(host):
            return 421, f"Host {host!r} is not allowed (allowed: --allow-host)"
        origin = headers.get("origin")
        if origin is not None and not self.origin_allowed(origin):
            return 403, f"Origin {origin!r} is not allowed (allowed: --allow-origin)"
        if self.token is not None:
            given = headers.get("authorization", "")
            scheme, _, credential = given.partition(" ")
            # Header values arrive as bytes (decoded as Latin-1 here): compare those bytes.
            ok = scheme.lower() == "bearer" and hmac.compare_digest(
                credential.strip().encode("latin-1"), self.token.encode("ascii")
            )
            if not ok:
                return 401, "missing or wrong bearer token"
        return None


def _is_unspecified(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.strip("[]")).is_unspecified
    except ValueError:
        return False


class SecurityMiddleware:
    """An ASGI middleware refusing every HTTP request :meth:`HttpSecurity.check` refuses; the
    requests it lets in pass :class:`~toolsearch.mcp.http_sessions.SessionLimits`, which bounds
    the MCP sessions each client keeps, before they reach ``app``."""

    def __init__(self, app: App, security: HttpSecurity) -> None:
        self.sessions = SessionLimits(app)
        self.app: App = self.sessions
        self.security = security

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket":  # the gateway serves none
            await send({"type": "websocket.close", "code": 1008})
            return
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {
            key.decode("latin-1").lower(): value.decode("latin-1")
            for key, value in scope.get("headers", [])
        }
        refused = self.security.check(headers)
        if refused is None:
            await self.app(scope, receive, send)
            return
        status, reason = refused
        extra = [(b"www-authenticate", b"Bearer")] if status == 401 else []
        body = reason.encode("utf-8")
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [
                    (b"content-type", b"text/plain; charset=utf-8"),
                    (b"content-length", str(len(body)).encode()),
                    *extra,
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})
