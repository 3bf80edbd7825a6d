"""On a machine with other users, a loopback HTTP gateway without a token lets any of them run
the owner's tools. The safe forms: a Unix domain socket only its owner can open, or a token on
loopback too — and a warning when neither is used."""

from __future__ import annotations

import functools
import os
import stat
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest

pytest.importorskip("mcp_types")  # the MCP SDK v2 (toolsearch[mcp])

import httpx2

from toolsearch.errors import ConfigError
from toolsearch.mcp.config import parse_mcp_config
from toolsearch.mcp.gateway import LOOPBACK_WARNING, Gateway, serve, unix_listening_socket
from toolsearch.mcp.hub import McpHub
from toolsearch.tool import Tool

TOKEN = "s3cret-token-for-tests-0123456789"
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"},
    },
}
ACCEPT = {"accept": "application/json, text/event-stream"}
SERVERS = Path(__file__).parent / "mcp_servers"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def open_folder() -> Iterator[Path]:
    """A folder anyone may enter, so that only the socket's own mode keeps others out."""
    folder = Path(tempfile.mkdtemp(prefix="toolsearch-uds-"))
    folder.chmod(0o755)
    yield folder
    for item in folder.iterdir():
        item.unlink()
    folder.rmdir()


@asynccontextmanager
async def gateway_on_socket(file: Path, token: str | None = None) -> AsyncIterator[str]:
    hub = McpHub([], tools=[Tool("LocalEcho", "echo things", should_defer=True)])
    async with hub, anyio.create_task_group() as tasks:
        ready = anyio.Event()
        urls: list[str] = []

        def on_ready(url: str) -> None:
            urls.append(url)
            ready.set()

        async def run() -> None:
            await Gateway(hub).run_http(unix_socket=file, on_ready=on_ready, token=token)

        tasks.start_soon(run)
        with anyio.fail_after(60):
            await ready.wait()
        yield urls[0]
        tasks.cancel_scope.cancel()


def over_socket(file: Path) -> httpx2.AsyncClient:
    return httpx2.AsyncClient(timeout=30, transport=httpx2.AsyncHTTPTransport(uds=str(file)))


@pytest.mark.anyio
@pytest.mark.timeout(120)
async def test_a_unix_socket_gateway_is_its_owners_alone(open_folder: Path) -> None:
    file = open_folder / "gateway.sock"
    async with gateway_on_socket(file) as url, over_socket(file) as client:
        assert url == f"unix:{file}:/mcp"
        assert stat.S_IMODE(file.stat().st_mode) == 0o600 and stat.S_ISSOCK(file.stat().st_mode)
        response = await client.post("http://localhost/mcp", json=INITIALIZE, headers=ACCEPT)
        assert response.status_code == 200  # any Host: no browser can reach a Unix socket
        browser = {**ACCEPT, "origin": "http://evil.example"}
        refused = await client.post("http://localhost/mcp", json=INITIALIZE, headers=browser)
        assert refused.status_code == 403
        if os.geteuid() == 0:  # another user cannot even connect
            connect = (
                "import socket, sys; s = socket.socket(socket.AF_UNIX); "
                "sys.exit(s.connect_ex(sys.argv[1]))"
            )
            other = subprocess.run(
                [sys.executable, "-c", connect, str(file)], user="nobody", timeout=60
            )
            assert other.returncode == 13  # EACCES
    assert not file.exists()  # removed when the gateway stops


@pytest.mark.anyio
@pytest.mark.timeout(120)
async def test_a_unix_socket_gateway_checks_a_token_when_given(open_folder: Path) -> None:
    file = open_folder / "gateway.sock"
    async with gateway_on_socket(file, token=TOKEN), over_socket(file) as client:
        bare = await client.post("http://localhost/mcp", json=INITIALIZE, headers=ACCEPT)
        assert bare.status_code == 401
        signed = {**ACCEPT, "authorization": f"Bearer {TOKEN}"}
        ok = await client.post("http://localhost/mcp", json=INITIALIZE, headers=signed)
        assert ok.status_code == 200


def test_a_live_socket_or_another_file_is_not_replaced(open_folder: Path) -> None:
    live = open_folder / "live.sock"
    with (
        unix_listening_socket(live),
        pytest.raises(ConfigError, match="another server is listening there"),
    ):
        unix_listening_socket(live)
    stale = unix_listening_socket(live)  # its listener closed: the file is left over
    stale.close()
    unix_listening_socket(live).close()  # a stale socket file is replaced
    data = open_folder / "notes.txt"
    data.write_text("keep me")
    with pytest.raises(ConfigError, match="exists and is not a socket"):
        unix_listening_socket(data)
    assert data.read_text() == "keep me"


@pytest.mark.anyio
@pytest.mark.timeout(120)
async def test_a_loopback_gateway_without_a_token_warns(open_folder: Path) -> None:
    config = parse_mcp_config(
        {
            "mcpServers": {
                "echo": {"command": sys.executable, "args": [str(SERVERS / "many_tools.py")]}
            }
        }
    )
    for options, warned in (
        ({"port": 0}, True),
        ({"port": 0, "token": TOKEN}, False),
        ({"unix_socket": open_folder / "g.sock"}, False),
    ):
        lines: list[str] = []
        with anyio.move_on_after(60):
            async with anyio.create_task_group() as tasks:

                def ready(url: str, tasks: anyio.abc.TaskGroup = tasks) -> None:
                    tasks.cancel_scope.cancel()

                run = functools.partial(
                    serve, config, transport="http", on_ready=ready, log=lines.append, **options
                )
                tasks.start_soon(run)
        assert (LOOPBACK_WARNING in lines) is warned, (options, lines)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--unix-socket", "/tmp/g.sock"], "need --transport http"),
        (["--max-connections", "5"], "need --transport http"),
        (["--transport", "http", "--max-connections", "0"], "--max-connections must be positive"),
    ],
)
def test_serve_refuses_http_options_it_cannot_use(
    tmp_path: Path, args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from toolsearch.cli import main

    config = tmp_path / "mcp.json"
    config.write_text('{"mcpServers": {"s": {"command": "true"}}}')
    assert main(["serve", "--config", str(config), *args]) != 0
    assert message in capsys.readouterr().err
