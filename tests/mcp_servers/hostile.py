"""A test MCP server that misbehaves on request, to check the hub contains it.

``--utf8-garbage start`` writes a line of invalid UTF-8 on stdout before answering anything;
``--utf8-garbage call`` does so when its ``garbage`` tool is called (and never answers that
call). ``--tools N`` lists N tools; ``--schema-depth D`` gives the ``deep`` tool an input schema
nested D levels. The ``huge`` tool answers with ``megabytes`` MB of text; ``ping`` answers
``pong``.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

#: The protocol pipe, kept before the SDK points fd 1 elsewhere to protect it from prints.
PROTOCOL_FD = os.dup(1)


def nested(depth: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(depth):
        schema = {"type": "object", "properties": {"x": schema}}
    return schema


def build(options: argparse.Namespace) -> Any:
    import anyio
    import mcp_types as types
    from mcp.server.context import ServerRequestContext
    from mcp.server.lowlevel import Server

    plain = {"type": "object", "properties": {"megabytes": {"type": "number"}}}
    tools = [
        types.Tool(name="ping", description="Answer pong.", input_schema=plain),
        types.Tool(name="huge", description="Answer with a huge text.", input_schema=plain),
        types.Tool(name="garbage", description="Write invalid UTF-8.", input_schema=plain),
    ]
    tools += [
        types.Tool(name=f"bulk_{i}", description=f"Bulk tool number {i}.", input_schema=plain)
        for i in range(options.tools)
    ]
    if options.schema_depth:
        schema = {"type": "object", "properties": {"x": nested(options.schema_depth)}}
        tools.append(types.Tool(name="deep", description="Deep schema.", input_schema=schema))

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        args = params.arguments or {}
        if params.name == "huge":
            text = "x" * int(float(args.get("megabytes", 1)) * 1024 * 1024)
            return types.CallToolResult(content=[types.TextContent(text=text)])
        if params.name == "garbage":
            os.write(PROTOCOL_FD, b'{"jsonrpc": "2.0", "method": "\xff\xfe"}\n')
            await anyio.sleep(3600)
        return types.CallToolResult(content=[types.TextContent(text="pong")])

    return Server("hostile", on_list_tools=list_tools, on_call_tool=call_tool)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--utf8-garbage", choices=["start", "call"])
    parser.add_argument("--tools", type=int, default=0)
    parser.add_argument("--schema-depth", type=int, default=0)
    parser.add_argument("--http", action="store_true", help="serve streamable HTTP (SSE)")
    parser.add_argument("--json-response", action="store_true", help="HTTP with JSON bodies")
    options = parser.parse_args()
    if options.utf8_garbage == "start":
        os.write(1, b"\xff\xfe garbage\n")
    sys.setrecursionlimit(10_000)  # the SDK must be able to send the deep schema
    from _common import run

    http = options.http or options.json_response
    run(build(options), http=http, json_response=options.json_response)
