"""A large server change is indexed off the hub's event loop: searches keep answering from the
current index meanwhile, and the server counts as pending until its tools are searchable.

Over a real stdio server (303 tools); the backend is the keyword backend made to pause inside
its index build until the test has searched, so "the search did not wait" is an ordering fact,
not a timing guess.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import anyio
import anyio.to_thread
import pytest

pytest.importorskip("mcp_types")  # the MCP SDK v2 (toolsearch[mcp])

from mcp_servers import support  # tests/mcp_servers (pytest pythonpath)

import toolsearch.config
import toolsearch.mcp.hub
from toolsearch.backends.keyword import KeywordBackend
from toolsearch.mcp.config import parse_mcp_config
from toolsearch.mcp.hub import McpHub
from toolsearch.tool import Tool

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(90)]


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


class PausingBackend(KeywordBackend):
    """Keyword backend whose large builds wait (up to 20 s) for ``release``."""

    entered = threading.Event()
    release = threading.Event()
    finished = threading.Event()

    def _large(self, tools: Sequence[Tool]) -> None:
        if len(tools) >= 100:
            self.entered.set()
            self.release.wait(20)
            self.finished.set()

    def index(self, tools: Sequence[Tool]) -> None:
        self._large(tools)
        super().index(tools)

    def upsert(self, tools: Sequence[Tool]) -> None:
        self._large(tools)
        super().upsert(tools)


async def test_searches_do_not_wait_behind_a_large_reindex(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(toolsearch.mcp.hub, "OFF_LOOP_TOOLS", 100, raising=False)
    real_resolve = toolsearch.config.resolve_backend

    def resolve(name: str | None = None, **options: Any) -> Any:
        return PausingBackend() if name == "keyword" else real_resolve(name, **options)

    monkeypatch.setattr(toolsearch.config, "resolve_backend", resolve)
    local = [Tool("LocalNotes", "Write a local note to a file.", should_defer=True)]
    config = parse_mcp_config(support.config(many=support.stdio("many_tools")))
    async with McpHub(config, tools=local, backend="keyword", startup_timeout=20) as hub:
        entered = await anyio.to_thread.run_sync(PausingBackend.entered.wait, 30)
        assert entered, "the server's tools were never indexed"
        searched = hub.search("local note")
        during = (PausingBackend.finished.is_set(), searched.names, hub.pending_servers)
        missing = hub.unavailable_reason("mcp__many__github_create_issue")
        PausingBackend.release.set()
        assert during == (False, ["LocalNotes"], ("many",))
        assert "still being indexed" in missing
        assert await hub.wait_ready(timeout=30)
        assert hub.search("github create issue").names[0] == "mcp__many__github_create_issue"
        assert hub.search("local note").names[0] == "LocalNotes"
