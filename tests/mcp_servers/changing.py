"""A test MCP server whose tool list changes while it runs.

It starts with ``notes_create``, ``notes_search`` and ``notes_delete`` plus three control tools:
``admin_add_tool`` (``name``, ``description``), ``admin_remove_tool`` (``name``) and
``admin_describe_tool`` (``name``, ``description``: change a tool's description). Every change
is announced the way the session's protocol expects: ``notifications/tools/list_changed`` on
handshake-era sessions, a ``subscriptions/listen`` event on 2026-07-28 sessions.
"""

from __future__ import annotations

from typing import Any

import mcp_types as types
from _common import arguments, run
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ToolsListChanged
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

NAME_SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "description": {"type": "string"}},
    "required": ["name"],
}
CONTROL = {
    "admin_add_tool": "Add a tool with the given name and description.",
    "admin_remove_tool": "Remove the named tool.",
    "admin_describe_tool": "Change the description of the named tool.",
}


def build() -> Server[Any]:
    bus = InMemorySubscriptionBus()
    tools: dict[str, str] = {
        "notes_create": "Create a note with a title and a body.",
        "notes_search": "Search notes by words in their title or body.",
        "notes_delete": "Delete a note by its identifier.",
    }

    async def announce(ctx: ServerRequestContext[Any]) -> None:
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            await bus.publish(ToolsListChanged())
        else:
            await ctx.session.send_tool_list_changed()

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        listed = {**tools, **CONTROL}
        return types.ListToolsResult(
            tools=[
                types.Tool(name=name, description=text, input_schema=NAME_SCHEMA)
                for name, text in sorted(listed.items())
            ]
        )

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        args = params.arguments or {}
        name = str(args.get("name", ""))
        if params.name == "admin_add_tool":
            tools[name] = str(args.get("description", f"The {name} tool."))
        elif params.name == "admin_remove_tool":
            tools.pop(name, None)
        elif params.name == "admin_describe_tool":
            tools[name] = str(args.get("description", ""))
        elif params.name in tools:
            return types.CallToolResult(content=[types.TextContent(text=f"{params.name} done")])
        else:
            return types.CallToolResult(
                content=[types.TextContent(text=f"unknown tool {params.name}")], is_error=True
            )
        await announce(ctx)
        return types.CallToolResult(content=[types.TextContent(text="ok")])

    return Server(
        "changing",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_subscriptions_listen=ListenHandler(bus),
    )


if __name__ == "__main__":
    options = arguments(__doc__ or "").parse_args()
    run(build(), http=options.http)
