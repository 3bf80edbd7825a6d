"""The gateway bounds the MCP sessions each client keeps: a client that opens sessions without
ever closing them replaces its own, idle sessions end, and no client can make the gateway
refuse everyone else's — over real sockets, with the SDK's session manager behind."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest

pytest.importorskip("mcp_types")  # the MCP SDK v2 (toolsearch[mcp])

import httpx2

from toolsearch.mcp import http_security
from toolsearch.mcp.gateway import Gateway
from toolsearch.mcp.http_sessions import SessionLimits
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
PING = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
ACCEPT = {"accept": "application/json, text/event-stream"}


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@asynccontextmanager
async def gateway(
    monkeypatch: pytest.MonkeyPatch, **limits: Any
) -> AsyncIterator[tuple[str, SessionLimits]]:
    """A gateway on 127.0.0.1 whose session limits are ``limits``; yields its URL and them."""
    made: list[SessionLimits] = []

    def limited(app: Any) -> SessionLimits:
        made.append(SessionLimits(app, **limits))
        return made[-1]

    monkeypatch.setattr(http_security, "SessionLimits", limited)
    hub = McpHub([], tools=[Tool("LocalEcho", "echo things", should_defer=True)])
    async with hub, anyio.create_task_group() as tasks:
        ready = anyio.Event()
        urls: list[str] = []

        def on_ready(url: str) -> None:
            urls.append(url)
            ready.set()

        async def run() -> None:
            await Gateway(hub).run_http("127.0.0.1", 0, on_ready=on_ready)

        tasks.start_soon(run)
        with anyio.fail_after(60):
            await ready.wait()
        yield urls[0], made[0]
        tasks.cancel_scope.cancel()


async def initialize(client: httpx2.AsyncClient, url: str) -> httpx2.Response:
    return await client.post(url, json=INITIALIZE, headers=ACCEPT)


async def alive(client: httpx2.AsyncClient, url: str, session: str) -> int:
    """The status a ping within ``session`` gets: 200 while it is open, 404 once closed."""
    response = await client.post(url, json=PING, headers={**ACCEPT, "mcp-session-id": session})
    return response.status_code


def from_address(address: str) -> httpx2.AsyncClient:
    transport = httpx2.AsyncHTTPTransport(local_address=address)
    return httpx2.AsyncClient(timeout=60, transport=transport)


@pytest.mark.anyio
@pytest.mark.timeout(120)
async def test_a_client_that_never_closes_sessions_only_replaces_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async with (
        gateway(monkeypatch, per_client=3) as (url, limits),
        from_address("127.0.0.1") as greedy,
        from_address("127.0.0.2") as other,
    ):
        kept = (await initialize(other, url)).headers["mcp-session-id"]
        opened = []
        for _ in range(12):  # never DELETEd
            response = await initialize(greedy, url)
            assert response.status_code == 200
            opened.append(response.headers["mcp-session-id"])
        assert limits.open_sessions("127.0.0.1") == 3 and limits.open_sessions() == 4
        assert [await alive(greedy, url, s) for s in opened[:9]] == [404] * 9
        assert [await alive(greedy, url, s) for s in opened[9:]] == [200] * 3
        assert await alive(other, url, kept) == 200  # another client is not touched
        # A DELETE frees its slot at once: the next session replaces nothing.
        closed = await greedy.delete(url, headers={"mcp-session-id": opened[9]})
        assert closed.status_code == 200
        assert (await initialize(greedy, url)).status_code == 200
        assert [await alive(greedy, url, s) for s in opened[10:]] == [200] * 2


@pytest.mark.anyio
@pytest.mark.timeout(120)
async def test_idle_sessions_end_and_busy_ones_are_never_replaced(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = Clock()
    async with (
        gateway(monkeypatch, per_client=2, streams_per_client=2, idle_timeout=60, clock=clock) as (
            url,
            limits,
        ),
        from_address("127.0.0.1") as client,
    ):
        first = (await initialize(client, url)).headers["mcp-session-id"]
        clock.now += 61
        second = (await initialize(client, url)).headers["mcp-session-id"]
        assert await alive(client, url, first) == 404  # idle past the timeout: closed
        assert await alive(client, url, second) == 200
        # An open event stream keeps a session busy: a full client is refused, not the
        # stream's session closed under it.
        third = (await initialize(client, url)).headers["mcp-session-id"]
        stream = {"accept": "text/event-stream"}
        async with (
            client.stream("GET", url, headers={**stream, "mcp-session-id": second}),
            client.stream("GET", url, headers={**stream, "mcp-session-id": third}),
        ):
            refused = await initialize(client, url)
            assert refused.status_code == 429 and refused.headers["retry-after"] == "5"
            assert "Too many open sessions from this client" in refused.text
            # A request of a protocol without sessions opens none, so it is not limited.
            modern = {**ACCEPT, "mcp-protocol-version": "2026-07-28"}
            discover = {"jsonrpc": "2.0", "id": 3, "method": "server/discover", "params": {}}
            answered = await client.post(url, json=discover, headers=modern)
            assert answered.status_code != 429 and "mcp-session-id" not in answered.headers
        assert limits.open_sessions("127.0.0.1") == 2


async def _stream_until(
    client: httpx2.AsyncClient, url: str, session: str, done: anyio.Event
) -> int:
    """Hold an event stream of ``session`` open until ``done``; returns its status."""
    headers = {"accept": "text/event-stream", "mcp-session-id": session}
    async with client.stream("GET", url, headers=headers) as response:
        if response.status_code == 200:
            await done.wait()
        return response.status_code


@pytest.mark.anyio
@pytest.mark.timeout(120)
async def test_open_event_streams_never_lock_an_address_out_of_new_sessions(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # On loopback every local user is one address: one of them holding streams must not
    # make the gateway refuse the others' new sessions.
    async with (
        gateway(monkeypatch, per_client=4) as (url, limits),
        from_address("127.0.0.1") as streamer,
        from_address("127.0.0.1") as neighbour,
    ):
        sessions = [(await initialize(streamer, url)).headers["mcp-session-id"] for _ in range(4)]
        done = anyio.Event()
        statuses: list[int] = []

        async def hold(session: str) -> None:
            statuses.append(await _stream_until(streamer, url, session, done))

        async with anyio.create_task_group() as tasks:
            for session in sessions:
                tasks.start_soon(hold, session)
            with anyio.fail_after(30):
                while len(statuses) < 2:  # two of four streams are refused at once
                    await anyio.sleep(0.05)
            assert statuses == [429, 429]
            opened = await initialize(neighbour, url)
            assert opened.status_code == 200, opened.text
            assert limits.open_sessions("127.0.0.1") == 4
            done.set()
        assert sorted(statuses) == [200, 200, 429, 429]


@pytest.mark.anyio
@pytest.mark.timeout(180)
async def test_sessions_are_bounded_in_total_and_many_addresses_replace_each_other(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async with (
        gateway(monkeypatch, per_client=64, max_sessions=12) as (url, limits),
        from_address("127.0.0.99") as quiet,
    ):
        kept = (await initialize(quiet, url)).headers["mcp-session-id"]
        for round_ in range(4):  # 120 sessions from 10 addresses, never DELETEd
            for host in range(1, 11):
                async with from_address(f"127.0.1.{host}") as flooder:
                    for _ in range(3):
                        assert (await initialize(flooder, url)).status_code == 200
            assert limits.open_sessions() <= 12, round_
        # the flood replaced its own sessions; the client with one kept it
        assert await alive(quiet, url, kept) == 200
        assert limits.open_sessions("127.0.0.99") == 1
