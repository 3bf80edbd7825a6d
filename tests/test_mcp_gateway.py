"""``toolsearch serve`` end to end: an MCP client session talks to the gateway process, which
talks to the real test servers. Plus the gateway's argument handling in process."""

from __future__ import annotations

import json
import signal
import subprocess
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("mcp_types")  # the MCP SDK v2 (toolsearch[mcp])

from mcp_servers import support  # tests/mcp_servers (pytest pythonpath)

from toolsearch.cli import main
from toolsearch.errors import ConfigError
from toolsearch.mcp.gateway import CALL_TOOL_NAME, SEARCH_TOOL_NAME, Gateway, listening_socket
from toolsearch.mcp.hub import McpHub
from toolsearch.tool import Tool

DENIED = "mcp__many__github_delete_issue"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def write_config(tmp_path: Path, **servers: dict[str, Any]) -> Path:
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps(support.config(**servers)), encoding="utf-8")
    return path


async def until(check: Callable[[], Awaitable[bool]], seconds: float = 20) -> None:
    with anyio.fail_after(seconds):
        while not await check():
            await anyio.sleep(0.1)


def text_of(result: Any) -> str:
    return "\n".join(block.text for block in result.content if block.type == "text")


@pytest.mark.anyio
@pytest.mark.timeout(60)
async def test_gateway_session_in_process() -> None:
    """The gateway's MCP server driven by an SDK client session in memory, in front of real
    stdio servers: the fast version of the end-to-end test below."""
    from mcp import Client

    from toolsearch.mcp.config import parse_mcp_config

    servers = {
        "many": support.stdio("many_tools", "--page-size", "100"),
        "slow": support.stdio("slow_start", "--delay", "120"),
        "crashy": support.stdio("crashing", "--when", "start"),
    }
    config = parse_mcp_config(support.config(**servers))
    async with McpHub(config, backend="keyword", deny=[DENIED]) as hub:
        with anyio.fail_after(20):
            assert await hub.wait_until(
                lambda h: (
                    h.servers["many"].status == "connected"
                    and h.servers["crashy"].status == "failed"
                )
            )
        async with Client(Gateway(hub).server()) as client:
            listed = await client.list_tools()
            assert [tool.name for tool in listed.tools] == [SEARCH_TOOL_NAME, CALL_TOOL_NAME]
            found = await client.call_tool(SEARCH_TOOL_NAME, {"query": "jira epic delete"})
            first = json.loads(text_of(found))["tools"][0]
            assert first["name"] == "mcp__many__jira_delete_epic"
            assert first["input_schema"]["required"] == ["id"]
            called = await client.call_tool(
                CALL_TOOL_NAME, {"name": first["name"], "arguments": {"id": "E-1"}}
            )
            assert not called.is_error and text_of(called) == "jira_delete_epic ok: [('id', 'E-1')]"
            names = await client.call_tool(SEARCH_TOOL_NAME, {"query": DENIED})
            assert DENIED not in text_of(names)
            refused = await client.call_tool(CALL_TOOL_NAME, {"name": DENIED})
            assert refused.is_error and "denied" in text_of(refused)
            missed = text_of(await client.call_tool(SEARCH_TOOL_NAME, {"query": "forecast"}))
            assert "Some MCP servers are still connecting: slow." in missed
            assert "Some MCP servers are unavailable: crashy (" in missed
            crashed = await client.call_tool(CALL_TOOL_NAME, {"name": "mcp__crashy__x"})
            assert crashed.is_error and "MCP server 'crashy' failed" in text_of(crashed)


