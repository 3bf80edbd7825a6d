"""The hub and gateway under churn, slow or failing backends and many removals
(docs/concurrency.md).

Real stdio MCP servers (tests/mcp_servers); the backends are the keyword backend, some made to
block or fail on demand, so "the call did not wait" and "the server survived" are ordering
facts, not timing guesses.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Sequence
from typing import Any

import anyio
import anyio.to_thread
import pytest

pytest.importorskip("mcp_types")  # the MCP SDK v2 (toolsearch[mcp])

from mcp_servers import support  # tests/mcp_servers (pytest pythonpath)

import toolsearch.mcp.client
import toolsearch.mcp.hub
from toolsearch.backends.keyword import KeywordBackend
from toolsearch.errors import BackendError
from toolsearch.mcp.config import parse_mcp_config
from toolsearch.mcp.gateway import MAX_REMOVED_NOTICES, Gateway
from toolsearch.mcp.hub import SEARCH_NICE, McpHub
from toolsearch.query import ParsedQuery
from toolsearch.tool import Tool

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


def hub_for(servers: dict[str, dict[str, Any]], **options: Any) -> McpHub:
    options.setdefault("backend", "keyword")
    options.setdefault("startup_timeout", 30)
    return McpHub(parse_mcp_config(support.config(**servers)), **options)


def churning(*args: str) -> dict[str, Any]:
    return support.stdio("churning", *args)


class Switchable(KeywordBackend):
    """Keyword backend whose writes fail, or whose searches or writes block, on demand."""

    def __init__(self) -> None:
        super().__init__()
        self.broken = False
        self.search_gate: threading.Event | None = None
        self.write_gate: threading.Event | None = None
        self.blocked = threading.Event()
        #: Blocked searches and writes that have returned.
        self.finished = 0

    def _write(self) -> None:
        if self.broken:
            raise BackendError("postgres: update failed on db:5432: server closed the connection")
        if self.write_gate is not None:
            self.blocked.set()
            self.write_gate.wait(10)
            self.finished += 1

    def index(self, tools: Sequence[Tool]) -> None:
        self._write()
        super().index(tools)

    def upsert(self, tools: Sequence[Tool]) -> None:
        self._write()
        super().upsert(tools)

    def search(self, query: ParsedQuery, k: int) -> list[Any]:
        if self.broken:
            raise BackendError("postgres: search failed on db:5432: connection refused")
        if self.search_gate is not None:
            self.blocked.set()
            self.search_gate.wait(10)
            self.finished += 1
        return super().search(query, k)


async def test_a_churning_server_never_makes_the_others_pending(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # 500 re-described tools every 50 ms beside 2,500 static ones, listed as fast as they
    # come: several listings of the same 500 tools arrive during each index update
    monkeypatch.setattr(toolsearch.mcp.client, "RELIST_INTERVAL", 0.0)
    servers = {
        "static": churning("--tools", "2500", "--interval", "0", "--prefix", "fixed"),
        "churn": churning("--tools", "500", "--interval", "0.05"),
    }
    async with hub_for(servers) as hub:
        assert await hub.wait_ready(timeout=60), hub.pending_servers
        assert hub.connection("churn").listings > 1 or await hub.wait_until(
            lambda h: h.connection("churn").listings > 3, timeout=20
        )
        engine = hub.engine
        wanted = "mcp__static__fixed_tool_7"
        for _ in range(20):
            assert "static" not in hub.pending_servers
            assert hub.search(f"select:{wanted}").names == [wanted]
            assert (await hub.call_tool(wanted)).text == "fixed_tool_7 done"
            await anyio.sleep(0.1)
        listings = hub.connection("churn").listings
        assert await hub.wait_until(lambda h: h.connection("churn").listings > listings + 5, 20)
        assert "churn" not in hub.pending_servers  # its own changes do not make it pending
        # updated in place, in proportion to the 500 tools that change, never rebuilt whole
        assert hub.engine is engine


async def test_a_backend_outage_keeps_the_server_and_catches_up() -> None:
    backend = Switchable()
    async with hub_for({"notes": support.stdio("changing")}, backend=backend) as hub:
        assert await hub.wait_ready(timeout=30)
        backend.broken = True
        add = {"name": "notes_archive", "description": "Archive a note."}
        assert not (await hub.call_tool("mcp__notes__admin_add_tool", add)).is_error
        assert await hub.wait_until(lambda h: h.index_error is not None, timeout=30)
        assert hub.servers["notes"].status == "connected"
        assert "update failed" in (hub.index_error or "")
        backend.broken = False
        assert await hub.wait_until(lambda h: h.index_error is None, timeout=30)
        assert await hub.wait_indexed(timeout=30)
        assert hub.servers["notes"].status == "connected"
        assert hub.search("archive note", 1).names == ["mcp__notes__notes_archive"]
        assert (await hub.call_tool("mcp__notes__notes_create")).text == "notes_create done"


async def test_a_failing_search_is_a_readable_error_result() -> None:
    backend = Switchable()
    async with hub_for({"notes": support.stdio("changing")}, backend=backend) as hub:
        assert await hub.wait_ready(timeout=30)
        gateway = Gateway(hub)
        backend.broken = True
        result = await gateway.handle("search_tools", {"query": "archive a note"})
        assert result.is_error
        assert result.text.startswith("search_tools: the search index is unavailable: ")
        assert "connection refused" in result.text and "retrying" in result.text
        backend.broken = False
        result = await gateway.handle("search_tools", {"query": "create a note"})
        assert not result.is_error


async def test_calls_do_not_wait_behind_a_search() -> None:
    backend = Switchable()
    async with hub_for({"notes": support.stdio("changing")}, backend=backend) as hub:
        assert await hub.wait_ready(timeout=30)
        gateway = Gateway(hub)
        backend.search_gate = gate = threading.Event()
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(gateway.handle, "search_tools", {"query": "note"})
            assert await anyio.to_thread.run_sync(backend.blocked.wait, 10)
            called = await gateway.handle("call_tool", {"name": "mcp__notes__notes_create"})
            still_searching = backend.finished == 0
            gate.set()
        assert called.text == "notes_create done"
        assert still_searching


async def test_searches_run_at_a_lower_cpu_priority_than_the_event_loop() -> None:
    seen: list[int] = []

    class Recording(KeywordBackend):
        def search(self, query: ParsedQuery, k: int) -> list[Any]:
            seen.append(os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))
            return super().search(query, k)

    async with hub_for({"notes": support.stdio("changing")}, backend=Recording()) as hub:
        assert await hub.wait_ready(timeout=30)
        loop_nice = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
        found = await hub.asearch("create a note")
        assert found.names[0] == "mcp__notes__notes_create"
        assert seen and all(nice == min(19, loop_nice + SEARCH_NICE) for nice in seen)
        assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == loop_nice


async def test_index_updates_never_run_at_the_searches_lower_priority() -> None:
    """An unprivileged thread cannot raise its priority back. Searches once lowered threads of
    anyio's shared pool, which then applied index updates at that priority while holding the
    engine's write lock, so every search waited on a thread the kernel ran last."""
    writers: list[int] = []

    class Recording(KeywordBackend):
        def index(self, tools: Sequence[Tool]) -> None:
            writers.append(os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))
            super().index(tools)

        def upsert(self, tools: Sequence[Tool]) -> None:
            writers.append(os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))
            super().upsert(tools)

    async with hub_for({"notes": support.stdio("changing")}, backend=Recording()) as hub:
        assert await hub.wait_ready(timeout=30)
        loop_nice = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
        async with anyio.create_task_group() as tasks:
            for _ in range(8):
                tasks.start_soon(hub.asearch, "create a note")
        writers.clear()
        add = {"name": "notes_archive", "description": "Archive a note."}
        assert not (await hub.call_tool("mcp__notes__admin_add_tool", add)).is_error
        assert await hub.wait_until(lambda h: h.tool("mcp__notes__notes_archive") is not None, 10)
        assert await hub.wait_indexed(timeout=30)
        assert writers and all(nice == loop_nice for nice in writers), (writers, loop_nice)


