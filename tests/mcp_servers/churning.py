"""A test MCP server whose whole tool list keeps changing on its own.

``--tools N`` tools named ``<prefix>_tool_<i>``; every ``--interval`` seconds (0: never) each
tool is re-described (``--mode describe``) or renamed (``--mode rename``: the names carry a
round number, so every round removes all tools and adds as many new ones), and the change is
announced on the 2026-07-28 listen stream. The churn runs from the first listing on.
"""

from __future__ import annotations

import argparse
from typing import Any

import anyio
import mcp_types as types
from _common import arguments
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ToolsListChanged

SCHEMA = {"type": "object", "properties": {"text": {"type": "string"}}}


class Churn:
    """The server's tool list: round ``round`` of ``tools`` tools."""

    def __init__(self, options: argparse.Namespace) -> None:
        self.options = options
        self.round = 0
        self.bus = InMemorySubscriptionBus()
        self.started = anyio.Event()

    def tools(self) -> list[types.Tool]:
        o = self.options
        tag = f"_r{self.round}" if o.mode == "rename" else ""
        return [
            types.Tool(
                name=f"{o.prefix}_tool_{i}{tag}",
                description=f"{o.prefix} tool {i}: widget {i % 37} (revision {self.round}).",
                input_schema=SCHEMA,
            )
            for i in range(o.tools)
        ]

    async def run(self) -> None:
        if self.options.interval <= 0:
            return
        await self.started.wait()
        while True:
            await anyio.sleep(self.options.interval)
            self.round += 1
            await self.bus.publish(ToolsListChanged())


def build(churn: Churn) -> Server[Any]:
    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        churn.started.set()
        return types.ListToolsResult(tools=churn.tools())

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        return types.CallToolResult(content=[types.TextContent(text=f"{params.name} done")])

    return Server(
        "churning",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_subscriptions_listen=ListenHandler(churn.bus),
    )


async def main(options: argparse.Namespace) -> None:
    from mcp.server.stdio import stdio_server

    churn = Churn(options)
    server = build(churn)
    async with anyio.create_task_group() as tasks, stdio_server() as (read, write):
        tasks.start_soon(churn.run)
        init = server.create_initialization_options(NotificationOptions(tools_changed=True))
        await server.run(read, write, init)
        tasks.cancel_scope.cancel()


if __name__ == "__main__":
    parser = arguments(__doc__ or "")
    parser.add_argument("--tools", type=int, default=100)
    parser.add_argument("--interval", type=float, default=0.1)
    parser.add_argument("--mode", choices=("describe", "rename"), default="describe")
    parser.add_argument("--prefix", default="churn")
    anyio.run(main, parser.parse_args())