@pytest.mark.anyio
@pytest.mark.slow
@pytest.mark.timeout(120)
async def test_serve_end_to_end_over_stdio(tmp_path: Path) -> None:
    from mcp import Client, StdioServerParameters

    path = write_config(
        tmp_path,
        many=support.stdio("many_tools", "--page-size", "100"),
        slow=support.stdio("slow_start", "--delay", "120"),
        crashy=support.stdio("crashing", "--when", "start"),
        flaky=support.stdio("crashing", "--when", "call"),
    )
    command, args = support.gateway_command(path, "--backend", "keyword", "--deny", DENIED)
    async with Client(StdioServerParameters(command=command, args=args)) as client:
        listed = await client.list_tools()
        assert [tool.name for tool in listed.tools] == [SEARCH_TOOL_NAME, CALL_TOOL_NAME]

        async def search(query: str, max_results: int = 5) -> Any:
            arguments = {"query": query, "max_results": max_results}
            return await client.call_tool(SEARCH_TOOL_NAME, arguments)

        async def ready() -> bool:
            record = (await search("github issue")).structured_content
            pending = record["pending_mcp_servers"]
            return pending == ["slow"] and "crashy" in record["failed_mcp_servers"]

        await until(ready)

        # search: matching tools come back with their schemas
        found = await search("github create issue", 3)
        assert not found.is_error
        tools = json.loads(text_of(found))["tools"]
        assert tools[0]["name"] == "mcp__many__github_create_issue"
        assert tools[0]["input_schema"]["properties"]["id"]["type"] == "string"
        assert tools[0]["server"] == "many"
        assert found.structured_content["tools"] == tools

        # call: forwarded to the server, its result returned unchanged
        called = await client.call_tool(
            CALL_TOOL_NAME, {"name": "mcp__many__github_create_issue", "arguments": {"id": "9"}}
        )
        assert not called.is_error
        assert text_of(called) == "github_create_issue ok: [('id', '9')]"
        assert called.structured_content == {
            "tool": "github_create_issue",
            "arguments": {"id": "9"},
        }
        failing = await client.call_tool(
            CALL_TOOL_NAME, {"name": "mcp__many__diagnostics_report_failure"}
        )
        assert failing.is_error and text_of(failing) == "the backing service is down"

        # a denied tool: never found, refused when called by name
        for query in ("github delete issue", f"select:{DENIED}", DENIED):
            names = [t["name"] for t in (await search(query, 50)).structured_content["tools"]]
            assert DENIED not in names
        refused = await client.call_tool(CALL_TOOL_NAME, {"name": DENIED, "arguments": {"id": "1"}})
        assert refused.is_error and "denied by a permission rule" in text_of(refused)

        # a pending server is reported in no-match results
        pending = await search("weather forecast")
        assert pending.structured_content["tools"] == []
        assert "Some MCP servers are still connecting: slow." in text_of(pending)
        early = await client.call_tool(CALL_TOOL_NAME, {"name": "mcp__slow__forecast"})
        assert early.is_error and "still connecting" in text_of(early)

        # a crashed server is reported as failed with its error, not as "no such tool"
        crashed = await search("select:mcp__crashy__query")
        assert "Some MCP servers are unavailable: crashy (" in text_of(crashed)
        assert (
            "cannot open the database" in crashed.structured_content["failed_mcp_servers"]["crashy"]
        )
        call = await client.call_tool(CALL_TOOL_NAME, {"name": "mcp__crashy__query"})
        assert call.is_error and "MCP server 'crashy' failed" in text_of(call)

        # a server that dies: its tools are announced as removed in the next search
        assert text_of(await client.call_tool(CALL_TOOL_NAME, {"name": "mcp__flaky__ping"})) == (
            "pong"
        )
        died = await client.call_tool(CALL_TOOL_NAME, {"name": "mcp__flaky__crash"})
        assert died.is_error

        announced: dict[str, str] = {}

        async def flaky_gone() -> bool:
            record = (await search("zzz-nothing")).structured_content
            announced.update(record["removed_tools"])
            return "flaky" in record["failed_mcp_servers"]

        await until(flaky_gone)
        assert set(announced) == {"mcp__flaky__crash", "mcp__flaky__ping"}
        assert "disconnected" in announced["mcp__flaky__ping"]
        assert (await search("ping")).structured_content["removed_tools"] == {}  # said once
        after = await client.call_tool(CALL_TOOL_NAME, {"name": "mcp__flaky__ping"})
        # it is being reconnected (tests/test_mcp_hub_reconnect.py): down, coming back, or back
        text = text_of(after)
        assert (
            ("MCP server 'flaky' disconnected" in text and "; reconnecting in 1 s" in text)
            or "MCP server 'flaky' is still reconnecting" in text
            or text == "pong"
        ), text


