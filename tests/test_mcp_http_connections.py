"""Slow and greedy clients cannot take the HTTP gateway's connections from everyone else:
request headers and bodies must arrive in time, connections are bounded in total and per
address, and refusals are logged once per kind per interval — over real loopback sockets."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import pytest

pytest.importorskip("mcp_types")  # the MCP SDK v2 (toolsearch[mcp])

import httpx2

from toolsearch.errors import ConfigError
from toolsearch.mcp.gateway import Gateway
from toolsearch.mcp.http_connections import ConnectionLimits, RefusalLog
from toolsearch.mcp.hub import McpHub
from toolsearch.tool import Tool

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


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@asynccontextmanager
async def gateway(limits: ConnectionLimits, log: list[str]) -> AsyncIterator[tuple[str, int]]:
    """A gateway on 127.0.0.1 with these connection limits; yields its URL and port."""
    hub = McpHub([], tools=[Tool("LocalEcho", "echo things", should_defer=True)])
    async with hub, anyio.create_task_group() as tasks:
        ready = anyio.Event()
        urls: list[str] = []

        def on_ready(url: str) -> None:
            urls.append(url)
            ready.set()

        async def run() -> None:
            await Gateway(hub).run_http(
                "127.0.0.1", 0, on_ready=on_ready, connections=limits, log=log.append
            )

        tasks.start_soon(run)
        with anyio.fail_after(60):
            await ready.wait()
        yield urls[0], int(urls[0].rsplit(":", 1)[1].split("/")[0])
        tasks.cancel_scope.cancel()


async def open_from(address: str, port: int) -> anyio.abc.SocketStream:
    return await anyio.connect_tcp("127.0.0.1", port, local_host=address)


async def closed_by_server(stream: anyio.abc.SocketStream, within: float) -> bytes:
    """Everything the server sends until it closes the connection (fails after ``within``);
    the client's end is closed then too."""
    received = b""
    async with stream:
        with anyio.fail_after(within):
            while True:
                try:
                    received += await stream.receive()
                except (anyio.EndOfStream, anyio.BrokenResourceError):
                    return received


async def initialize_from(address: str, url: str) -> int:
    transport = httpx2.AsyncHTTPTransport(local_address=address)
    async with httpx2.AsyncClient(timeout=30, transport=transport) as client:
        response = await client.post(url, json=INITIALIZE, headers=ACCEPT)
        return response.status_code


@pytest.mark.anyio
@pytest.mark.timeout(120)
async def test_slow_headers_and_slow_bodies_are_cut_off() -> None:
    log: list[str] = []
    limits = ConnectionLimits(header_timeout=1.0, body_timeout=1.0)
    async with gateway(limits, log) as (url, port):
        dribbling = [await open_from("127.0.0.1", port) for _ in range(5)]
        for stream in dribbling:
            await stream.send(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")

        async def dribble(stream: anyio.abc.SocketStream) -> None:
            with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                for number in range(100):  # a header line every 0.2 s: never done
                    await stream.send(f"X-Slow-{number}: 1\r\n".encode())
                    await anyio.sleep(0.2)

        async with anyio.create_task_group() as tasks:
            for stream in dribbling:
                tasks.start_soon(dribble, stream)
            for stream in dribbling:  # 1 s allowed; 20 s is the generous bound
                assert await closed_by_server(stream, 20) == b""
            tasks.cancel_scope.cancel()
        slow_body = await open_from("127.0.0.1", port)
        await slow_body.send(
            b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\ncontent-type: application/json\r\n"
            b"content-length: 1000\r\n\r\n{"
        )
        await closed_by_server(slow_body, 20)
        assert await initialize_from("127.0.0.1", url) == 200  # the gateway still answers
    headers = [line for line in log if "request headers did not arrive" in line]
    assert len(headers) == 1, log  # five slow clients, one line
    assert any("request body did not arrive within 1 s" in line for line in log), log
    assert not any("Traceback" in line for line in log)


@pytest.mark.anyio
@pytest.mark.timeout(120)
async def test_connections_are_bounded_per_address_and_in_total() -> None:
    log: list[str] = []
    limits = ConnectionLimits(max_connections=8, per_address=3, header_timeout=60)
    async with gateway(limits, log) as (url, port):
        held = [await open_from("127.0.0.1", port) for _ in range(3)]
        refused = []
        for _ in range(10):  # over this address's share: 503 and closed at once
            stream = await open_from("127.0.0.1", port)
            refused.append(await closed_by_server(stream, 20))
        assert all(reply.startswith(b"HTTP/1.1 503") for reply in refused), refused[0]
        # another address still gets in, and is served
        assert await initialize_from("127.0.0.2", url) == 200
        held += [await open_from(f"127.0.0.{n}", port) for n in (3, 3, 3, 4, 4)]
        # eight open: the total bound refuses even a fresh address
        late = await open_from("127.0.0.5", port)
        assert (await closed_by_server(late, 20)).startswith(b"HTTP/1.1 503")
        for stream in held:
            await stream.aclose()
        with anyio.fail_after(30):  # the slots come back once the connections close
            while await _status_or_none("127.0.0.5", url) != 200:
                await anyio.sleep(0.1)
    per_address = [line for line in log if "at its limit of 3 connections" in line]
    assert len(per_address) == 1, log  # ten refusals, one line
    assert sum("at the limit of 8 connections" in line for line in log) == 1, log


async def _status_or_none(address: str, url: str) -> int | None:
    try:
        return await initialize_from(address, url)
    except httpx2.HTTPError:
        return None


def test_refusals_are_logged_once_per_kind_per_interval() -> None:
    lines: list[str] = []
    now = [0.0]
    refusals = RefusalLog(60, lines.append, clock=lambda: now[0])
    for _ in range(500):
        refusals.refuse("connections", "refusing HTTP connections: full")
    refusals.refuse("slow-headers", "closing slow connections")
    now[0] = 61
    refusals.refuse("connections", "refusing HTTP connections: full")
    assert lines == [
        "refusing HTTP connections: full",
        "closing slow connections",
        "refusing HTTP connections: full (499 more since the last report)",
    ]
    assert refusals.counts == {"connections": 501, "slow-headers": 1}


@pytest.mark.parametrize(
    "options",
    [{"max_connections": 0}, {"per_address": True}, {"header_timeout": 0}, {"body_timeout": -1}],
)
def test_bad_limits_are_refused(options: dict[str, object]) -> None:
    with pytest.raises(ConfigError, match=next(iter(options))):
        ConnectionLimits(**options)  # type: ignore[arg-type]
