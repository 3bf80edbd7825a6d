"""A test MCP server with a few hundred tools, listed in pages of ``--page-size``.

Tool names are ``<service>_<verb>_<object>`` (``github_create_issue``); every tool answers with
a text block naming itself and its arguments. Three special tools exercise error paths:
``diagnostics_report_failure`` returns ``isError: true``, ``diagnostics_raise_exception`` raises
inside the handler, and ``diagnostics_sleep`` sleeps for ``seconds``. One tool carries an
``anthropic/searchHint`` and one ``anthropic/alwaysLoad`` in ``_meta``.
"""

from __future__ import annotations

from typing import Any

import anyio
import mcp_types as types
from _common import arguments, run
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server

SERVICES: dict[str, list[str]] = {
    "github": ["issue", "pull_request", "repository", "branch", "release"],
    "slack": ["message", "channel", "reaction", "reminder", "user_group"],
    "jira": ["ticket", "sprint", "board", "epic", "comment"],
    "notion": ["page", "database", "block", "comment", "template"],
    "gmail": ["email", "draft", "label", "thread", "filter"],
    "calendar": ["event", "calendar", "invitation", "reminder", "availability"],
    "drive": ["file", "folder", "permission", "shortcut", "revision"],
    "stripe": ["payment", "customer", "invoice", "subscription", "refund"],
    "postgres": ["table", "query", "index", "view", "backup"],
    "docker": ["container", "image", "volume", "network", "compose_stack"],
    "kubernetes": ["pod", "deployment", "service", "secret", "namespace"],
    "aws": ["bucket", "instance", "lambda_function", "queue", "alarm"],
}
VERBS = ["create", "get", "list", "update", "delete"]
PHRASES = {
    "create": "Create a new {obj} in {svc}.",
    "get": "Fetch one {obj} from {svc} by its identifier.",
    "list": "List every {obj} in {svc}, newest first.",
    "update": "Change the fields of an existing {obj} in {svc}.",
    "delete": "Permanently delete a {obj} from {svc}.",
}
SPECIAL: dict[str, str] = {
    "diagnostics_report_failure": "Always fails: reports an error result for testing.",
    "diagnostics_raise_exception": "Always fails: raises inside the tool handler.",
    "diagnostics_sleep": "Sleep for the given number of seconds, then answer.",
}


def catalogue() -> list[types.Tool]:
    """Every tool, sorted by name (12 services x 5 objects x 5 verbs + 3 = 303 tools)."""
    tools: list[types.Tool] = []
    for svc, objects in SERVICES.items():
        for obj in objects:
            for verb in VERBS:
                name = f"{svc}_{verb}_{obj}"
                description = PHRASES[verb].format(obj=obj.replace("_", " "), svc=svc.title())
                schema: dict[str, Any] = {
                    "type": "object",
                    "properties": {
                        "id": {"type": "string", "description": f"The {obj} identifier"},
                        "fields": {"type": "object", "description": "Values to set"},
                    },
                }
                if verb in ("get", "update", "delete"):
                    schema["required"] = ["id"]
                meta: dict[str, Any] | None = None
                if name == "slack_create_message":
                    meta = {"anthropic/searchHint": "post a chat message to a channel"}
                if name == "github_list_issue":
                    meta = {"anthropic/alwaysLoad": True}
                tools.append(
                    types.Tool(name=name, description=description, input_schema=schema, _meta=meta)
                )
    for name, description in SPECIAL.items():
        schema = {"type": "object", "properties": {"seconds": {"type": "number"}}}
        tools.append(types.Tool(name=name, description=description, input_schema=schema))
    return sorted(tools, key=lambda tool: tool.name)


def build(page_size: int) -> Server[Any]:
    tools = catalogue()
    names = {tool.name for tool in tools}

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        start = int(params.cursor) if params is not None and params.cursor else 0
        end = start + page_size
        return types.ListToolsResult(
            tools=tools[start:end], next_cursor=str(end) if end < len(tools) else None
        )

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        args = params.arguments or {}
        if params.name not in names:
            return types.CallToolResult(
                content=[types.TextContent(text=f"unknown tool {params.name}")], is_error=True
            )
        if params.name == "diagnostics_report_failure":
            return types.CallToolResult(
                content=[types.TextContent(text="the backing service is down")], is_error=True
            )
        if params.name == "diagnostics_raise_exception":
            raise RuntimeError("handler exploded")
        if params.name == "diagnostics_sleep":
            await anyio.sleep(float(args.get("seconds", 0)))
        return types.CallToolResult(
            content=[types.TextContent(text=f"{params.name} ok: {sorted(args.items())}")],
            structured_content={"tool": params.name, "arguments": args},
        )

    return Server("many-tools", version="1.0", on_list_tools=list_tools, on_call_tool=call_tool)


if __name__ == "__main__":
    parser = arguments(__doc__ or "")
    parser.add_argument("--page-size", type=int, default=50)
    options = parser.parse_args()
    run(build(options.page_size), http=options.http)