async def test_calls_do_not_wait_behind_an_index_update() -> None:
    backend = Switchable()
    async with hub_for({"notes": support.stdio("changing")}, backend=backend) as hub:
        assert await hub.wait_ready(timeout=30)
        backend.write_gate = gate = threading.Event()
        add = {"name": "notes_archive", "description": "Archive a note."}
        assert not (await hub.call_tool("mcp__notes__admin_add_tool", add)).is_error
        assert await anyio.to_thread.run_sync(backend.blocked.wait, 10)
        called = await hub.call_tool("mcp__notes__notes_create")
        still_writing = backend.finished == 0
        gate.set()
        assert called.text == "notes_create done"
        assert still_writing
        assert await hub.wait_indexed(timeout=30)
        assert "notes" not in hub.pending_servers


async def test_removal_notices_are_bounded_and_kept_per_session(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(toolsearch.mcp.hub, "MAX_CHANGES", 5)
    servers = {"names": churning("--tools", "200", "--interval", "0.02", "--mode", "rename")}
    async with hub_for(servers) as hub:
        assert await hub.wait_ready(timeout=30)
        gateway = Gateway(hub)
        first = await gateway.search({"query": "widget"}, session="a")
        await gateway.search({"query": "widget"}, session="b")
        assert first.structured_content is not None and first.structured_content["tools"]
        assert await hub.wait_until(lambda h: h.change_count > 8, timeout=60)
        assert len(hub.changes) == 5
        for session in ("a", "b"):  # each session hears of the removals once
            result = await gateway.search({"query": "widget"}, session=session)
            record = result.structured_content
            assert record is not None
            assert len(record["removed_tools"]) == MAX_REMOVED_NOTICES
            assert record["removed_tools_not_shown"] > 0 and record["changes_missed"] > 0
            assert len(json.dumps(record)) < 200_000
            assert "more tools were removed" in result.text


async def test_a_result_that_matched_still_names_pending_and_failed_servers() -> None:
    servers = {
        "notes": support.stdio("changing"),
        "crashy": support.stdio("crashing", "--when", "start"),
        "slow": support.stdio("slow_start", "--delay", "60"),
    }
    async with hub_for(servers) as hub:
        assert await hub.wait_until(
            lambda h: "notes" not in h.pending_servers and "crashy" in h.failed_servers, 30
        )
        result = await Gateway(hub).search({"query": "create a note"})
        payload = json.loads(result.text)
        assert payload["tools"][0]["name"] == "mcp__notes__notes_create"
        assert payload["pending_mcp_servers"] == ["slow"]
        assert set(payload["failed_mcp_servers"]) == {"crashy"}
