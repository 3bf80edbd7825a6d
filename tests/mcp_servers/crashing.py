"""A test MCP server that crashes.

``--when start``: writes a fatal error to stderr and exits with status 3 before answering
anything. ``--when call``: starts normally with two tools; calling ``crash`` kills the process
(exit status 7) in the middle of the call, and ``ping`` answers ``pong``.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any


def build() -> Any:
    import mcp_types as types
    from mcp.server.context import ServerRequestContext
    from mcp.server.lowlevel import Server

    tools = [
        types.Tool(name="ping", description="Answer pong.", input_schema={"type": "object"}),
        types.Tool(
            name="crash", description="Kill the server process.", input_schema={"type": "object"}
        ),
    ]

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        if params.name == "crash":
            print("fatal: crash requested", file=sys.stderr, flush=True)
            os._exit(7)
        return types.CallToolResult(content=[types.TextContent(text="pong")])

    return Server("crashing", on_list_tools=list_tools, on_call_tool=call_tool)


if __name__ == "__main__":
    # Decide before importing the SDK: crashing at start costs no import time.
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--when", choices=["start", "call"], default="start")
    parser.add_argument("--http", action="store_true")
    options = parser.parse_args()
    if options.when == "start":
        print("fatal: cannot open the database /nonexistent/db.sqlite", file=sys.stderr, flush=True)
        sys.exit(3)
    from _common import run

    run(build(), http=options.http)
