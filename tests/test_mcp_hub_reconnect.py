"""A server that crashes after connecting is reconnected with growing pauses, and while it is
down every result says so — one call that crashes a server no longer removes it for everyone
until the gateway restarts. Real stdio servers (tests/mcp_servers/crashing.py)."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

pytest.importorskip("mcp_types")  # the MCP SDK v2 (toolsearch[mcp])

from mcp_servers import support  # tests/mcp_servers (pytest pythonpath)

from toolsearch.errors import ConfigError
from toolsearch.mcp.config import parse_mcp_config
from toolsearch.mcp.gateway import Gateway
from toolsearch.mcp.hub import McpHub

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]
PING = "mcp__crashy__ping"
CRASH = "mcp__crashy__crash"


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


def hub_for(**options: Any) -> McpHub:
    servers = {"crashy": support.stdio("crashing", "--when", "call")}
    return McpHub(parse_mcp_config(support.config(**servers)), backend="keyword", **options)


async def test_a_crashed_server_is_reconnected_and_its_tools_come_back() -> None:
    async with hub_for(reconnect_delays=(0.2, 0.5)) as hub:
        with anyio.fail_after(60):
            assert await hub.wait_ready()
        for attempt in range(2):  # crash it twice: each time it comes back
            crashed = await hub.call_tool(CRASH, {})
            assert crashed.is_error
            with anyio.fail_after(60):
                await hub.wait_until(lambda h, n=attempt: h.connection("crashy").reconnects > n)
                await hub.wait_until(lambda h: h.tool(PING) is not None and not h.pending_servers)
            answered = await hub.call_tool(PING, {})
            assert not answered.is_error and answered.as_text() == "pong"
        details = [c.detail or "" for c in hub.changes if c.reason == "disconnected"]
        assert any("reconnecting in 0.2 s, attempt 1" in d for d in details), details
        assert "fatal: crash requested" in details[0]  # the stderr tail is kept
        reasons = [c.reason for c in hub.changes]
        assert reasons.count("connected") == 3, reasons  # first connection, two reconnects


async def test_while_a_server_is_down_results_and_calls_say_so() -> None:
    async with hub_for(reconnect_delays=(60,)) as hub:
        with anyio.fail_after(60):
            assert await hub.wait_ready()
        gateway = Gateway(hub)
        await gateway.search({"query": "ping"})  # this client has seen the tools
        await hub.call_tool(CRASH, {})
        with anyio.fail_after(60):
            await hub.wait_until(
                lambda h: "reconnecting in" in (h.failed_servers.get("crashy") or "")
            )
        found = await gateway.search({"query": "answer pong"})
        assert found.structured_content is not None
        down = found.structured_content["failed_mcp_servers"]["crashy"]
        assert "reconnecting in 60 s, attempt 1" in down
        assert "reconnecting in 60 s" in found.content[0]["text"]
        refused = await hub.call_tool(PING, {})
        assert refused.is_error
        text = refused.as_text()
        assert "MCP server 'crashy' disconnected" in text and "reconnecting in 60 s" in text
        assert "was removed" not in text


async def test_reconnecting_can_be_turned_off_and_start_failures_are_not_retried() -> None:
    async with hub_for(reconnect_delays=()) as hub:
        with anyio.fail_after(60):
            assert await hub.wait_ready()
        await hub.call_tool(CRASH, {})
        with anyio.fail_after(60):
            await hub.wait_until(lambda h: h.servers["crashy"].status == "disconnected")
        await anyio.sleep(0.5)
        assert hub.servers["crashy"].status == "disconnected"
        assert hub.connection("crashy").reconnects == 0
    servers = {"broken": support.stdio("crashing", "--when", "start")}
    config = parse_mcp_config(support.config(**servers))
    async with McpHub(config, backend="keyword", reconnect_delays=(0.1,)) as hub:
        with anyio.fail_after(60):
            assert await hub.wait_ready()
        await anyio.sleep(0.5)
        assert hub.servers["broken"].status == "failed"
        assert "reconnecting" not in (hub.servers["broken"].error or "")


def test_bad_reconnect_delays_are_refused() -> None:
    with pytest.raises(ConfigError, match="reconnect_delays"):
        hub_for(reconnect_delays=(-1,))
