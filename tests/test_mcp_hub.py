"""McpHub against real MCP servers over real stdio (and one over streamable HTTP).

The servers in ``tests/mcp_servers`` are started as subprocesses with this interpreter; nothing
here mocks the protocol. Every wait is bounded so a broken server cannot hang the suite.
"""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("mcp_types")  # the MCP SDK v2 (toolsearch[mcp])

from mcp_servers import support  # tests/mcp_servers (pytest pythonpath)

from toolsearch.backends.keyword import KeywordBackend
from toolsearch.mcp.config import parse_mcp_config
from toolsearch.mcp.hub import BlockingMcpHub, McpHub, ToolChange
from toolsearch.tool import Tool, is_deferred

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(90)]

MANY_TOOLS = 303


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


class SpyBackend(KeywordBackend):
    """The keyword backend, recording what the engine asks it to (re-)index.

    Only the engine's own calls count: the keyword backend implements ``upsert`` and
    ``remove`` by rebuilding internally, which is its business, not the engine's.
    """

    def __init__(self) -> None:
        super().__init__()
        self.full_builds = 0
        self.upserted: list[list[str]] = []
        self.removed: list[list[str]] = []
        self._inside = False

    def index(self, tools: Sequence[Tool]) -> None:
        if not self._inside:
            self.full_builds += 1
        super().index(tools)

    def upsert(self, tools: Sequence[Tool]) -> None:
        self.upserted.append([tool.name for tool in tools])
        self._inside = True
        try:
            super().upsert(tools)
        finally:
            self._inside = False

    def remove(self, names: Any) -> None:
        names = list(names)
        self.removed.append(names)
        self._inside = True
        try:
            super().remove(names)
        finally:
            self._inside = False


def hub_for(servers: dict[str, dict[str, Any]], **options: Any) -> McpHub:
    options.setdefault("backend", "keyword")
    options.setdefault("startup_timeout", 20)
    return McpHub(parse_mcp_config(support.config(**servers)), **options)


@pytest.fixture(scope="module")
async def hub() -> AsyncIterator[McpHub]:
    """One hub for the read-only checks: a paged server, a server that crashes at start, a
    command that does not exist and a server slow to start."""
    servers = {
        "many": support.stdio("many_tools", "--page-size", "7"),
        "crashy": support.stdio("crashing", "--when", "start"),
        "ghost": {"command": str(Path(sys.executable).parent / "no-such-mcp-server")},
        "slow": support.stdio("slow_start", "--delay", "60"),
    }
    async with hub_for(servers, deny=["mcp__many__github_delete_issue"]) as running:
        settled = await running.wait_until(
            lambda h: all(s.status != "connecting" for n, s in h.servers.items() if n != "slow"),
            timeout=30,
        )
        assert settled, running.servers
        assert await running.wait_indexed(timeout=30)
        yield running


async def test_all_pages_of_tools_list_are_read(hub: McpHub) -> None:
    many = hub.connection("many")
    assert many.status == "connected"
    assert many.listings == 1
    assert len(many.tools) == MANY_TOOLS
    assert len(hub.servers["many"].tools) == MANY_TOOLS
    names = {tool.name for tool in hub.tools}
    assert "mcp__many__aws_update_alarm" in names  # from the last pages
    assert "mcp__many__calendar_create_availability" in names


async def test_meta_hints_are_honoured(hub: McpHub) -> None:
    hinted = hub.tool("mcp__many__slack_create_message")
    assert hinted is not None and hinted.search_hint == "post a chat message to a channel"
    pinned = hub.tool("mcp__many__github_list_issue")
    assert pinned is not None and pinned.always_load and not is_deferred(pinned)
    deferred = {tool.name for tool in hub.engine.deferred}
    assert "mcp__many__github_list_issue" not in deferred
    assert "mcp__many__github_create_issue" in deferred
    assert len(deferred) == MANY_TOOLS - 2  # the pinned one and the denied one


async def test_search_finds_tools_across_the_pages(hub: McpHub) -> None:
    found = hub.search("stripe refund", max_results=3)
    assert found.names[0].startswith("mcp__many__stripe_") and "refund" in found.names[0]
    assert [tool.name for tool in found.tools] == found.names
    assert found.tools[0].input_schema["type"] == "object"
    hint = hub.search("chat message", max_results=1)
    assert hint.names == ["mcp__many__slack_create_message"]
    pinned = "mcp__many__github_list_issue"
    assert hub.search(f"select:{pinned}").names == [pinned]


