"""The HTTP gateway over real sockets: Host and Origin allow-lists on every address, a bearer
token required off loopback, and the CLI refusing to listen unprotected."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest

pytest.importorskip("mcp_types")  # the MCP SDK v2 (toolsearch[mcp])

import httpx2

from toolsearch.errors import ConfigError
from toolsearch.mcp.gateway import Gateway
from toolsearch.mcp.http_security import TOKEN_ENV, HttpSecurity, load_token
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
MCP_HEADERS = {"accept": "application/json, text/event-stream"}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@asynccontextmanager
async def gateway_on(host: str, backend: str | None = None, **options: Any) -> AsyncIterator[str]:
    """A gateway over a local tool listening on ``host`` (a free port); yields its URL."""
    hub = McpHub([], tools=[Tool("LocalEcho", "echo things", should_defer=True)], backend=backend)
    async with hub, anyio.create_task_group() as tasks:
        ready = anyio.Event()
        urls: list[str] = []

        def on_ready(url: str) -> None:
            urls.append(url)
            ready.set()

        async def run() -> None:
            await Gateway(hub).run_http(host, 0, on_ready=on_ready, **options)

        tasks.start_soon(run)
        with anyio.fail_after(60):
            await ready.wait()
        yield urls[0]
        tasks.cancel_scope.cancel()


async def post(url: str, **headers: str) -> httpx2.Response:
    """POST ``initialize`` to ``url``; the Host header is the URL's unless ``headers`` say."""
    async with httpx2.AsyncClient(timeout=60) as client:  # a loaded CI machine is slow
        return await client.post(
            url, json=INITIALIZE, headers={"host": url.split("/")[2], **MCP_HEADERS, **headers}
        )


@pytest.mark.anyio
@pytest.mark.timeout(240)
async def test_host_and_origin_are_checked_on_every_loopback_address() -> None:
    for host in ("127.0.0.1", "127.0.0.2"):
        async with gateway_on(host) as url:
            port = url.split(":")[2].split("/")[0]
            assert (await post(url)).status_code == 200
            assert (await post(url, host="evil.example")).status_code == 421
            assert (await post(url, host=f"evil.example:{port}")).status_code == 421
            bad_origins = ("http://evil.example", f"http://localhost:{int(port) + 1}", "null")
            for origin in bad_origins:
                response = await post(url, origin=origin)
                assert response.status_code == 403, origin
                assert "Origin" in response.text
            assert (await post(url, origin=f"http://{host}:{port}")).status_code == 200
            assert (await post(url, host=f"localhost:{port}")).status_code == 200


@pytest.mark.anyio
@pytest.mark.timeout(120)
async def test_a_cancelled_gateway_leaves_nothing_behind_for_the_next() -> None:
    # The keyword backend opens no file, so the second listening socket takes the descriptor
    # the first one freed: a listener still registered with the event loop would hide it.
    for _ in range(3):
        async with gateway_on("127.0.0.1", backend="keyword") as url:
            with anyio.fail_after(30):
                assert (await post(url)).status_code == 200


@pytest.mark.anyio
@pytest.mark.timeout(60)
async def test_allowed_hosts_and_origins_can_be_added() -> None:
    options = {"allow_hosts": ["gateway.internal"], "allow_origins": ["http://localhost:6274"]}
    async with gateway_on("127.0.0.1", **options) as url:
        port = url.split(":")[2].split("/")[0]
        assert (await post(url, host=f"gateway.internal:{port}")).status_code == 200
        assert (await post(url, origin="http://localhost:6274")).status_code == 200
        assert (await post(url, origin="http://localhost:6275")).status_code == 403


@pytest.mark.anyio
@pytest.mark.timeout(240)
async def test_a_token_is_required_off_loopback_and_checked_when_set() -> None:
    async with McpHub([]) as hub:
        with pytest.raises(ConfigError, match=f"needs a bearer token: set {TOKEN_ENV}"):
            await Gateway(hub).run_http("0.0.0.0", 0)
    async with gateway_on("0.0.0.0", token=TOKEN) as url:
        port = url.split(":")[2].split("/")[0]
        local = f"http://127.0.0.1:{port}/mcp"
        missing = await post(local)
        assert missing.status_code == 401 and missing.headers["www-authenticate"] == "Bearer"
        assert (await post(local, authorization=f"Bearer {TOKEN}x")).status_code == 401
        assert (await post(local, authorization=f"Basic {TOKEN}")).status_code == 401
        assert (await post(local, authorization=f"Bearer {TOKEN}")).status_code == 200
        bad_host = await post(local, authorization=f"Bearer {TOKEN}", host="evil.example")
        assert bad_host.status_code == 421
    async with gateway_on("127.0.0.1", token=TOKEN) as url:  # a token set is always checked
        assert (await post(url)).status_code == 401
        assert (await post(url, authorization=f"Bearer {TOKEN}")).status_code == 200


