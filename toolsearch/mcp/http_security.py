"""What the HTTP gateway lets in: Host and Origin allow-lists and a bearer token.

The MCP specification says a streamable HTTP server must validate ``Origin`` and should bind to
localhost and authenticate. :class:`HttpSecurity` holds the rules for one listening address and
:class:`SecurityMiddleware` applies them to every HTTP request before the MCP app sees it
(docs/security.md, "HTTP gateway"):

- ``Host`` must name the gateway: its own address and port, the loopback names when it listens
  on loopback, the machine's names when it listens on every interface, plus ``--allow-host``;
- ``Origin``, when a browser sends one, must be one of those hosts as ``http://host:port`` or an
  ``--allow-origin`` value;
- ``Authorization: Bearer <token>`` must carry the token whenever one is configured, and one is
  required unless the address is loopback. Tokens are compared in constant time.
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

__all__ = [
    "MIN_TOKEN_LENGTH",
    "TOKEN_ENV",
    "HttpSecurity",
    "SecurityMiddleware",
    "is_loopback",
    "load_token",
]

#: The environment variable the gateway reads its bearer token from.
TOKEN_ENV = "TOOLSEARCH_GATEWAY_TOKEN"
MIN_TOKEN_LENGTH = 16
_LOOPBACK_NAMES = ("localhost", "127.0.0.1", "[::1]")

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
    if len(token) < MIN_TOKEN_LENGTH:
        raise ConfigError(
            f"the bearer token in {source} is {len(token)} characters long; use at least "
            f"{MIN_TOKEN_LENGTH} (e.g. python -c 'import secrets; print(secrets.token_urlsafe())')"
        )
    return token


def _with_port(host: str, port: int) -> str:
    host = host.strip().lower().rstrip("/")
    if host.startswith("["):
        return host if "]:" in host else f"{host}:{port}"
    if host.count(":") > 1:  # a bare IPv6 address
        return f"[{host}]:{port}"
    return host if ":" in host else f"{host}:{port}"


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
        non-loopback address without a token."""
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
        return cls(frozenset(hosts), frozenset(origins), token)

    def check(self, headers: Mapping[str, str]) -> tuple[int, str] | None:
        """``(status, reason)`` when a request with these (lower-case) headers is refused."""
        host = headers.get("host", "").strip().lower()
        if host not in self.allowed_hosts:
            return 421, f"Host {host!r} is not allowed (allowed: --allow-host)"
        origin = headers.get("origin")
        if origin is not None and origin.strip().lower().rstrip("/") not in self.allowed_origins:
            return 403, f"Origin {origin!r} is not allowed (allowed: --allow-origin)"
        if self.token is not None:
            given = headers.get("authorization", "")
            scheme, _, credential = given.partition(" ")
            ok = scheme.lower() == "bearer" and hmac.compare_digest(
                credential.strip().encode("utf-8"), self.token.encode("utf-8")
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
    """An ASGI middleware refusing every HTTP request :meth:`HttpSecurity.check` refuses."""

    def __init__(self, app: App, security: HttpSecurity) -> None:
        self.app = app
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