async def test_denied_tools_are_invisible_and_uncallable(hub: McpHub) -> None:
    denied = "mcp__many__github_delete_issue"
    assert hub.tool(denied) is None
    assert denied not in {tool.name for tool in hub.engine.deferred}
    for query in (denied, f"select:{denied}", "github delete issue", "mcp__many__github_delete"):
        assert denied not in hub.search(query, max_results=100).names
    refused = await hub.call_tool(denied, {"id": "1"})
    assert refused.is_error
    assert "denied by a permission rule" in refused.text


async def test_calls_forward_to_the_server(hub: McpHub) -> None:
    result = await hub.call_tool("mcp__many__github_create_issue", {"id": "42"})
    assert not result.is_error
    assert result.text == "github_create_issue ok: [('id', '42')]"
    assert result.structured_content == {"tool": "github_create_issue", "arguments": {"id": "42"}}
    assert result.to_dict()["isError"] is False


async def test_server_errors_come_back_as_tool_errors(hub: McpHub) -> None:
    reported = await hub.call_tool("mcp__many__diagnostics_report_failure", {})
    assert reported.is_error and reported.text == "the backing service is down"
    raised = await hub.call_tool("mcp__many__diagnostics_raise_exception", {})
    assert raised.is_error
    assert "MCP server 'many' returned an error" in raised.text
    unknown = await hub.call_tool("mcp__many__no_such_tool", {})
    assert unknown.is_error and "no such tool 'mcp__many__no_such_tool'" in unknown.text
    bad = await hub.call_tool("mcp__many__github_get_issue", ["not", "an", "object"])  # type: ignore[arg-type]
    assert bad.is_error and "must be a JSON object" in bad.text
    # the connection survives all of that
    again = await hub.call_tool("mcp__many__github_get_issue", {"id": "1"})
    assert not again.is_error


async def test_call_timeout_is_a_tool_error(hub: McpHub) -> None:
    with anyio.fail_after(10):
        slow = await hub.call_tool("mcp__many__diagnostics_sleep", {"seconds": 30}, timeout=0.5)
    assert slow.is_error
    assert "did not answer 'diagnostics_sleep' within 0.5 s" in slow.text
    fine = await hub.call_tool("mcp__many__diagnostics_sleep", {"seconds": 0}, timeout=5)
    assert not fine.is_error


async def test_connecting_server_is_reported_as_pending(hub: McpHub) -> None:
    assert hub.pending_servers == ("slow",)
    missed = hub.search("weather forecast")
    assert missed.names == []
    assert missed.pending_servers == ("slow",)
    assert "Some MCP servers are still connecting: slow." in missed.text()
    assert missed.to_record()["pending_mcp_servers"] == ["slow"]
    early = await hub.call_tool("mcp__slow__forecast", {"city": "Oslo"})
    assert early.is_error and "'slow' is still connecting" in early.text


async def test_crashed_server_is_reported_as_failed_not_missing(hub: McpHub) -> None:
    crashy = hub.servers["crashy"]
    assert crashy.status == "failed"
    assert crashy.error is not None
    assert "closed the connection before it was ready" in crashy.error
    assert "cannot open the database /nonexistent/db.sqlite" in crashy.error  # its stderr
    missed = hub.search("select:mcp__crashy__query")
    assert "Some MCP servers are unavailable: crashy (" in missed.text()
    assert "crashy" in missed.to_record()["failed_mcp_servers"]
    call = await hub.call_tool("mcp__crashy__query", {})
    assert call.is_error
    assert "MCP server 'crashy' failed" in call.text and "no such tool" not in call.text


async def test_missing_command_fails_with_a_clear_error(hub: McpHub) -> None:
    ghost = hub.servers["ghost"]
    assert ghost.status == "failed"
    assert ghost.error is not None and "cannot start the server" in ghost.error
    assert "no-such-mcp-server" in ghost.error
    failed = [c for c in hub.changes if c.server == "ghost"]
    assert [c.reason for c in failed] == ["failed"]


