"""Shared plumbing for the test MCP servers: run a low-level ``Server`` over stdio or HTTP.

These servers are real MCP servers built on the official SDK; tests start them as
subprocesses with ``sys.executable`` and talk to them over real pipes or sockets.
"""

from __future__ import annotations

import argparse
import socket
import sys
from typing import Any

import anyio
from mcp.server.lowlevel import NotificationOptions, Server


def arguments(description: str) -> argparse.ArgumentParser:
    """A parser with the transport options every test server accepts."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument(
        "--http",
        action="store_true",
        help="serve streamable HTTP on 127.0.0.1 (a free port, printed to stdout) instead of stdio",
    )
    return parser


def run(server: Server[Any], *, http: bool = False, json_response: bool = False) -> None:
    """Serve ``server`` until the client goes away (stdio) or the process is stopped (HTTP,
    answering with SSE streams or, with ``json_response``, plain JSON bodies)."""
    if http:
        anyio.run(_serve_http, server, json_response)
    else:
        anyio.run(_serve_stdio, server)


async def _serve_stdio(server: Server[Any]) -> None:
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read, write):
        options = server.create_initialization_options(NotificationOptions(tools_changed=True))
        await server.run(read, write, options)


async def _serve_http(server: Server[Any], json_response: bool = False) -> None:
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.listen(128)  # connections queue from here on, so the printed URL is never early
    app = server.streamable_http_app(host="127.0.0.1", json_response=json_response)
    config = uvicorn.Config(app, log_config=None, log_level="warning", lifespan="on")
    print(f"http://127.0.0.1:{port}/mcp", flush=True)
    print(f"listening on port {port}", file=sys.stderr, flush=True)
    await uvicorn.Server(config).serve(sockets=[sock])
