"""A test MCP server that crashes.

``--when start``: writes a fatal error to stderr and exits with status 3 before answering
anything. ``--when call``: starts normally with two tools; calling ``crash`` kills the process
(exit status 7) in the middle of the call, and ``ping`` answers ``pong``.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import mcp_types as types
from _common import arguments, run
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server

TOOLS = [
    types.Tool(name="ping", description="Answer pong.", input_schema={"type": "object"}),
    types.Tool(
        name="crash", description="Kill the server process.", input_schema={"type": "object"}
    ),
]


def build() -> Server[Any]:
    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=TOOLS)

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        if params.name == "crash":
            print("fatal: crash requested", file=sys.stderr, flush=True)
            os._exit(7)
        return types.CallToolResult(content=[types.TextContent(text="pong")])

    return Server("crashing", on_list_tools=list_tools, on_call_tool=call_tool)


if __name__ == "__main__":
    parser = arguments(__doc__ or "")
    parser.add_argument("--when", choices=["start", "call"], default="start")
    options = parser.parse_args()
    if options.when == "start":
        print("fatal: cannot open the database /nonexistent/db.sqlite", file=sys.stderr, flush=True)
        sys.exit(3)
    run(build(), http=options.http)
