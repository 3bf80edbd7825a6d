"""Pool updates cost in proportion to what changed, and give the same answers as a rebuild.

When one server of a large pool re-lists, ``ToolSearch.set_tools`` must not re-hash the other
servers' tools, re-index them in the backend, or drop their ``+required`` index; and whatever
sequence of updates ran, every query answers as on an engine built from scratch.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import toolsearch.required
import toolsearch.tool
from toolsearch.backend import Hit
from toolsearch.engine import ToolSearch
from toolsearch.query import ParsedQuery
from toolsearch.tool import Tool, mcp_tool_name

WORDS = ["create", "issue", "send", "note", "file", "list", "page", "sync"]


def server_tools(server: str, count: int, edition: int = 0) -> list[Tool]:
    return [
        Tool(
            mcp_tool_name(server, f"{WORDS[i % 8]}_{i}"),
            f"{WORDS[i % 8]} {WORDS[(i + 3) % 8]} on {server}" + (" new" if edition else ""),
            server=server,
        )
        for i in range(count)
    ]


class SpyBackend:
    """A keyword-free backend recording what it was asked to (re-)index."""

    def __init__(self) -> None:
        self.indexed: list[int] = []
        self.upserted: list[str] = []
        self.removed: list[str] = []

    def index(self, tools: Sequence[Tool]) -> None:
        self.indexed.append(len(tools))

    def upsert(self, tools: Sequence[Tool]) -> None:
        self.upserted.extend(t.name for t in tools)

    def remove(self, names: Iterable[str]) -> None:
        self.removed.extend(names)

    def search(self, query: ParsedQuery, k: int) -> list[Hit]:
        return []


def test_one_server_relisting_touches_only_that_server(monkeypatch: pytest.MonkeyPatch) -> None:
    changes: dict[str, list[int]] = {"built": [], "added": [], "discarded": []}
    real_index = toolsearch.required.TermIndex

    class CountingIndex(real_index):  # type: ignore[misc,valid-type]
        def __init__(self, tools: Any = ()) -> None:
            changes["built"].append(len(tools))
            super().__init__(tools)

        def add(self, tools: Any) -> list[int]:
            tools = list(tools)
            changes["added"].append(len(tools))
            return super().add(tools)

        def discard(self, ids: Any) -> None:
            ids = list(ids)
            changes["discarded"].append(len(ids))
            super().discard(ids)

    monkeypatch.setattr(toolsearch.required, "TermIndex", CountingIndex)
    servers = {f"s{n}": server_tools(f"s{n}", 50) for n in range(20)}
    spy = SpyBackend()
    engine = ToolSearch([t for tools in servers.values() for t in tools], backend=spy)
    engine.search("+create issue")  # builds the +required index
    assert changes["built"] == [1000]
    changes = {"built": [], "added": [], "discarded": []}
    hashed: list[int] = []
    real_sha = toolsearch.tool.hashlib.sha256
    monkeypatch.setattr(
        toolsearch.tool.hashlib, "sha256", lambda data: hashed.append(1) or real_sha(data)
    )
    engine.set_tools([t for tools in servers.values() for t in tools])  # nothing changed
    assert hashed == [] and spy.upserted == [] and spy.removed == [] and spy.indexed == [1000]
    servers["s3"] = server_tools("s3", 49, edition=1)  # one tool gone, every description new
    engine.set_tools([t for tools in servers.values() for t in tools])
    assert len(hashed) == 49
    assert sorted(spy.upserted) == sorted(t.name for t in servers["s3"])
    assert spy.removed == ["mcp__s3__issue_49"]
    assert spy.indexed == [1000]  # never rebuilt
    engine.search("+create issue")
    # the +required index changed in place for that server's tools only: 50 out, 49 in
    assert changes["built"] == [] and sum(changes["discarded"]) == 50
    assert sum(changes["added"]) == 49


tool_sets = st.lists(
    st.tuples(st.sampled_from(["a", "b", "c", "d"]), st.integers(0, 6), st.integers(0, 2)),
    min_size=1,
    max_size=8,
)
QUERIES = ["+create issue", "select:mcp__a__create_0,mcp__b__note_3", "mcp__c", "send note"]


def pool_of(spec: list[tuple[str, int, int]], cache: dict[Any, list[Tool]]) -> list[Tool]:
    tools: list[Tool] = [Tool("Local", "create a local issue", should_defer=True)]
    for server, count, edition in spec:
        key = (server, count, edition)
        cache.setdefault(key, server_tools(server, count, edition))  # same objects on reuse
        tools.extend(cache[key])
    return tools


PROPERTY = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPERTY
@given(
    steps=st.lists(tool_sets, min_size=2, max_size=6), backend=st.sampled_from(["keyword", "bm25"])
)
def test_any_sequence_of_updates_answers_like_a_rebuild(
    steps: list[list[tuple[str, int, int]]], backend: str
) -> None:
    cache: dict[Any, list[Tool]] = {}
    engine = ToolSearch(pool_of(steps[0], cache), backend=backend)
    for spec in steps[1:]:
        pool = pool_of(spec, cache)
        engine.set_tools(pool)
        fresh = ToolSearch(pool, backend=backend)
        assert [t.name for t in engine.pool] == [t.name for t in fresh.pool]
        assert [t.name for t in engine.deferred] == [t.name for t in fresh.deferred]
        for query in QUERIES + [t.name.upper() for t in pool[:3]]:
            assert engine.search(query, 20).to_json() == fresh.search(query, 20).to_json(), query
