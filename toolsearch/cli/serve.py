"""``toolsearch serve``: run the MCP gateway over the servers of an MCP config file."""

from __future__ import annotations

import argparse
import signal
import sys
from typing import Any

from toolsearch.cli._scope import add_backend_argument, add_deny_argument
from toolsearch.errors import ConfigError

__all__ = ["register", "run"]


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "serve",
        help="serve tool search over many MCP servers as one MCP server",
        description='Connect to every server of an MCP config ({"mcpServers": ...}, as in '
        "Claude Desktop, Claude Code or Cursor) and serve two tools over MCP: search_tools "
        "(ToolSearch query syntax, returns tools with their schemas) and call_tool (runs a "
        "tool on its server). Point any MCP host at this command instead of the servers.",
    )
    parser.add_argument("--config", help="MCP config file (JSON)")
    parser.add_argument(
        "--example-config",
        action="store_true",
        help="print an example config to start from and exit: three servers of the bundled "
        "mcp-workbench catalogue, run by python -m toolsearch.mcp.catalog_server",
    )
    add_backend_argument(parser)
    add_deny_argument(parser)
    parser.add_argument(
        "--transport",
        choices=["stdio", "http"],
        default="stdio",
        help="stdio (default; what MCP hosts launch) or streamable HTTP",
    )
    _http_arguments(parser)
    parser.add_argument(
        "--startup-timeout",
        type=float,
        default=None,
        metavar="SECONDS",
        help="how long a server may take to connect before it counts as failed (default 30)",
    )
    parser.add_argument(
        "--call-timeout",
        type=float,
        default=None,
        metavar="SECONDS",
        help="how long a tool call may take (default 120)",
    )
    _limit_arguments(parser)
    parser.set_defaults(func=run)


def _http_arguments(parser: argparse.ArgumentParser) -> None:
    """Where the HTTP transport listens and who may talk to it (docs/security.md)."""
    parser.add_argument(
        "--host",
        default="127.0.0.1",
        help="HTTP address (default 127.0.0.1); any other than loopback needs a bearer token",
    )
    parser.add_argument(
        "--port", type=int, default=8000, help="HTTP port; 0 picks a free one (default 8000)"
    )
    parser.add_argument(
        "--token-file",
        metavar="FILE",
        help="HTTP: file whose first line is the bearer token clients must send (default: "
        "$TOOLSEARCH_GATEWAY_TOKEN); required unless --host is a loopback address",
    )
    parser.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="HOST[:PORT]",
        help="HTTP: another Host header value to accept (e.g. a DNS name); repeatable",
    )
    parser.add_argument(
        "--unix-socket",
        metavar="FILE",
        help="HTTP: listen on this Unix domain socket (mode 0600: only you can connect) "
        "instead of --host/--port; the safe form on a machine with other users",
    )
    parser.add_argument(
        "--max-connections",
        type=int,
        default=None,
        metavar="N",
        help="HTTP: most open connections, a quarter of them per client address (default: "
        "half the process's file-descriptor limit, at most 1000)",
    )
    parser.add_argument(
        "--allow-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="HTTP: a browser Origin to accept (e.g. http://localhost:6274); repeatable",
    )


def _limit_arguments(parser: argparse.ArgumentParser) -> None:
    """Limits that keep a hostile or broken server from costing unbounded time or memory."""
    parser.add_argument(
        "--max-tools",
        type=int,
        default=None,
        metavar="N",
        help="most tools one server may list; more fails that server (default 10000)",
    )
    parser.add_argument(
        "--max-message-bytes",
        type=int,
        default=None,
        metavar="BYTES",
        help="largest message a stdio server may send; a larger tool result is an error "
        "result (default 16 MiB)",
    )


#: What the gateway imports: the MCP SDK (its types live in ``mcp_types``) and anyio.
GATEWAY_MODULES = ("mcp", "mcp_types", "anyio")


def run(args: argparse.Namespace) -> int:
    from toolsearch.extras import require_extra

    if args.example_config:
        from toolsearch.cli._output import print_json
        from toolsearch.mcp.catalog_server import example_config

        print_json(example_config())
        return 0
    if not args.config:
        raise ConfigError(
            "--config FILE is required (an MCP config); --example-config prints one to start "
            "from: toolsearch serve --example-config > mcp.json"
        )
    require_extra("toolsearch serve", "mcp", GATEWAY_MODULES)
    import anyio

    from toolsearch.mcp.config import load_mcp_config
    from toolsearch.mcp.gateway import serve
    from toolsearch.permissions import parse_rules

    config = load_mcp_config(args.config)
    rules = parse_rules(args.deny)
    if not 0 <= args.port <= 65535:
        raise ConfigError(f"--port must be between 0 and 65535, got {args.port}")
    options: dict[str, Any] = {"deny": rules, "backend": args.backend, "log": _log}
    options.update(_http_options(args))
    for flag in ("max_tools", "max_message_bytes"):
        limit = getattr(args, flag)
        if limit is not None:
            if limit < 1:
                raise ConfigError(f"--{flag.replace('_', '-')} must be positive, got {limit}")
            options[flag] = limit
    for flag in ("startup_timeout", "call_timeout"):
        value = getattr(args, flag)
        if value is not None:
            if not value > 0:  # also refuses nan
                raise ConfigError(f"--{flag.replace('_', '-')} must be positive, got {value:g}")
            options[flag] = value

    def ready(where: str) -> None:
        servers = ", ".join(config.names) or "no servers"
        print(f"toolsearch gateway on {where} for {servers}", file=sys.stderr, flush=True)

    stopped_by = anyio.run(
        lambda: serve(
            config,
            transport=args.transport,
            host=args.host,
            port=args.port,
            on_ready=ready,
            **options,
        )
    )
    if stopped_by == signal.SIGINT:
        # the HTTP gateway shut down cleanly on Ctrl-C: the command says so and exits 130
        # like any other (a Ctrl-C on stdio arrives as KeyboardInterrupt, to the same end)
        raise KeyboardInterrupt
    return 0


def _http_options(args: argparse.Namespace) -> dict[str, Any]:
    """The HTTP transport's options for :func:`~toolsearch.mcp.gateway.serve` (none for
    stdio, where any of them is a mistake)."""
    from toolsearch.mcp.http_connections import ConnectionLimits
    from toolsearch.mcp.http_security import load_token

    if args.transport == "http":
        if args.max_connections is not None and args.max_connections < 1:
            raise ConfigError(f"--max-connections must be positive, got {args.max_connections}")
        return {
            "token": load_token(file=args.token_file),
            "allow_hosts": args.allow_host,
            "allow_origins": args.allow_origin,
            "connections": ConnectionLimits(max_connections=args.max_connections),
            "unix_socket": args.unix_socket,
        }
    given = (args.token_file, args.allow_host, args.allow_origin)
    if any(given) or args.max_connections or args.unix_socket:
        raise ConfigError(
            "--token-file, --allow-host, --allow-origin, --max-connections and --unix-socket "
            "need --transport http"
        )
    return {}


def _log(line: str) -> None:
    print(f"toolsearch gateway: {line}", file=sys.stderr, flush=True)
