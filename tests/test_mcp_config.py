"""MCP config files: the format hosts use, validated with errors naming server and field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from toolsearch.errors import ConfigError, ToolSearchError
from toolsearch.mcp.config import (
    McpConfigError,
    ServerConfig,
    expand_env,
    load_mcp_config,
    parse_mcp_config,
)

EXAMPLE = Path(__file__).resolve().parent / "mcp_servers" / "example_mcp.json"


def parse(servers: dict[str, Any], **env: str) -> list[ServerConfig]:
    return list(parse_mcp_config({"mcpServers": servers}, path="mcp.json", environ=env).servers)


def test_claude_desktop_style_stdio_and_http_entries() -> None:
    stdio, http = parse(
        {
            "github": {
                "command": "npx",
                "args": ["-y", "@modelcontextprotocol/server-github"],
                "env": {"GITHUB_TOKEN": "t0k"},
            },
            "linear": {"url": "https://mcp.linear.app/mcp", "headers": {"X-Team": "core"}},
        }
    )
    assert stdio.transport == "stdio"
    assert stdio.command == "npx"
    assert stdio.args == ("-y", "@modelcontextprotocol/server-github")
    assert dict(stdio.env) == {"GITHUB_TOKEN": "t0k"}
    assert http.transport == "http"
    assert http.url == "https://mcp.linear.app/mcp"
    assert dict(http.headers) == {"X-Team": "core"}
    assert stdio.tool_prefix == "mcp__github__"


def test_explicit_type_aliases_and_toolsearch_options() -> None:
    (server,) = parse(
        {
            "api": {
                "type": "streamableHttp",
                "url": "http://127.0.0.1:9/mcp",
                "alwaysLoad": True,
                "startupTimeout": 5,
                "callTimeout": 2.5,
                "autoApprove": ["x"],  # other hosts' keys are ignored
            }
        }
    )
    assert server.transport == "http"
    assert server.always_load is True
    assert server.startup_timeout == 5.0
    assert server.call_timeout == 2.5


def test_disabled_servers_are_skipped_and_listed() -> None:
    config = parse_mcp_config(
        {"mcpServers": {"a": {"command": "x"}, "b": {"command": "y", "disabled": True}}}
    )
    assert config.names == ["a"]
    assert config.disabled == ("b",)


def test_vs_code_servers_key_is_accepted() -> None:
    config = parse_mcp_config({"servers": {"a": {"command": "x"}}})
    assert config.names == ["a"]


def test_env_references_expand_with_defaults() -> None:
    (server,) = parse(
        {
            "api": {
                "url": "https://${HOST}/mcp",
                "headers": {"Authorization": "Bearer ${TOKEN}", "X-Region": "${REGION:-eu}"},
            }
        },
        HOST="example.com",
        TOKEN="s3cret",
    )
    assert server.url == "https://example.com/mcp"
    assert dict(server.headers) == {"Authorization": "Bearer s3cret", "X-Region": "eu"}
    assert expand_env("${A:-x}${B}", {"A": "", "B": "b"}) == "xb"


@pytest.mark.parametrize(
    ("servers", "server", "field", "fragment"),
    [
        ({"s": {"command": 3}}, "s", "command", "non-empty string"),
        ({"s": {"command": "x", "args": "a b"}}, "s", "args", "list of strings"),
        ({"s": {"command": "x", "args": ["a", {"b": 1}]}}, "s", "args[1]", "must be a string"),
        ({"s": {"command": "x", "env": {"A": ["b"]}}}, "s", "env.A", "must be a string"),
        ({"s": {"command": "x", "env": "A=b"}}, "s", "env", "object of strings"),
        ({"s": {"url": "ftp://host/x"}}, "s", "url", "http:// or https://"),
        ({"s": {"url": "http://h/x", "headers": {"A": 1.5, "B": None}}}, "s", "headers.B", "str"),
        ({"s": {"type": "carrier-pigeon", "command": "x"}}, "s", "type", "unknown transport"),
        ({"s": {"type": "sse", "url": "http://h/sse"}}, "s", "type", "SSE"),
        ({"s": {"command": "x", "alwaysLoad": "yes"}}, "s", "alwaysLoad", "true or false"),
        ({"s": {"command": "x", "startupTimeout": 0}}, "s", "startupTimeout", "positive"),
        ({"s": {"command": "x", "callTimeout": "10"}}, "s", "callTimeout", "seconds"),
        ({"s": {"command": "x", "disabled": 1}}, "s", "disabled", "true or false"),
        ({"s": {"command": "${MISSING_TOKEN}"}}, "s", "command", "MISSING_TOKEN is not set"),
        ({"s": {"type": "http", "command": "x"}}, "s", "url", "needs a url"),
        ({"s": {"type": "stdio", "url": "http://h/x"}}, "s", "command", "needs a command"),
    ],
)
def test_errors_name_file_server_and_field(
    servers: dict[str, Any], server: str, field: str, fragment: str
) -> None:
    with pytest.raises(McpConfigError) as info:
        parse(servers)
    error = info.value
    assert error.server == server
    assert error.field == field
    assert fragment in str(error)
    assert str(error).startswith(f"mcp.json, server {server!r}, field '{field}': ")
    assert isinstance(error, ConfigError)
    assert isinstance(error, ToolSearchError)


@pytest.mark.parametrize(
    ("servers", "fragment"),
    [
        ({"s": {}}, "needs 'command' (a stdio server) or 'url'"),
        ({"s": {"command": "x", "url": "http://h/x"}}, "both 'command' and 'url'"),
        ({"s": "npx server"}, "settings must be a JSON object"),
        ({"a.b": {"command": "x"}, "a_b": {"command": "y"}}, "clashes with server 'a.b'"),
    ],
)
def test_entry_level_errors_name_the_server(servers: dict[str, Any], fragment: str) -> None:
    with pytest.raises(McpConfigError, match="server") as info:
        parse(servers)
    assert fragment in str(info.value)
    assert info.value.server is not None


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        ([], "must be a JSON object"),
        ({"other": {}}, "missing the 'mcpServers' object"),
        ({"mcpServers": []}, "must be an object mapping server names"),
        ({"mcpServers": {"": {"command": "x"}}}, "non-empty strings"),
    ],
)
def test_top_level_errors(data: Any, fragment: str) -> None:
    with pytest.raises(McpConfigError, match=r"mcp\.json") as info:
        parse_mcp_config(data, path="mcp.json")
    assert fragment in str(info.value)


def test_file_errors_name_the_file(tmp_path: Path) -> None:
    with pytest.raises(McpConfigError, match="file not found"):
        load_mcp_config(tmp_path / "absent.json")
    broken = tmp_path / "broken.json"
    broken.write_text('{"mcpServers": {', encoding="utf-8")
    with pytest.raises(McpConfigError, match=r"broken\.json: invalid JSON at line 1"):
        load_mcp_config(broken)


def test_example_config_is_valid(tmp_path: Path) -> None:
    config = load_mcp_config(EXAMPLE, environ={"PYTHON": "/usr/bin/python3", "USER": "ada"})
    assert config.names == ["workspace", "notes", "weather"]
    notes = config.get("notes")
    assert notes is not None and notes.always_load
    assert dict(notes.env) == {"NOTES_OWNER": "ada"}
    assert all(server.command == "/usr/bin/python3" for server in config.servers)
    # It stays plain JSON a host can read too.
    assert set(json.loads(EXAMPLE.read_text(encoding="utf-8"))) == {"mcpServers"}