@pytest.mark.anyio
@pytest.mark.timeout(60)
async def test_an_sdk_client_with_the_token_searches_and_calls() -> None:
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    async with gateway_on("127.0.0.1", token=TOKEN) as url:
        headers = {"authorization": f"Bearer {TOKEN}"}
        async with (
            httpx2.AsyncClient(headers=headers) as http,
            Client(streamable_http_client(url, http_client=http)) as client,
        ):
            found = await client.call_tool("search_tools", {"query": "echo"})
            assert found.structured_content["tools"][0]["name"] == "LocalEcho"


def test_tokens_come_from_a_file_or_the_environment(tmp_path: Any) -> None:
    path = tmp_path / "token"
    path.write_text(TOKEN + "\n", encoding="utf-8")
    assert load_token(file=path, environ={}) == TOKEN
    assert load_token(environ={TOKEN_ENV: f" {TOKEN} "}) == TOKEN
    assert load_token(environ={}) is None
    with pytest.raises(ConfigError, match="use at least 16"):
        load_token(environ={TOKEN_ENV: "short"})
    with pytest.raises(ConfigError, match="cannot read the token file"):
        load_token(file=tmp_path / "absent")
    security = HttpSecurity.for_address("::1", 9000)
    assert "[::1]:9000" in security.allowed_hosts and "localhost:9000" in security.allowed_hosts


@pytest.mark.timeout(60)
def test_serve_refuses_a_public_address_without_a_token(tmp_path: Any) -> None:
    config = tmp_path / "mcp.json"
    config.write_text('{"mcpServers": {"x": {"command": "true"}}}', encoding="utf-8")
    code = "import sys; from toolsearch.cli import main; sys.exit(main())"
    args = ["serve", "--config", str(config), "--transport", "http", "--host", "0.0.0.0"]
    env = {"PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=50, env=env
    )
    assert done.returncode == 2
    assert f"needs a bearer token: set {TOKEN_ENV} or pass --token-file FILE" in done.stderr


def _own_addresses() -> list[str]:
    """Addresses of this machine beyond 127.0.0.1: another loopback address, and the one its
    default route leaves from, when it has one."""
    import socket

    found = ["127.0.0.2"]
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.123", 9))  # no packet is sent for a UDP connect
            found.append(probe.getsockname()[0])
        except OSError:
            pass
    return [address for address in found if address != "127.0.0.1"]


@pytest.mark.anyio
@pytest.mark.timeout(120)
async def test_on_every_interface_the_machines_own_addresses_are_allowed_hosts() -> None:
    async with gateway_on("0.0.0.0", token=TOKEN) as url:
        port = url.split(":")[2].split("/")[0]
        local = f"http://127.0.0.1:{port}/mcp"
        auth = {"authorization": f"Bearer {TOKEN}"}
        for address in _own_addresses():
            own = f"{address}:{port}"
            assert (await post(local, host=own, **auth)).status_code == 200, address
            allowed = await post(local, host=own, origin=f"http://{own}", **auth)
            assert allowed.status_code == 200, address
            wrong_port = await post(local, host=f"{address}:{int(port) + 1}", **auth)
            assert wrong_port.status_code == 421, address
        for foreign in ("192.0.2.250", "203.0.113.9", "[2001:db8::1]", "evil.example"):
            refused = await post(local, host=f"{foreign}:{port}", **auth)
            assert refused.status_code == 421, foreign
    async with gateway_on("127.0.0.1") as url:  # on one address only that address counts
        port = url.split(":")[2].split("/")[0]
        assert (await post(url, host=f"127.0.0.2:{port}")).status_code == 421


def test_a_token_an_http_header_cannot_carry_is_refused_at_start() -> None:
    unsendable = ("pässwörd-long-enough-0123", "token with a space inside", "tab\tseparated-0123")
    for token in unsendable:
        with pytest.raises(ConfigError, match="printable ASCII"):
            load_token(environ={TOKEN_ENV: token})
        with pytest.raises(ConfigError, match="printable ASCII"):
            HttpSecurity.for_address("0.0.0.0", 8000, token=token)
    security = HttpSecurity.for_address("0.0.0.0", 8000, token=TOKEN)
    assert security.check({"host": "127.0.0.1:8000", "authorization": f"Bearer {TOKEN}"}) is None
