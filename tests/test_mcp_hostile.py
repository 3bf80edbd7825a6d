"""Hostile and broken MCP servers over real stdio: each is contained to itself, within bounded
time and memory, and reported with its cause.

The hub's startup timeout is set far above the waits here, so a server only passes by being
detected, not by timing out.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest

pytest.importorskip("mcp_types")  # the MCP SDK v2 (toolsearch[mcp])

from mcp_servers import support  # tests/mcp_servers (pytest pythonpath)

from toolsearch.mcp.config import parse_mcp_config
from toolsearch.mcp.hub import McpHub
from toolsearch.mcp.stdio import LineSplitter, Oversized

SLOW_TIMEOUT = 120.0  # never reached: every wait below is much shorter


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def hub(**servers: dict[str, Any]) -> McpHub:
    return _hub(servers)


def _hub(servers: dict[str, dict[str, Any]], **options: Any) -> McpHub:
    config = parse_mcp_config(support.config(**servers))
    return McpHub(config, backend="keyword", startup_timeout=SLOW_TIMEOUT, **options)


async def settled(h: McpHub, seconds: float = 20) -> None:
    with anyio.fail_after(seconds):
        assert await h.wait_ready()


@pytest.mark.anyio
@pytest.mark.timeout(60)
async def test_invalid_utf8_before_start_fails_the_server_at_once() -> None:
    async with hub(bad=support.stdio("hostile", "--utf8-garbage", "start")) as h:
        await settled(h)
        state = h.servers["bad"]
        assert state.status == "failed"
        assert "invalid UTF-8 on stdout (byte 0xff at offset 0)" in (state.error or "")


@pytest.mark.anyio
@pytest.mark.timeout(60)
async def test_invalid_utf8_while_connected_ends_the_call_and_the_server() -> None:
    async with hub(bad=support.stdio("hostile", "--utf8-garbage", "call")) as h:
        await settled(h)
        with anyio.fail_after(20):
            result = await h.call_tool("mcp__bad__garbage")
        assert result.is_error and "disconnected during the call" in result.text
        with anyio.fail_after(20):
            assert await h.wait_until(lambda x: x.servers["bad"].status == "disconnected")
        assert "invalid UTF-8" in (h.servers["bad"].error or "")


@pytest.mark.anyio
@pytest.mark.timeout(90)
async def test_an_oversized_result_is_a_tool_error_and_other_servers_carry_on() -> None:
    servers = {"big": support.stdio("hostile"), "ok": support.stdio("crashing", "--when", "call")}
    async with _hub(servers, max_message_bytes=1024 * 1024) as h:
        await settled(h)
        answers: dict[str, Any] = {}

        async def huge() -> None:
            answers["huge"] = await h.call_tool("mcp__big__huge", {"megabytes": 24})

        async def others() -> None:
            answers["ping"] = await h.call_tool("mcp__ok__ping")
            answers["search"] = h.search("ping").names

        with anyio.fail_after(60):
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(huge)
                tasks.start_soon(others)
        assert answers["huge"].is_error
        assert "is too large: the response is 25,16" in answers["huge"].text
        assert "over the limit of 1,048,576 bytes" in answers["huge"].text
        assert answers["ping"].text == "pong" and "mcp__ok__ping" in answers["search"]
        assert h.servers["big"].status == "connected"  # the server itself is fine
        assert (await h.call_tool("mcp__big__ping")).text == "pong"


@pytest.mark.anyio
@pytest.mark.timeout(60)
async def test_a_server_over_the_tool_cap_fails_with_the_limit_named() -> None:
    async with _hub({"many": support.stdio("hostile", "--tools", "40")}, max_tools=25) as h:
        await settled(h)
        assert h.servers["many"].status == "failed"
        assert "lists more than 25 tools, the limit per server" in (h.servers["many"].error or "")


@pytest.mark.anyio
@pytest.mark.timeout(60)
async def test_a_deeply_nested_schema_is_reported_as_such() -> None:
    async with hub(deep=support.stdio("hostile", "--schema-depth", "120")) as h:
        await settled(h)
        assert h.servers["deep"].status == "failed"
        assert "nested too deeply" in (h.servers["deep"].error or "")


@pytest.mark.anyio
@pytest.mark.timeout(60)
async def test_no_call_hears_connected_after_a_crash() -> None:
    async with hub(bad=support.stdio("crashing", "--when", "call")) as h:
        await settled(h)
        await h.call_tool("mcp__bad__crash")
        heard: list[str] = []
        with anyio.fail_after(20):
            while h.servers["bad"].status == "connected":
                heard.append((await h.call_tool("mcp__bad__ping")).text)
                await anyio.sleep(0)
            heard.append((await h.call_tool("mcp__bad__ping")).text)
        assert not [text for text in heard if "is connected" in text], heard


def test_line_splitter_keeps_only_the_ends_of_an_oversized_line() -> None:
    splitter = LineSplitter(limit=10)
    assert splitter.feed(b'{"a":1}\n{"id": 7, "x"') == [b'{"a":1}']
    lines = splitter.feed(b': "' + b"y" * 100_000 + b'"}\nnext')
    assert len(lines) == 1 and isinstance(lines[0], Oversized)
    assert lines[0].size == 100_018 and lines[0].request_id() == 7
    assert len(lines[0].head) + len(lines[0].tail) <= 8192
    assert splitter.feed(b"\n") == [b"next"]
    tail_id = Oversized(10**6, b'{"result": "xxx', b'xxx"}, "jsonrpc": "2.0", "id": "r-1"}')
    assert tail_id.request_id() == "r-1"
