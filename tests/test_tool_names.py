"""Model APIs accept tool names of at most 64 characters; a longer one sent as a tool or a
``tool_reference`` fails that request and every later one of the conversation. MCP tools are
listed under a shortened name (and called by their own); any other long name is refused at
load, with a message naming it."""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
import pytest

from toolsearch.agent.pool import resolve_tools
from toolsearch.catalog import tools_from_mcp_result
from toolsearch.errors import ConfigError
from toolsearch.permissions import filter_denied
from toolsearch.tool import MAX_TOOL_NAME, Tool, mcp_tool_name, shorten_tool_name

LONG_TOOL = "export_the_quarterly_financial_report_to_the_shared_drive_as_pdf_and_notify"
SERVERS = Path(__file__).parent / "mcp_servers"


def test_a_name_over_64_characters_is_shortened_stably_and_distinctly() -> None:
    assert shorten_tool_name("mcp__gh__create_issue") == "mcp__gh__create_issue"
    name = mcp_tool_name("reports", LONG_TOOL)
    assert len(name) == MAX_TOOL_NAME and name.startswith("mcp__reports__export_the_quarterly")
    assert name == mcp_tool_name("reports", LONG_TOOL)  # the same every listing
    assert name != mcp_tool_name("reports", LONG_TOOL + "s")
    assert shorten_tool_name("x" * 64) == "x" * 64


def test_an_mcp_listing_keeps_the_servers_name_and_deny_rules_still_match() -> None:
    (tool,) = tools_from_mcp_result({"tools": [{"name": LONG_TOOL}]}, "reports")
    assert len(tool.name) == MAX_TOOL_NAME and tool.metadata["mcp_name"] == LONG_TOOL
    # the rule as a user writes it, in full and in another case, still denies the tool
    for rule in (f"mcp__reports__{LONG_TOOL}", f"mcp__Reports__{LONG_TOOL.upper()}"):
        assert filter_denied([tool], [rule]) == [], rule
    assert filter_denied([tool], [f"mcp__reports__{LONG_TOOL}_else"]) == [tool]


def test_an_agent_refuses_a_long_name_at_load() -> None:
    tools = [Tool("a" * 65, "too long", should_defer=True), Tool("Read", "reads")]
    with pytest.raises(ConfigError, match=r"at most 64 characters.*'a{65}' is longer"):
        resolve_tools(tools)
    assert resolve_tools([Tool("b" * 64, "fits", should_defer=True)]).names


@pytest.mark.timeout(120)
def test_a_hub_lists_a_long_mcp_name_shortened_and_calls_it_by_the_servers_name() -> None:
    from toolsearch.mcp.config import parse_mcp_config
    from toolsearch.mcp.hub import McpHub

    prefix = "quarterly_financial_report_exporter_for_the_shared_drive"
    args = [str(SERVERS / "churning.py"), "--tools", "2", "--interval", "0", "--prefix", prefix]
    config = parse_mcp_config({"mcpServers": {"r": {"command": sys.executable, "args": args}}})

    async def run() -> None:
        async with McpHub(config, backend="keyword") as hub:
            with anyio.fail_after(60):
                assert await hub.wait_ready()
            names = list(hub.servers["r"].tools)
            assert len(names) == 2 and all(len(name) == MAX_TOOL_NAME for name in names)
            assert hub.search("quarterly financial exporter").names[0] in names
            result = await hub.call_tool(names[0], {"text": "x"})
            assert not result.is_error and result.as_text() == f"{prefix}_tool_0 done"

    anyio.run(run)