@pytest.mark.anyio
@pytest.mark.timeout(60)
async def test_removed_tools_are_announced_once(tmp_path: Path) -> None:
    servers = {"flaky": support.stdio("crashing", "--when", "call")}
    from toolsearch.mcp.config import parse_mcp_config

    async with McpHub(parse_mcp_config(support.config(**servers)), backend="keyword") as hub:
        gateway = Gateway(hub)
        with anyio.fail_after(20):
            assert await hub.wait_ready()
        assert (await gateway.search({"query": "ping"})).structured_content["removed_tools"] == {}
        await gateway.call({"name": "mcp__flaky__crash"})
        with anyio.fail_after(10):
            assert await hub.wait_until(lambda h: h.servers["flaky"].status == "disconnected")
        announced = await gateway.search({"query": "ping"})
        removed = announced.structured_content["removed_tools"]
        assert set(removed) == {"mcp__flaky__ping", "mcp__flaky__crash"}
        assert "disconnected" in removed["mcp__flaky__ping"]
        assert "Removed since the last search: " in announced.text
        assert (await gateway.search({"query": "ping"})).structured_content["removed_tools"] == {}


LOCAL = [
    Tool(f"Local{name}", f"{text} for tests", should_defer=True)
    for name, text in (
        ("Alpha", "first tool"),
        ("Beta", "second tool"),
        ("Gamma", "third tool"),
        ("Delta", "fourth tool"),
        ("Epsilon", "fifth tool"),
    )
]


@pytest.mark.anyio
async def test_select_names_not_found_are_named() -> None:
    async with McpHub([], tools=LOCAL, backend="keyword", deny=["LocalBeta"]) as hub:
        gateway = Gateway(hub)
        some = await gateway.handle(SEARCH_TOOL_NAME, {"query": "select:LocalAlpha,NoSuch"})
        assert [t["name"] for t in json.loads(some.text)["tools"]] == ["LocalAlpha"]
        assert json.loads(some.text)["not_found"] == ["NoSuch"]
        assert some.structured_content["not_found"] == ["NoSuch"]
        # a denied tool is as absent as a missing one
        none = await gateway.handle(SEARCH_TOOL_NAME, {"query": "select:NoSuch,LocalBeta"})
        assert none.text == "No matching deferred tools found\nNot found: NoSuch, LocalBeta"
        found = await gateway.handle(SEARCH_TOOL_NAME, {"query": "select:LocalAlpha"})
        assert "not_found" not in json.loads(found.text)


