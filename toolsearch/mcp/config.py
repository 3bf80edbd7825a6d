"""MCP server configs in the format users already have.

Claude Desktop, Claude Code (``.mcp.json``), Cursor and most other MCP hosts describe their
servers the same way, so toolsearch reads that file unchanged::

    {
      "mcpServers": {
        "github": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-github"],
                   "env": {"GITHUB_TOKEN": "${GITHUB_TOKEN}"}},
        "linear": {"url": "https://mcp.linear.app/mcp",
                   "headers": {"Authorization": "Bearer ${LINEAR_TOKEN}"}}
      }
    }

An entry with ``command`` is a stdio server (``args``, ``env``, ``cwd`` optional); an entry with
``url`` is a streamable HTTP server (``headers`` optional). ``type`` may say so explicitly
(``stdio``, ``http``, ``streamable-http``, ``streamableHttp``). ``${VAR}`` and
``${VAR:-default}`` are expanded in ``command``, ``args``, ``env``, ``cwd``, ``url`` and
``headers``, as Claude Code does; the values that came from the environment are never shown:
errors quote the config as written and :meth:`ServerConfig.redact` turns each value back into
its ``${VAR}`` in anything a server prints (docs/security.md, "Secrets in the config").
``disabled: true`` skips a server. Keys other hosts add
(``autoApprove``, ``description``...) are ignored so one file can serve several hosts.

A stdio server gets the SDK's safe environment (``HOME``, ``PATH``, ``USER``... — not the
caller's whole environment) plus its ``env``, as in Claude Desktop: put tokens in ``env``.

toolsearch adds three optional keys per server: ``alwaysLoad`` (every tool of the server is
sent up front instead of deferred), ``startupTimeout`` and ``callTimeout`` (seconds).

Every problem is a :class:`McpConfigError` naming the file, the server and the field.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Literal
from urllib.parse import quote, quote_plus

from toolsearch.errors import ConfigError, LocatedError
from toolsearch.tool import normalize_name_part

__all__ = [
    "McpConfig",
    "McpConfigError",
    "ServerConfig",
    "Transport",
    "check_tool_prefixes",
    "expand_env",
    "load_mcp_config",
    "parse_mcp_config",
]

Transport = Literal["stdio", "http"]

_TYPE_ALIASES: dict[str, Transport] = {
    "stdio": "stdio",
    "http": "http",
    "streamable-http": "http",
    "streamable_http": "http",
    "streamablehttp": "http",
}
_ENV_REFERENCE = re.compile(r"\$\{([^}:]*)(?::-([^}]*))?\}")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class McpConfigError(LocatedError, ConfigError):
    """An MCP config file is unreadable or one of its server entries is invalid.

    ``path``, ``server`` and ``field`` locate the problem; the message names all of them.
    """

    def __init__(
        self,
        message: str,
        *,
        path: str | Path | None = None,
        server: str | None = None,
        field: str | None = None,
    ) -> None:
        self.server = server
        entry = f"server {server!r}" if server is not None else None
        super().__init__(message, path=path, field=field, entry=entry)


@dataclass(frozen=True, slots=True)
class ServerConfig:
    """One configured MCP server, validated and with ``${VAR}`` references expanded.

    ``transport`` is ``"stdio"`` (``command``, ``args``, ``env``, ``cwd``) or ``"http"``
    (``url``, ``headers``). ``always_load`` is the server-level setting that sends all of the
    server's tools up front. Timeouts of ``None`` mean the hub's defaults.
    """

    name: str
    transport: Transport
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    always_load: bool = False
    startup_timeout: float | None = None
    call_timeout: float | None = None
    #: Each ``${VAR}`` the entry expanded from the environment, with its value.
    secrets: Mapping[str, str] = field(default_factory=dict, repr=False, compare=False)

    def __repr__(self) -> str:
        shown = ", ".join(
            f"{f.name}={getattr(self, f.name)!r}" for f in fields(self) if f.name != "secrets"
        )
        return self.redact(f"ServerConfig({shown})")

    def redact(self, text: str) -> str:
        """``text`` with every value expanded from the environment written as its ``${VAR}``
        again (longest value first), so errors and a server's stderr never show them. A value
        is also found URL-encoded (``%2B``, ``%2b`` or ``+`` for a space), as a server quoting
        a request URL writes it."""
        names: dict[str, str] = {}
        for name, value in self.secrets.items():
            for form in _encoded_forms(value):
                names.setdefault(form, name)
        if not names or not text:
            return text
        ordered = sorted(names, key=lambda form: (-len(form), form))
        pattern = re.compile("|".join(re.escape(form) for form in ordered))
        return pattern.sub(lambda match: f"${{{names[match.group(0)]}}}", text)

    @property
    def longest_secret_bytes(self) -> int:
        """The UTF-8 length of the longest form :meth:`redact` hides (0 without secrets): a
        text cut anywhere must keep this much before the cut to redact what straddles it."""
        forms = (form for value in self.secrets.values() for form in _encoded_forms(value))
        return max((len(form.encode("utf-8")) for form in forms), default=0)

    @property
    def tool_prefix(self) -> str:
        """The prefix every tool of this server gets: ``mcp__<server>__``."""
        return f"mcp__{normalize_name_part(self.name)}__"

    def describe(self) -> str:
        """A one-line description for logs and error messages (no header, env or expanded
        values)."""
        if self.transport == "stdio":
            return self.redact(" ".join([self.command or "", *self.args]).strip())
        return self.redact(self.url or "")


def _encoded_forms(value: str) -> set[str]:
    """``value`` as written and URL-encoded (``quote`` with and without ``/`` kept,
    ``quote_plus``, each with upper- and lower-case hex digits); empty for an empty value."""
    if not value:
        return set()
    forms = {value, quote(value, safe=""), quote(value), quote_plus(value, safe="")}
    lower = {_PERCENT_HEX.sub(lambda m: m.group(0).lower(), form) for form in forms}
    return forms | lower


_PERCENT_HEX = re.compile(r"%[0-9A-F]{2}")


@dataclass(frozen=True, slots=True)
class McpConfig:
    """Every enabled server of one config, in file order; ``disabled`` lists skipped names."""

    servers: tuple[ServerConfig, ...]
    disabled: tuple[str, ...] = ()
    path: str | None = None

    def __iter__(self) -> Iterator[ServerConfig]:
        return iter(self.servers)

    def __len__(self) -> int:
        return len(self.servers)

    @property
    def names(self) -> list[str]:
        """The enabled servers' names."""
        return [server.name for server in self.servers]

    def get(self, name: str) -> ServerConfig | None:
        """The server called ``name``, if configured and enabled."""
        return next((s for s in self.servers if s.name == name), None)


