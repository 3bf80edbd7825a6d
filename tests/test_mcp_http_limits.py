"""A streamable HTTP MCP server's responses are capped like a stdio server's messages: an
oversized result is a clear tool error, the server stays connected, and results under the cap
pass whole. Over real HTTP, both as SSE streams and as plain JSON bodies."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anyio
import pytest

pytest.importorskip("mcp_types")  # the MCP SDK v2 (toolsearch[mcp])

from mcp_servers import support  # tests/mcp_servers (pytest pythonpath)

from toolsearch.mcp.config import parse_mcp_config
from toolsearch.mcp.http_limits import too_large_detail
from toolsearch.mcp.hub import McpHub

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(90)]
MIB = 1024 * 1024


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(params=["sse", "json"])
def hostile(request: pytest.FixtureRequest) -> Iterator[tuple[str, str]]:
    """``hostile`` serving streamable HTTP on 127.0.0.1; yields its URL and the client mode
    that makes it answer with SSE streams (legacy sessions) or with JSON bodies."""
    flags, mode = ((), "legacy") if request.param == "sse" else (("--json-response",), "auto")
    with support.http_server("hostile", *flags) as url:
        yield url, mode


def _hub(hostile: tuple[str, str], **options: Any) -> McpHub:
    url, mode = hostile
    config = parse_mcp_config(support.config(big={"url": url}))
    return McpHub(config, backend="keyword", startup_timeout=30, mode=mode, **options)


async def test_an_oversized_http_result_is_a_tool_error(hostile: tuple[str, str]) -> None:
    async with _hub(hostile, max_message_bytes=MIB) as hub:
        with anyio.fail_after(30):
            assert await hub.wait_ready()
        assert hub.servers["big"].status == "connected", hub.servers["big"].error
        with anyio.fail_after(30):
            huge = await hub.call_tool("mcp__big__huge", {"megabytes": 3})
        assert huge.is_error
        assert "the result of 'huge' from MCP server 'big' is too large" in huge.text
        assert "over the limit of 1,048,576 bytes" in huge.text
        assert "--max-message-bytes" in huge.text
        assert (await hub.call_tool("mcp__big__ping")).text == "pong"
        assert hub.servers["big"].status == "connected"


async def test_results_under_the_cap_pass_whole(hostile: tuple[str, str]) -> None:
    # 2 MiB: over the SDK's own 1 MiB SSE event default, under the hub's 16 MiB cap
    async with _hub(hostile) as hub:
        with anyio.fail_after(30):
            assert await hub.wait_ready()
            result = await hub.call_tool("mcp__big__huge", {"megabytes": 2})
        assert not result.is_error, result.text
        assert result.content[0]["text"] == "x" * 2 * MIB


def test_too_large_detail_reads_both_sdk_messages() -> None:
    sse = "SSE stream failed: Server-sent event exceeded the 1048576 byte limit."
    assert too_large_detail(sse) == "the response is over the limit of 1,048,576 bytes"
    json_body = "Failed to parse JSON response: the response is over the limit of 9 bytes"
    assert too_large_detail(json_body) == "the response is over the limit of 9 bytes"
    assert too_large_detail("Server returned an error response") is None