@pytest.mark.anyio
async def test_gateway_arguments_are_checked() -> None:
    async with McpHub([], tools=LOCAL, backend="keyword", deny=["LocalBeta"]) as hub:
        gateway = Gateway(hub)
        definitions = {d["name"]: d for d in gateway.tool_definitions()}
        search_schema = definitions[SEARCH_TOOL_NAME]["inputSchema"]
        assert search_schema["required"] == []  # query or queries, checked by the handler
        assert search_schema["properties"]["queries"]["items"] == {"type": "string"}
        assert definitions[CALL_TOOL_NAME]["inputSchema"]["required"] == ["name"]
        found = await gateway.handle(SEARCH_TOOL_NAME, {"query": "tool", "max_results": 2})
        assert [t["name"] for t in found.structured_content["tools"]] == [
            "LocalAlpha",
            "LocalDelta",
        ]
        assert "LocalBeta" not in json.dumps(
            (
                await gateway.handle(SEARCH_TOOL_NAME, {"query": "second", "max_results": 9})
            ).structured_content
        )
        bad_k = await gateway.handle(SEARCH_TOOL_NAME, {"query": "x", "max_results": 0})
        assert bad_k.is_error and "max_results must be between 1 and 100" in bad_k.text
        no_query = await gateway.handle(SEARCH_TOOL_NAME, {})
        assert no_query.is_error and "needs a string 'query' (or 'queries')" in no_query.text
        for bad, message in [
            ({"queries": "tool"}, "'queries' must be a non-empty array of strings"),
            ({"queries": []}, "'queries' must be a non-empty array of strings"),
            ({"queries": ["tool", 3]}, "'queries' must be a non-empty array of strings"),
            ({"queries": ["x"] * 11}, "'queries' holds 11 queries; at most 10 a call"),
            ({"query": "tool", "queries": ["tool"]}, "give 'query' or 'queries', not both"),
        ]:
            refused = await gateway.handle(SEARCH_TOOL_NAME, bad)
            assert refused.is_error and message in refused.text, bad
        no_name = await gateway.handle(CALL_TOOL_NAME, {"arguments": {}})
        assert no_name.is_error and "'name'" in no_name.text
        bad_args = await gateway.handle(CALL_TOOL_NAME, {"name": "LocalAlpha", "arguments": [1]})
        assert bad_args.is_error and "'arguments' must be an object" in bad_args.text
        local = await gateway.handle(CALL_TOOL_NAME, {"name": "LocalAlpha"})
        assert local.is_error and "not an MCP tool" in local.text
        missing = await gateway.handle(CALL_TOOL_NAME, {"name": "mcp__nowhere__x"})
        assert missing.is_error and "no such tool 'mcp__nowhere__x'" in missing.text
        unknown = await gateway.handle("delete_everything", {})
        assert unknown.is_error and "unknown tool 'delete_everything'" in unknown.text


@pytest.mark.anyio
@pytest.mark.slow
@pytest.mark.timeout(90)
async def test_serve_over_streamable_http(tmp_path: Path) -> None:
    from mcp import Client

    path = write_config(tmp_path, many=support.stdio("many_tools"))
    command, args = support.gateway_command(
        path, "--transport", "http", "--host", "127.0.0.1", "--port", "0"
    )
    process = subprocess.Popen(
        [command, *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    try:
        assert process.stderr is not None
        warning = process.stderr.readline()  # tokenless loopback: any local user may connect
        assert "HTTP on a loopback address without a token" in warning, warning
        line = process.stderr.readline()
        assert line.startswith("toolsearch gateway on http://127.0.0.1:"), line
        url = line.split()[3]
        assert url.endswith("/mcp")
        # Readiness, not a clock: the gateway logs each server's connection on stderr.
        logged = [process.stderr.readline() for _ in range(2)]
        assert logged == [
            "toolsearch gateway: MCP server 'many' connected: 303 tools\n",
            "toolsearch gateway: every MCP server has settled: 1 connected; all their tools "
            "are searchable\n",
        ]
        async with Client(url) as client:
            found = await client.call_tool(SEARCH_TOOL_NAME, {"query": "kubernetes pod"})
            assert found.structured_content["tools"]
            called = await client.call_tool(
                CALL_TOOL_NAME, {"name": "mcp__many__kubernetes_list_pod", "arguments": {}}
            )
            assert text_of(called) == "kubernetes_list_pod ok: []"
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=20) == 0  # a clean stop, its servers shut down
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)
        if process.stderr is not None:
            process.stderr.close()


