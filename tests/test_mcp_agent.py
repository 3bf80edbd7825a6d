"""The reference agent loop against tools from real MCP servers.

A scripted model searches with ToolSearch, the loop's engine finds tools that came from the
test servers over stdio, and the loop runs them through the hub's tool runner — including a
server that is still connecting on the first turn, and a server error that must reach the
model as a tool error.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest

pytest.importorskip("mcp_types")  # the MCP SDK v2 (toolsearch[mcp])

from mcp_servers import support  # tests/mcp_servers (pytest pythonpath)

from toolsearch.agent.clients import ScriptedClient
from toolsearch.agent.loop import AgentLoop
from toolsearch.agent.messages import assistant_message, tool_use_block, user_message
from toolsearch.agent.mode import ModeSettings
from toolsearch.mcp.config import parse_mcp_config
from toolsearch.mcp.hub import BlockingMcpHub, McpHub
from toolsearch.tool import TOOL_SEARCH_NAME

pytestmark = pytest.mark.timeout(90)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def search(call_id: str, query: str, max_results: int = 5) -> dict[str, Any]:
    return tool_use_block(call_id, TOOL_SEARCH_NAME, {"query": query, "max_results": max_results})


def result_text(block: dict[str, Any]) -> str:
    content = block["content"]
    if isinstance(content, str):
        return content
    return "\n".join(str(b.get("text", b.get("tool_name", ""))) for b in content)


@pytest.mark.anyio
async def test_agent_loop_runs_tools_from_mcp_servers() -> None:
    servers = {
        "workspace": support.stdio("many_tools", "--page-size", "100"),
        "weather": support.stdio("slow_start", "--delay", "0.5"),
    }
    deny = ["mcp__workspace__stripe_create_refund"]
    async with McpHub(parse_mcp_config(support.config(**servers)), backend="keyword") as hub:
        script = ScriptedClient(
            [
                assistant_message([search("s1", "weather forecast")]),
                assistant_message([search("s2", "weather forecast", 1)]),
                assistant_message(
                    [tool_use_block("c1", "mcp__weather__forecast", {"city": "Oslo"})]
                ),
                assistant_message(
                    [
                        search("s3", "select:mcp__workspace__github_create_issue"),
                        tool_use_block("c2", "mcp__workspace__github_create_issue", {"id": "7"}),
                        tool_use_block("c3", "mcp__workspace__diagnostics_report_failure", {}),
                    ]
                ),
                assistant_message(
                    [
                        search("s4", "select:mcp__workspace__diagnostics_report_failure"),
                        tool_use_block("c4", "mcp__workspace__diagnostics_report_failure", {}),
                        search("s5", "select:mcp__workspace__stripe_create_refund"),
                        tool_use_block("c5", "mcp__workspace__stripe_create_refund", {}),
                    ]
                ),
            ],
            final_text="done",
        )
        loop = AgentLoop(
            script,
            hub.tools,
            runner=hub.tool_runner(),
            deny=deny,
            backend="keyword",
            settings=ModeSettings(),
            pending_servers=hub.pending_servers,
        )
        history = [user_message("What is the weather in Oslo? Then file an issue.")]

        # Turn 0: both servers are still connecting, and the model is told so.
        first = await loop.astep(history, 0)
        assert first.request.search_enabled
        (record,) = first.calls
        assert record.kind == "search" and record.search is not None
        assert record.search.pending_mcp_servers == ("workspace", "weather")
        assert "Some MCP servers are still connecting: workspace, weather." in result_text(
            record.result
        )

        # The servers connect; the loop's pool follows the hub between turns.
        with anyio.fail_after(30):
            assert await hub.wait_ready()
        loop.set_tools(hub.tools, pending_servers=hub.pending_servers)
        assert "mcp__workspace__stripe_create_refund" not in {t.name for t in loop.pool.tools}

        result = await loop.arun(history)
        assert result.stop_reason == "end_turn"
        turns = result.turns
        # ToolSearch over the MCP tools found the weather server's tool ...
        found = turns[0].calls[0]
        assert found.search is not None and found.search.names == ["mcp__weather__forecast"]
        assert turns[0].newly_discovered == ("mcp__weather__forecast",)
        # ... and the loop called it on its server through the hub.
        forecast = turns[1].calls[0]
        assert forecast.kind == "tool"
        assert result_text(forecast.result) == "forecast: sunny in Oslo"
        assert not forecast.result.get("is_error")
        # A tool loaded with select: in the same reply runs; one never loaded is refused by
        # the loop without reaching the server.
        _, issue, unloaded = turns[2].calls
        assert issue.kind == "tool"
        assert result_text(issue.result) == "github_create_issue ok: [('id', '7')]"
        assert unloaded.kind == "rejected" and unloaded.result["is_error"] is True
        assert "select:mcp__workspace__diagnostics_report_failure" in result_text(unloaded.result)
        # The server's error comes back to the model as a tool error, not an exception.
        _, failure, denied_search, denied = turns[3].calls
        assert failure.kind == "tool" and failure.result["is_error"] is True
        assert result_text(failure.result) == "the backing service is down"
        # A denied MCP tool is not found and not run.
        assert denied_search.search is not None and denied_search.search.names == []
        assert denied.kind == "rejected" and denied.result["is_error"] is True
        assert result.discovered >= {
            "mcp__weather__forecast",
            "mcp__workspace__github_create_issue",
            "mcp__workspace__diagnostics_report_failure",
        }
        # Of 300-odd MCP tools the last request sent only ToolSearch, the server's always-load
        # tool (``_meta`` hint) and the tools loaded so far.
        last = script.requests[-1]
        assert {sent.name for sent in last.tools} == {
            TOOL_SEARCH_NAME,
            "mcp__workspace__github_list_issue",
            *last.discovered,
        }
        assert len(loop.pool.tools) > 300


def test_synchronous_loop_with_the_blocking_hub() -> None:
    servers = parse_mcp_config(support.config(weather=support.stdio("slow_start", "--delay", "0")))
    with BlockingMcpHub(servers, backend="keyword") as hub:
        assert hub.wait_ready(timeout=30)
        script = ScriptedClient(
            [
                assistant_message([search("s1", "severe weather alerts", 1)]),
                assistant_message(
                    [tool_use_block("c1", "mcp__weather__weather_alerts", {"city": "Bergen"})]
                ),
            ],
            final_text="ok",
        )
        loop = AgentLoop(
            script,
            hub.tools,
            runner=hub.tool_runner(),
            backend="keyword",
            settings=ModeSettings(),
        )
        result = loop.run("Any storms in Bergen?")
        assert result.stop_reason == "end_turn"
        assert result.turns[0].calls[0].search is not None
        assert result.turns[0].calls[0].search.names == ["mcp__weather__weather_alerts"]
        assert result_text(result.turns[1].calls[0].result) == "weather_alerts: sunny in Bergen"
