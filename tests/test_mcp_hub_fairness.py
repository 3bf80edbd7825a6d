"""One churning server cannot blind the hub (docs/concurrency.md, "Fair indexing"): a server
that is not searchable yet is indexed alone, before any relisting, and a server that relists
all the time gets at most its share of the indexing time. The backend here costs time in
proportion to what it indexes, as a dense member does, so "alone" and "its share" are
facts about which tools each write carried, not timing guesses."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Sequence

import anyio
import pytest

pytest.importorskip("mcp_types")  # the MCP SDK v2 (toolsearch[mcp])

from mcp_servers import support  # tests/mcp_servers (pytest pythonpath)

import toolsearch.mcp.client
from toolsearch.backends.keyword import KeywordBackend
from toolsearch.mcp.config import parse_mcp_config
from toolsearch.mcp.gateway import _ServerLog
from toolsearch.mcp.hub import SERVER_SHARE, McpHub
from toolsearch.tool import Tool

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(180)]
#: Seconds each indexed tool costs: a relisting of the churning server's 300 tools, 0.6 s.
COST_PER_TOOL = 0.002


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


class CostlyKeyword(KeywordBackend):
    """The keyword backend, paying :data:`COST_PER_TOOL` per tool written and recording which
    servers each write carried and how long writes took in all."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[set[str | None]] = []
        self.busy = {"churn": 0.0, "other": 0.0}
        self._lock = threading.Lock()

    def _pay(self, tools: Sequence[Tool]) -> None:
        began = time.monotonic()
        time.sleep(COST_PER_TOOL * len(tools))
        servers = {tool.server for tool in tools}
        with self._lock:
            self.writes.append(servers)
            key = "churn" if servers == {"churn"} else "other"
            self.busy[key] += time.monotonic() - began

    def index(self, tools: Sequence[Tool]) -> None:
        self._pay(tools)
        super().index(tools)

    def upsert(self, tools: Sequence[Tool]) -> None:
        self._pay(tools)
        super().upsert(tools)

    def remove(self, names: Iterable[str]) -> None:
        super().remove(names)


async def test_a_static_server_is_indexed_alone_and_a_churning_one_gets_its_share(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(toolsearch.mcp.client, "RELIST_INTERVAL", 0.0)
    servers = {
        "churn": support.stdio("churning", "--tools", "300", "--interval", "0.05"),
        "fixed": support.stdio("slow_start", "--delay", "2"),
    }
    backend = CostlyKeyword()
    settled: list[tuple[str, tuple[str, ...]]] = []
    hub = McpHub(parse_mcp_config(support.config(**servers)), backend=backend)
    async with hub, anyio.create_task_group() as tasks:
        log = _ServerLog(lambda line: settled.append((line, hub.pending_servers)))
        tasks.start_soon(log.settle, hub)
        with anyio.fail_after(120):
            await hub.wait_until(lambda h: h.connection("churn").listings > 3)
            assert await hub.wait_ready()
        fixed = [t for t in hub.tools if t.server == "fixed"]
        assert fixed and hub.search(f"select:{fixed[0].name}").names == [fixed[0].name]
        # the write that indexed the static server carried its tools alone
        assert {"fixed"} in backend.writes
        assert not any("fixed" in servers and "churn" in servers for servers in backend.writes)
        with anyio.fail_after(60):  # the churn goes on; measure its share over a while
            before = dict(backend.busy)
            started = time.monotonic()
            listings = hub.connection("churn").listings
            await hub.wait_until(lambda h: h.connection("churn").listings > listings + 20)
            await anyio.sleep(3)
            while backend.busy["churn"] <= before["churn"]:  # it is indexed too, in its turn
                await anyio.sleep(0.1)
        churning = backend.busy["churn"] - before["churn"]
        share = churning / (time.monotonic() - started)
        assert 0 < share <= SERVER_SHARE * 2, share  # a quarter by construction; 2x slack
        tasks.cancel_scope.cancel()
    # "settled" was said once no server was pending, not when they had merely connected
    assert len(settled) == 1 and settled[0][1] == (), settled
    assert "all their tools are searchable" in settled[0][0]