async def test_startup_timeout_marks_the_server_failed() -> None:
    servers = {"slow": support.stdio("slow_start", "--delay", "60")}
    async with hub_for(servers, startup_timeout=1.5) as hub:
        assert hub.pending_servers == ("slow",)
        with anyio.fail_after(20):
            assert await hub.wait_ready()
        state = hub.servers["slow"]
        assert state.status == "failed"
        assert state.error is not None and "did not finish starting within 1.5 s" in state.error
        assert "still connecting" not in hub.search("forecast").text()
        assert "unavailable: slow" in hub.search("forecast").text()


async def test_slow_server_becomes_searchable_once_connected() -> None:
    servers = {"slow": support.stdio("slow_start", "--delay", "1")}
    async with hub_for(servers) as hub:
        assert "still connecting: slow" in hub.search("weather forecast").text()
        with anyio.fail_after(20):
            assert await hub.wait_ready()
        assert hub.search("weather forecast", max_results=1).names == ["mcp__slow__forecast"]
        result = await hub.call_tool("mcp__slow__forecast", {"city": "Oslo"})
        assert result.text == "forecast: sunny in Oslo"


async def test_disconnect_removes_and_announces_tools() -> None:
    changes: list[ToolChange] = []
    servers = {"crashcall": support.stdio("crashing", "--when", "call")}
    # reconnecting off: the server stays gone (tests/test_mcp_hub_reconnect.py has it back)
    async with hub_for(servers, on_change=changes.append, reconnect_delays=()) as hub:
        with anyio.fail_after(20):
            assert await hub.wait_ready()
        assert {t.name for t in hub.tools} == {"mcp__crashcall__crash", "mcp__crashcall__ping"}
        assert (await hub.call_tool("mcp__crashcall__ping")).text == "pong"
        crash = await hub.call_tool("mcp__crashcall__crash", {})
        assert crash.is_error and "disconnected during the call" in crash.text
        with anyio.fail_after(10):
            assert await hub.wait_until(lambda h: h.servers["crashcall"].status == "disconnected")
        assert hub.tools == []
        assert hub.search("ping").names == []
        gone = changes[-1]
        assert gone.reason == "disconnected"
        assert gone.removed == ("mcp__crashcall__crash", "mcp__crashcall__ping")
        assert gone.detail is not None and "fatal: crash requested" in gone.detail
        after = await hub.call_tool("mcp__crashcall__ping")
        assert after.is_error
        assert "was removed: MCP server 'crashcall' disconnected" in after.text


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_list_changed_reindexes_only_what_changed(mode: str) -> None:
    spy = SpyBackend()
    changes: list[ToolChange] = []
    servers = {"notes": support.stdio("changing")}
    async with hub_for(servers, backend=spy, mode=mode, on_change=changes.append) as hub:
        with anyio.fail_after(20):
            assert await hub.wait_ready()
        connection = hub.connection("notes")
        expected = "2026-07-28" if mode == "auto" else "2025-11-25"
        assert connection.protocol_version == expected
        assert len(hub.engine.deferred) == 6
        builds = spy.full_builds

        async def changed(predicate: Any) -> None:
            with anyio.fail_after(10):
                assert await hub.wait_until(predicate)
                assert await hub.wait_indexed()

        add = {"name": "notes_archive", "description": "Archive a note."}
        assert not (await hub.call_tool("mcp__notes__admin_add_tool", add)).is_error
        await changed(lambda h: h.tool("mcp__notes__notes_archive") is not None)
        assert spy.upserted[-1] == ["mcp__notes__notes_archive"]
        assert hub.search("archive", max_results=1).names == ["mcp__notes__notes_archive"]

        describe = {"name": "notes_search", "description": "Find notes by tag."}
        await hub.call_tool("mcp__notes__admin_describe_tool", describe)
        await changed(
            lambda h: "tag" in (h.tool("mcp__notes__notes_search") or Tool("x")).description
        )
        assert spy.upserted[-1] == ["mcp__notes__notes_search"]
        assert hub.search("tag", max_results=1).names == ["mcp__notes__notes_search"]

        await hub.call_tool("mcp__notes__admin_remove_tool", {"name": "notes_delete"})
        await changed(lambda h: h.tool("mcp__notes__notes_delete") is None)
        assert spy.removed[-1] == ["mcp__notes__notes_delete"]

        assert spy.full_builds == builds  # never rebuilt, only patched
        assert [c.reason for c in changes] == ["connected", *["list_changed"] * 3]
        assert changes[1].added == ("mcp__notes__notes_archive",)
        assert changes[2].changed == ("mcp__notes__notes_search",)
        assert changes[3].removed == ("mcp__notes__notes_delete",)
        assert connection.listings == 4
        removed = await hub.call_tool("mcp__notes__notes_delete", {"name": "x"})
        assert "was removed: MCP server 'notes' no longer lists it" in removed.text


