"""An MCP server (stdio) that re-describes all of its tools on a timer, for the gateway
benchmark (``benchmarks/bench_gateway.py``).

    python benchmarks/servers/churn.py --tools 450 --period 0.1 [--control FILE] [--stats FILE]

It lists ``--tools`` tools named ``<prefix>_<i>``; every ``--period`` seconds (0: never) it gives
each a new description and announces the change: ``notifications/tools/list_changed`` on
handshake-era sessions, a ``subscriptions/listen`` event on 2026-07-28 sessions. With
``--control`` it changes only while that file exists, so one run can measure quiet and churn.
With ``--stats`` it rewrites that file each second with how many changes it announced and how
many times it was listed. Every call answers at once with a short text.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ToolsListChanged
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

WORDS = ("zephyr", "quasar", "nebula", "vortex", "saffron", "obsidian", "tundra", "lagoon")
SCHEMA = {"type": "object", "properties": {"value": {"type": "string"}}}


class Churn:
    """The server's state: its tools' revision and who to tell when it changes."""

    def __init__(self, prefix: str, count: int) -> None:
        self.prefix = prefix
        self.count = count
        self.revision = 0
        self.announced = 0
        self.listed = 0
        self.bus = InMemorySubscriptionBus()
        self.session: Any = None
        self.modern = False

    def tools(self) -> list[types.Tool]:
        return [
            types.Tool(
                name=f"{self.prefix}_{i}",
                description=self.description(i),
                input_schema=SCHEMA,
            )
            for i in range(self.count)
        ]

    def description(self, i: int) -> str:
        """Tool ``i``'s description in this revision: a change every revision (a new content
        hash to index), made of the same words in another order, so it never adds vocabulary
        and moves no ranking of a word-bag scorer (the benchmark's hashing encoder, ts_rank):
        the answers to every other server's queries stay the same whenever they are asked."""
        words = [WORDS[i % len(WORDS)], WORDS[(i + 3) % len(WORDS)]]
        if self.revision % 2:
            words.reverse()
        return f"{self.prefix.title()} {i}: {self.prefix} {' '.join(words)}."

    async def announce(self) -> None:
        self.revision += 1
        if self.modern:
            await self.bus.publish(ToolsListChanged())
        elif self.session is not None:
            await self.session.send_tool_list_changed()
        else:
            return
        self.announced += 1

    def build(self) -> Server[Any]:
        async def list_tools(
            ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
        ) -> types.ListToolsResult:
            self.session = ctx.session
            self.modern = ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
            self.listed += 1
            return types.ListToolsResult(tools=self.tools())

        async def call_tool(
            ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
        ) -> types.CallToolResult:
            return types.CallToolResult(content=[types.TextContent(text=f"{params.name} ok")])

        return Server(
            "churn",
            version="1.0",
            on_list_tools=list_tools,
            on_call_tool=call_tool,
            on_subscriptions_listen=ListenHandler(self.bus),
        )


async def _change(churn: Churn, period: float, control: Path | None) -> None:
    while True:
        await anyio.sleep(period)
        if control is None or control.exists():
            await churn.announce()


async def _report(churn: Churn, stats: Path) -> None:
    while True:
        stats.write_text(json.dumps({"announced": churn.announced, "listed": churn.listed}))
        await anyio.sleep(1.0)


async def main(options: argparse.Namespace) -> None:
    from mcp.server.stdio import stdio_server

    churn = Churn(options.prefix, options.tools)
    server = churn.build()
    async with stdio_server() as (read, write), anyio.create_task_group() as tasks:
        if options.period > 0:
            tasks.start_soon(_change, churn, options.period, options.control)
        if options.stats is not None:
            tasks.start_soon(_report, churn, options.stats)
        initialization = server.create_initialization_options(
            NotificationOptions(tools_changed=True)
        )
        await server.run(read, write, initialization)
        tasks.cancel_scope.cancel()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--tools", type=int, default=450)
    parser.add_argument("--period", type=float, default=0.1, help="seconds; 0 = never change")
    parser.add_argument("--prefix", default="churn")
    parser.add_argument("--control", type=Path, help="change only while this file exists")
    parser.add_argument("--stats", type=Path, help="write announced/listed counts here")
    anyio.run(main, parser.parse_args())
