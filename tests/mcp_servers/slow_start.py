"""A test MCP server that takes ``--delay`` seconds to answer its first request.

It reads its pipes from the start (so closing stdin stops it at once) but holds the
``server/discover`` probe and the ``initialize`` handshake back, like a server that loads a
large index or authenticates before it is ready. Once up it has three weather tools.
"""

from __future__ import annotations

from typing import Any

import anyio
import mcp_types as types
from _common import arguments, run
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel import Server

TOOLS = [
    types.Tool(
        name=name,
        description=description,
        input_schema={"type": "object", "properties": {"city": {"type": "string"}}},
    )
    for name, description in (
        ("forecast", "Weather forecast for a city for the next days."),
        ("current_conditions", "Current weather conditions for a city."),
        ("weather_alerts", "Active severe weather alerts for a region."),
    )
]


class Delay:
    """Middleware that holds the first handshake request back for ``seconds``."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.done = False

    async def __call__(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        if not self.done and ctx.method in ("initialize", "server/discover"):
            await anyio.sleep(self.seconds)
            self.done = True
        return await call_next(ctx)


def build(delay: float) -> Server[Any]:
    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=TOOLS)

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        city = (params.arguments or {}).get("city", "nowhere")
        return types.CallToolResult(
            content=[types.TextContent(text=f"{params.name}: sunny in {city}")]
        )

    server = Server("slow-start", on_list_tools=list_tools, on_call_tool=call_tool)
    server.middleware.append(Delay(delay))
    return server


if __name__ == "__main__":
    parser = arguments(__doc__ or "")
    parser.add_argument("--delay", type=float, default=30.0)
    options = parser.parse_args()
    run(build(options.delay), http=options.http)