async def test_legacy_handshake_and_server_level_always_load() -> None:
    servers = {"many": support.stdio("many_tools", "--page-size", "50", alwaysLoad=True)}
    async with hub_for(servers, mode="legacy") as hub:
        with anyio.fail_after(20):
            assert await hub.wait_ready()
        assert hub.connection("many").protocol_version == "2025-11-25"
        assert hub.connection("many").listings == 1
        assert len(hub.tools) == MANY_TOOLS
        assert all(tool.always_load and not is_deferred(tool) for tool in hub.tools)
        assert hub.engine.deferred == []
        assert hub.search("github issue").names == []  # nothing deferred to search
        exact = "mcp__many__github_create_issue"
        assert hub.search(exact).names == [exact]


@pytest.fixture
def http_server() -> Iterator[str]:
    """``many_tools`` serving streamable HTTP on 127.0.0.1 (a free port); yields its URL."""
    with support.http_server("many_tools") as url:
        yield url


def test_a_test_server_listens_before_it_prints_its_url() -> None:
    # the URL was printed before uvicorn listened: a hub connecting at once was refused
    with support.http_server("many_tools") as url:
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        socket.create_connection(("127.0.0.1", port), timeout=5).close()


async def test_streamable_http_server(http_server: str) -> None:
    servers = {"remote": {"url": http_server, "headers": {"X-Test": "1"}}}
    async with hub_for(servers) as hub:
        with anyio.fail_after(20):
            assert await hub.wait_ready()
        state = hub.servers["remote"]
        assert state.status == "connected", state.error
        assert state.transport == "http"
        assert len(state.tools) == MANY_TOOLS
        found = hub.search("docker volume delete", max_results=1)
        assert found.names == ["mcp__remote__docker_delete_volume"]
        result = await hub.call_tool(found.names[0], {"id": "v1"})
        assert result.text == "docker_delete_volume ok: [('id', 'v1')]"


def test_blocking_hub_for_synchronous_callers() -> None:
    servers = parse_mcp_config(support.config(slow=support.stdio("slow_start", "--delay", "0.5")))
    with BlockingMcpHub(servers, backend="keyword", startup_timeout=20) as hub:
        assert hub.pending_servers == ("slow",)
        assert hub.wait_ready(timeout=20)
        assert hub.search("weather alerts", max_results=1).names == ["mcp__slow__weather_alerts"]
        result = hub.call_tool("mcp__slow__current_conditions", {"city": "Rome"})
        assert result.text == "current_conditions: sunny in Rome"
        assert hub.servers["slow"].status == "connected"
        assert [c.reason for c in hub.changes] == ["connected"]


async def test_example_config_works(monkeypatch: pytest.MonkeyPatch) -> None:
    """The example config the README shows, loaded and used exactly as written (its paths are
    relative to the repository root; ``PYTHON`` picks this interpreter)."""
    from toolsearch.mcp.config import load_mcp_config

    monkeypatch.chdir(support.REPO)
    environ = {**os.environ, "PYTHON": sys.executable}
    config = load_mcp_config(support.EXAMPLE_CONFIG, environ=environ)
    async with McpHub(config, backend="keyword") as hub:
        assert hub.pending_servers == ("workspace", "notes", "weather")
        with anyio.fail_after(30):
            assert await hub.wait_ready()
        assert {name: state.status for name, state in hub.servers.items()} == {
            "workspace": "connected",
            "notes": "connected",
            "weather": "connected",
        }
        issue = hub.search("github create issue", max_results=1).names
        assert issue == ["mcp__workspace__github_create_issue"]
        assert hub.search("weather alerts", max_results=1).names == ["mcp__weather__weather_alerts"]
        notes = hub.tool("mcp__notes__notes_create")
        assert notes is not None and not is_deferred(notes)  # "alwaysLoad": true
        result = await hub.call_tool(issue[0], {"id": "1"})
        assert result.text == "github_create_issue ok: [('id', '1')]"
        assert (await hub.call_tool("mcp__notes__notes_create", {"name": "n"})).text == (
            "notes_create done"
        )
