"""An MCP server that serves one server's tools of a catalogue, for trying the gateway.

``python -m toolsearch.mcp.catalog_server --catalog mcp-workbench --server slack`` lists the
catalogue's ``mcp__slack__*`` tools under their own names (``send_message``), with their
schemas and search hints, over stdio. A call performs nothing: it answers with a text naming
the tool and its arguments. ``toolsearch serve --example-config`` prints a gateway config of a
few such servers, so the gateway runs from a wheel install with nothing else to set up
(docs/gateway.md).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from toolsearch.catalog import load_nonempty_catalog
from toolsearch.errors import CatalogError, ToolSearchError
from toolsearch.tool import Tool

__all__ = ["EXAMPLE_SERVERS", "build", "example_config", "main", "server_tools"]

#: The servers of the example config: three of the bundled mcp-workbench catalogue's 36.
EXAMPLE_SERVERS: tuple[str, ...] = ("slack", "github", "stripe")


def server_tools(catalog: str, server: str) -> list[Tool]:
    """The tools of ``server`` in ``catalog`` (``mcp__<server>__*``), in catalogue order."""
    prefix = f"mcp__{server}__"
    tools = [t for t in load_nonempty_catalog(catalog) if t.name.startswith(prefix)]
    if not tools:
        raise CatalogError(f"no tool of server {server!r} (no name starts with {prefix})")
    return tools


def build(tools: Sequence[Tool], server: str) -> Any:
    """A low-level MCP ``Server`` listing ``tools`` without their ``mcp__<server>__`` prefix."""
    import mcp_types as types
    from mcp.server.context import ServerRequestContext
    from mcp.server.lowlevel import Server

    prefix = f"mcp__{server}__"
    listed = [
        types.Tool(
            name=tool.name.removeprefix(prefix),
            description=tool.description,
            input_schema=dict(tool.input_schema),
            _meta={"anthropic/searchHint": tool.search_hint} if tool.search_hint else None,
        )
        for tool in tools
    ]
    names = {tool.name for tool in listed}

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=listed)

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        args = params.arguments or {}
        if params.name not in names:
            text = f"unknown tool {params.name}"
            return types.CallToolResult(content=[types.TextContent(text=text)], is_error=True)
        text = f"{params.name} called with {json.dumps(args, sort_keys=True)} (nothing was done)"
        return types.CallToolResult(content=[types.TextContent(text=text)])

    return Server(server, version="1.0", on_list_tools=list_tools, on_call_tool=call_tool)


def example_config(python: str = sys.executable) -> dict[str, Any]:
    """A gateway config (``{"mcpServers": ...}``) of :data:`EXAMPLE_SERVERS`, each this module
    run by ``python`` over the bundled mcp-workbench catalogue."""
    module = "toolsearch.mcp.catalog_server"
    return {
        "mcpServers": {
            server: {
                "command": python,
                "args": ["-m", module, "--catalog", "mcp-workbench", "--server", server],
            }
            for server in EXAMPLE_SERVERS
        }
    }


def main(argv: Sequence[str] | None = None) -> int:
    """Serve until the client closes stdin; 2 with one line on a bad catalogue or server."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--catalog", default="mcp-workbench", help="a catalogue path or name")
    parser.add_argument("--server", required=True, help="whose tools to serve (mcp__<server>__*)")
    args = parser.parse_args(argv)
    try:
        tools = server_tools(args.catalog, args.server)
    except ToolSearchError as exc:
        print(f"catalog_server: error: {exc}", file=sys.stderr)
        return 2
    import anyio
    from mcp.server.lowlevel import NotificationOptions
    from mcp.server.stdio import stdio_server

    server = build(tools, args.server)

    async def serve() -> None:
        async with stdio_server() as (read, write):
            await server.run(
                read, write, server.create_initialization_options(NotificationOptions())
            )

    anyio.run(serve)
    return 0


if __name__ == "__main__":
    sys.exit(main())