def test_serve_reports_config_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--config", str(tmp_path / "absent.json")]) == 2
    assert "absent.json: file not found" in capsys.readouterr().err
    bad = write_config(tmp_path, broken={"command": 5})
    assert main(["serve", "--config", str(bad)]) == 2
    assert "server 'broken', field 'command'" in capsys.readouterr().err
    good = write_config(tmp_path, ok={"command": "x"})
    assert main(["serve", "--config", str(good), "--deny", "mcp__a__b*"]) == 2
    assert "invalid rule" in capsys.readouterr().err
    assert main(["serve", "--config", str(good), "--port", "70000"]) == 2
    assert "--port must be between 0 and 65535" in capsys.readouterr().err


@pytest.mark.anyio
async def test_several_queries_in_one_search_are_merged() -> None:
    async with McpHub([], tools=LOCAL, backend="keyword", deny=["LocalBeta"]) as hub:
        gateway = Gateway(hub)
        alone = [
            [
                t["name"]
                for t in (await gateway.handle(SEARCH_TOOL_NAME, {"query": q})).structured_content[
                    "tools"
                ]
            ]
            for q in ("select:LocalDelta", "select:LocalAlpha,LocalBeta")
        ]
        assert alone == [["LocalDelta"], ["LocalAlpha"]]
        many = await gateway.handle(
            SEARCH_TOOL_NAME, {"queries": ["select:LocalDelta", "select:LocalAlpha,LocalBeta"]}
        )
        assert not many.is_error
        record = many.structured_content
        assert [t["name"] for t in record["tools"]] == ["LocalDelta", "LocalAlpha"]
        assert record["merged_queries"] == 2 and record["not_found"] == ["LocalBeta"]
        assert json.loads(many.text)["merged"].startswith("2 queries, merged round-robin")
        same = await gateway.handle(SEARCH_TOOL_NAME, {"queries": ["tool", "tool"]})
        names = [t["name"] for t in same.structured_content["tools"]]
        assert len(names) == len(set(names)) > 0  # each tool once


@pytest.mark.parametrize("host", ["127.0.0.1", "::1"])
def test_gateway_connections_turn_nagle_off(host: str) -> None:
    """uvicorn writes a response's headers and body in two sends; with Nagle's algorithm on,
    the body waited ~40 ms for the client's delayed ACK on every request. asyncio (as uvicorn
    uses it) must see the listening socket as TCP so that it sets TCP_NODELAY on each
    connection."""
    import asyncio
    import socket

    try:
        sock = listening_socket(host, 0)
    except ConfigError:
        pytest.skip(f"no {host} on this machine")

    async def accept_one() -> int:
        options: list[int] = []

        async def handle(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            accepted = writer.get_extra_info("socket")
            options.append(accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            writer.close()

        server = await asyncio.start_server(handle, sock=sock)
        async with server:
            reader, writer = await asyncio.open_connection(*sock.getsockname()[:2])
            await reader.read()
            writer.close()
        return options[0]

    assert asyncio.run(accept_one()) != 0


def test_a_taken_port_is_a_config_error() -> None:
    with listening_socket("127.0.0.1", 0) as taken:
        port = taken.getsockname()[1]
        with pytest.raises(ConfigError, match=rf"cannot listen on 127\.0\.0\.1:{port}"):
            listening_socket("127.0.0.1", port)


@pytest.mark.anyio
@pytest.mark.timeout(60)
async def test_the_sdk_checks_a_calls_headers_without_running_tools_list() -> None:
    """For each ``tools/call`` over streamable HTTP the SDK looks up the tool's input schema
    to check ``Mcp-Param-*`` headers; without ``get_tool_input_schema`` it ran the gateway's
    whole ``tools/list`` handler, a second request's work for every search."""
    from toolsearch.mcp.config import parse_mcp_config

    hub = McpHub(parse_mcp_config(support.config()), backend="keyword")
    gateway = Gateway(hub)
    server = gateway.server()
    assert server.get_tool_input_schema is not None
    for tool in gateway.tool_definitions():
        assert server.get_tool_input_schema(tool["name"]) == tool["inputSchema"]
    assert server.get_tool_input_schema("mcp__other__tool") is None
