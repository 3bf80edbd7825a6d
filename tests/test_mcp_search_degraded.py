"""A gateway whose hybrid cannot load its embedding model (a model path that does not exist)
still answers from its lexical members — and says so in every result, not only in one log
line at start-up."""

from __future__ import annotations

import json

import anyio
import pytest

pytest.importorskip("mcp_types")  # the MCP SDK v2 (toolsearch[mcp])
pytest.importorskip("numpy")

from toolsearch.mcp.gateway import Gateway
from toolsearch.mcp.hub import McpHub
from toolsearch.tool import Tool

MISSING = "/nonexistent/toolsearch-test-model"


@pytest.mark.timeout(120)
def test_a_missing_model_is_named_in_every_search_result() -> None:
    tools = [Tool("LocalEcho", "echo things back", should_defer=True)]
    options = {"member_options": {"embedding": {"model": MISSING}}}

    async def run() -> None:
        hub = McpHub([], tools=tools, backend="hybrid", backend_options=options)
        async with hub:
            with anyio.fail_after(60):
                while "embedding" not in hub.degraded_members():
                    await anyio.sleep(0.05)
            gateway = Gateway(hub)
            found = await gateway.search({"query": "echo things"})
            assert found.structured_content is not None
            degraded = found.structured_content["search_degraded"]
            assert list(degraded) == ["embedding"] and MISSING in degraded["embedding"]
            payload = json.loads(found.content[0]["text"])
            assert [t["name"] for t in payload["tools"]] == ["LocalEcho"]  # lexical answers
            assert MISSING in payload["search_degraded"]
            nothing = await gateway.search({"query": "zebra quantum"})
            assert "Search is degraded, ranking without: embedding" in nothing.content[0]["text"]

    anyio.run(run)


@pytest.mark.timeout(60)
def test_a_healthy_backend_reports_nothing() -> None:
    async def run() -> None:
        hub = McpHub([], tools=[Tool("LocalEcho", "echo", should_defer=True)], backend="bm25")
        async with hub:
            found = await Gateway(hub).search({"query": "echo"})
            assert found.structured_content is not None
            assert "search_degraded" not in found.structured_content
            assert hub.degraded_members() == {}

    anyio.run(run)
