"""Security findings against the hub and gateway over real stdio servers: deny rules with
awkward server names, tool shadowing, calls with malformed names, ``alwaysLoad`` tools a gateway
client must still find, and what the gateway tells its operator on stderr."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("mcp_types")  # the MCP SDK v2 (toolsearch[mcp])

from mcp_servers import support  # tests/mcp_servers (pytest pythonpath)

from toolsearch.cli import main
from toolsearch.mcp.config import McpConfigError, parse_mcp_config
from toolsearch.mcp.gateway import Gateway
from toolsearch.mcp.hub import McpHub


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def write_config(tmp_path: Path, servers: dict[str, Any]) -> Path:
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps(support.config(**servers)), encoding="utf-8")
    return path


@pytest.mark.anyio
@pytest.mark.timeout(60)
async def test_server_rules_deny_awkward_server_names_on_every_path() -> None:
    names = ["a__b", "my.fs", "My Files", "Files", "free"]
    config = parse_mcp_config(
        support.config(**{n: support.stdio("crashing", "--when", "call") for n in names})
    )
    rules = ["mcp__a__b", "mcp__my.fs", "mcp__My Files", "mcp__files__ping", "mcp__gone"]
    async with McpHub(config, backend="keyword", deny=rules) as hub:
        assert [r.text for r in hub.unmatched_rules] == ["mcp__gone"]
        with anyio.fail_after(30):
            assert await hub.wait_ready()
        assert {s.status for s in hub.servers.values()} == {"connected"}
        gateway = Gateway(hub)
        visible = {t.name for t in hub.tools}
        assert visible == {"mcp__Files__crash", "mcp__free__crash", "mcp__free__ping"}
        for name in (
            "mcp__a__b__ping",
            "mcp__my_fs__ping",
            "mcp__My_Files__ping",
            "mcp__Files__ping",
        ):
            for query in (name, name.lower(), f"select:{name}", name.rsplit("__", 1)[0], "ping"):
                found = await gateway.search({"query": query, "max_results": 50})
                names = [tool["name"] for tool in found.structured_content["tools"]]
                assert name not in names, query
            called = await gateway.call({"name": name})
            assert called.is_error and "denied by a permission rule" in called.text, name
        assert (await gateway.call({"name": "mcp__free__ping"})).text == "pong"


@pytest.mark.anyio
@pytest.mark.timeout(30)
async def test_call_tool_with_a_space_in_the_name_is_an_error_result() -> None:
    config = parse_mcp_config(support.config(s=support.stdio("crashing", "--when", "start")))
    async with McpHub(config, backend="keyword", deny=["mcp__x"]) as hub:
        gateway = Gateway(hub)
        for name in ("mcp__s__a b", "x y", "mcp__x__\u200b y"):
            result = await gateway.handle("call_tool", {"name": name})
            assert result.is_error
            assert "not available" in result.text or "no such tool" in result.text


def test_servers_whose_tools_could_shadow_each_other_are_refused() -> None:
    entry = support.stdio("crashing", "--when", "start")
    with pytest.raises(McpConfigError) as info:
        parse_mcp_config(support.config(**{"a": entry, "a__b": entry}))
    message = str(info.value)
    assert "server 'a__b'" in message and "clashes with server 'a'" in message
    first = parse_mcp_config(support.config(Files=entry)).servers
    second = parse_mcp_config(support.config(files=entry)).servers
    with pytest.raises(McpConfigError, match="clashes with server 'Files'"):
        McpHub(first + second)


@pytest.mark.anyio
@pytest.mark.timeout(60)
async def test_gateway_finds_always_load_servers_tools() -> None:
    config = parse_mcp_config(
        support.config(notes={**support.stdio("changing"), "alwaysLoad": True})
    )
    async with McpHub(config, backend="keyword") as hub:
        gateway = Gateway(hub)
        with anyio.fail_after(30):
            assert await hub.wait_ready()
        for query in ("create a note", "mcp__notes", "+notes create"):
            names = [
                t["name"]
                for t in (await gateway.search({"query": query})).structured_content["tools"]
            ]
            assert "mcp__notes__notes_create" in names, query


def test_serve_refuses_a_config_without_servers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "empty.json"
    empty.write_text('{"mcpServers": {}}', encoding="utf-8")
    assert main(["serve", "--config", str(empty)]) == 2
    assert "has no enabled MCP servers" in capsys.readouterr().err
    off = write_config(tmp_path, {"x": {"command": "x", "disabled": True}})
    assert main(["serve", "--config", str(off)]) == 2
    assert "every server is disabled (x)" in capsys.readouterr().err


@pytest.mark.timeout(60)
def test_gateway_logs_failed_servers_and_unmatched_rules_on_stderr(tmp_path: Path) -> None:
    path = write_config(tmp_path, {"crashy": support.stdio("crashing", "--when", "start")})
    command, args = support.gateway_command(path, "--deny", "mcp__crashy", "--deny", "mcp__typo")
    process = subprocess.Popen(
        [command, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stderr is not None and process.stdin is not None
    try:
        lines = [process.stderr.readline() for _ in range(4)]
    finally:
        process.stdin.close()
        process.wait(timeout=20)
        process.stderr.close()
    assert "deny rule 'mcp__typo' matches no configured server or tool" in lines[0]
    assert lines[1].startswith("toolsearch gateway on stdio")
    assert "MCP server 'crashy' failed: " in lines[2]
    assert "cannot open the database" in lines[2]
    assert "every MCP server has settled: 1 failed" in lines[3]


@pytest.mark.anyio
@pytest.mark.timeout(60)
async def test_a_relisting_checks_rules_for_that_servers_tools_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import toolsearch.mcp.hub as hub_module

    config = parse_mcp_config(
        support.config(
            big=support.stdio("many_tools", "--page-size", "100"),
            notes={**support.stdio("changing"), "alwaysLoad": True},
        )
    )
    async with McpHub(config, backend="keyword", deny=["mcp__big__github_delete_issue"]) as hub:
        Gateway(hub)
        with anyio.fail_after(30):
            assert await hub.wait_ready()
        checked: list[str] = []
        real = hub_module.filter_denied

        def counting(tools: Any, rules: Any) -> Any:
            tools = list(tools)
            checked.extend(t.name for t in tools)
            return real(tools, rules)

        monkeypatch.setattr(hub_module, "filter_denied", counting)
        before = {id(t) for t in hub.tools if t.server == "big"}
        await hub.call_tool("mcp__notes__admin_add_tool", {"name": "notes_pin"})
        with anyio.fail_after(20):
            assert await hub.wait_until(lambda h: h.tool("mcp__notes__notes_pin") is not None)
        assert checked and all(name.startswith("mcp__notes__") for name in checked)
        assert {id(t) for t in hub.tools if t.server == "big"} == before
        assert hub.tool("mcp__big__github_delete_issue") is None