def expand_env(
    text: str, environ: Mapping[str, str] | None = None, *, used: dict[str, str] | None = None
) -> str:
    """Expand ``${VAR}`` and ``${VAR:-default}`` in ``text``; ``used`` collects each variable
    taken from the environment with its value (what :meth:`ServerConfig.redact` hides).

    An unset variable without a default is a :class:`ConfigError` naming it, so a missing
    token fails at load time rather than as an opaque 401 from the server later.
    """
    env = os.environ if environ is None else environ

    def replace(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        if not _ENV_NAME.fullmatch(name):
            raise ConfigError(f"invalid environment variable reference {match.group(0)!r}")
        value = env.get(name)
        if value is None or (value == "" and default is not None):
            if default is None:
                raise ConfigError(f"environment variable {name} is not set")
            return default
        if used is not None:
            used[name] = value
        return value

    return _ENV_REFERENCE.sub(replace, text)


def load_mcp_config(path: str | Path, *, environ: Mapping[str, str] | None = None) -> McpConfig:
    """Read and validate an MCP config file (``{"mcpServers": {...}}``)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise McpConfigError("file not found", path=path) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise McpConfigError(f"cannot read file: {exc}", path=path) from exc
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise McpConfigError(
            f"invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}", path=path
        ) from exc
    return parse_mcp_config(data, path=str(path), environ=environ)


def parse_mcp_config(
    data: Any, *, path: str | None = None, environ: Mapping[str, str] | None = None
) -> McpConfig:
    """Validate already-decoded config data; ``path`` only labels error messages.

    The servers live under ``mcpServers`` (Claude Desktop, Claude Code, Cursor); a file that
    has only ``servers`` (VS Code) is read the same way.
    """
    if not isinstance(data, Mapping):
        raise McpConfigError(
            f"an MCP config must be a JSON object, got {type(data).__name__}", path=path
        )
    key = "mcpServers" if "mcpServers" in data or "servers" not in data else "servers"
    if key not in data:
        raise McpConfigError("missing the 'mcpServers' object", path=path, field="mcpServers")
    entries = data[key]
    if not isinstance(entries, Mapping):
        raise McpConfigError(
            f"must be an object mapping server names to settings, got {type(entries).__name__}",
            path=path,
            field=key,
        )
    servers: list[ServerConfig] = []
    disabled: list[str] = []
    for name, entry in entries.items():
        where = _Where(path, name)
        if not isinstance(name, str) or not name.strip():
            raise McpConfigError(
                f"server names must be non-empty strings, got {name!r}", path=path, field=key
            )
        if not isinstance(entry, Mapping):
            raise where.error(f"settings must be a JSON object, got {type(entry).__name__}")
        if _flag(entry, "disabled", where):
            disabled.append(name)
            continue
        servers.append(_server(name, entry, where, environ))
    check_tool_prefixes(servers, path=path)
    return McpConfig(tuple(servers), tuple(disabled), path)


def check_tool_prefixes(servers: Iterable[ServerConfig], *, path: str | None = None) -> None:
    """Refuse servers whose tools could take each other's names.

    Tool names are ``mcp__<server>__<tool>`` after normalisation, and lookup ignores case, so
    server ``a`` offering ``b__x`` and server ``a__b`` offering ``x`` would both be
    ``mcp__a__b__x``; so would ``My Files`` and ``my.files``. Two servers clash when one's
    prefix, lower-cased, starts the other's; refusing that means no tool can ever shadow
    another server's. A name with surrounding whitespace is refused too.
    """
    seen: list[tuple[str, ServerConfig]] = []
    for server in servers:
        if server.name != server.name.strip():
            raise McpConfigError(
                "a server name must not start or end with whitespace (a deny rule could not "
                "name it)",
                path=path,
                server=server.name,
            )
        prefix = server.tool_prefix.lower()
        for other_prefix, other in seen:
            if prefix.startswith(other_prefix) or other_prefix.startswith(prefix):
                raise McpConfigError(
                    f"its tools would be named {server.tool_prefix}*, which clashes with "
                    f"server {other.name!r} (tools named {other.tool_prefix}*): one server's "
                    "tools could take the other's names; rename one of them",
                    path=path,
                    server=server.name,
                )
        seen.append((prefix, server))


class _Where:
    def __init__(self, path: str | None, server: str) -> None:
        self.path, self.server = path, server
        #: The variables this entry expanded from the environment, with their values.
        self.secrets: dict[str, str] = {}

    def error(self, message: str, field: str | None = None) -> McpConfigError:
        return McpConfigError(message, path=self.path, server=self.server, field=field)


def _flag(entry: Mapping[str, Any], key: str, where: _Where, *aliases: str) -> bool:
    for name in (key, *aliases):
        if name in entry:
            value = entry[name]
            if not isinstance(value, bool):
                raise where.error(f"must be true or false, got {value!r}", name)
            return value
    return False


def _string(
    entry: Mapping[str, Any], key: str, where: _Where, environ: Mapping[str, str] | None
) -> str | None:
    if key not in entry or entry[key] is None:
        return None
    value = entry[key]
    if not isinstance(value, str) or not value.strip():
        raise where.error(f"must be a non-empty string, got {value!r}", key)
    return _expand(value, where, key, environ)


def _expand(value: str, where: _Where, field: str, environ: Mapping[str, str] | None) -> str:
    try:
        return expand_env(value, environ, used=where.secrets)
    except ConfigError as exc:
        raise where.error(str(exc), field) from None


def _string_map(
    entry: Mapping[str, Any], key: str, where: _Where, environ: Mapping[str, str] | None
) -> dict[str, str]:
    value = entry.get(key)
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise where.error(f"must be an object of strings, got {type(value).__name__}", key)
    result: dict[str, str] = {}
    for name, item in value.items():
        if not isinstance(name, str) or not name:
            raise where.error(f"keys must be non-empty strings, got {name!r}", key)
        if isinstance(item, bool) or not isinstance(item, str | int | float):
            raise where.error(f"must be a string, got {type(item).__name__}", f"{key}.{name}")
        result[name] = _expand(str(item), where, f"{key}.{name}", environ)
    return result


def _timeout(entry: Mapping[str, Any], key: str, where: _Where) -> float | None:
    value = entry.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise where.error(f"must be a number of seconds, got {value!r}", key)
    if not math.isfinite(value) or value <= 0:
        raise where.error(f"must be a positive number of seconds, got {value!r}", key)
    return float(value)


def _server(
    name: str, entry: Mapping[str, Any], where: _Where, environ: Mapping[str, str] | None
) -> ServerConfig:
    declared = entry.get("type", entry.get("transport"))
    transport: Transport | None = None
    if declared is not None:
        field_name = "type" if "type" in entry else "transport"
        if not isinstance(declared, str):
            raise where.error(f"must be a string, got {declared!r}", field_name)
        if declared.lower() == "sse":
            raise where.error(
                "the legacy SSE transport is not supported; use the server's streamable HTTP "
                "endpoint (type 'http')",
                field_name,
            )
        transport = _TYPE_ALIASES.get(declared.lower())
        if transport is None:
            raise where.error(
                f"unknown transport {declared!r}; expected 'stdio' or 'http'", field_name
            )
    has_command, has_url = entry.get("command") is not None, entry.get("url") is not None
    if transport is None:
        if has_command and has_url:
            raise where.error("has both 'command' and 'url'; set 'type' to choose one")
        if not has_command and not has_url:
            raise where.error(
                "needs 'command' (a stdio server) or 'url' (a streamable HTTP server)"
            )
        transport = "stdio" if has_command else "http"
    always_load = _flag(entry, "alwaysLoad", where, "always_load")
    startup = _timeout(entry, "startupTimeout", where)
    call = _timeout(entry, "callTimeout", where)
    if transport == "stdio":
        command = _string(entry, "command", where, environ)
        if command is None:
            raise where.error("a stdio server needs a command", "command")
        args = entry.get("args", [])
        if args is None:
            args = []
        if not isinstance(args, list):
            raise where.error(f"must be a list of strings, got {type(args).__name__}", "args")
        expanded: list[str] = []
        for index, arg in enumerate(args):
            if isinstance(arg, bool) or not isinstance(arg, str | int | float):
                raise where.error(f"must be a string, got {arg!r}", f"args[{index}]")
            expanded.append(_expand(str(arg), where, f"args[{index}]", environ))
        return ServerConfig(
            name=name,
            transport="stdio",
            command=command,
            args=tuple(expanded),
            env=_string_map(entry, "env", where, environ),
            cwd=_string(entry, "cwd", where, environ),
            always_load=always_load,
            startup_timeout=startup,
            call_timeout=call,
            secrets=where.secrets,
        )
    url = _string(entry, "url", where, environ)
    if url is None:
        raise where.error("a streamable HTTP server needs a url", "url")
    if not re.match(r"https?://[^/\s]+", url):
        # Quoted as written: the expanded URL may hold a key from the environment.
        raise where.error(f"must be an http:// or https:// URL, got {entry['url']!r}", "url")
    return ServerConfig(
        name=name,
        transport="http",
        url=url,
        headers=_string_map(entry, "headers", where, environ),
        always_load=always_load,
        startup_timeout=startup,
        call_timeout=call,
        secrets=where.secrets,
    )
