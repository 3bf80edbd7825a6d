"""Engine behaviour shared by every backend: argument checks, incremental pool updates."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import pytest

from toolsearch.backend import BaseBackend, Hit
from toolsearch.engine import ToolSearch, tool_search_tool
from toolsearch.errors import QueryError
from toolsearch.query import ParsedQuery
from toolsearch.tool import Tool

POOL = [Tool(f"mcp__srv__tool_{i}", f"does thing {i}") for i in range(8)]


@pytest.mark.parametrize("bad", [0, -1, 101, True, 2.5, "3"])
def test_max_results_outside_range_is_a_clear_error(bad: object) -> None:
    engine = ToolSearch(POOL, backend="keyword")
    with pytest.raises(QueryError, match="max_results"):
        engine.search("tool", bad)  # type: ignore[arg-type]


def test_max_results_above_catalogue_returns_all() -> None:
    engine = ToolSearch(POOL, backend="keyword")
    assert len(engine.search("tool", 100).matches) == len(POOL)


def test_query_must_be_text() -> None:
    with pytest.raises(QueryError, match="string"):
        ToolSearch(POOL, backend="keyword").search(None)  # type: ignore[arg-type]


def test_cap_is_configurable() -> None:
    engine = ToolSearch(POOL, backend="keyword", max_results_cap=3)
    with pytest.raises(QueryError, match="between 1 and 3"):
        engine.search("tool", 4)
    assert tool_search_tool(3).input_schema["properties"]["max_results"]["maximum"] == 3


class CountingBackend(BaseBackend):
    """Records what the engine asks of an incremental backend."""

    name = "counting"
    incremental = True

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[str, list[str]]] = []

    def _build(self, tools: list[Tool]) -> None:
        self.built = tools

    def index(self, tools: Sequence[Tool]) -> None:
        self.calls.append(("index", [t.name for t in tools]))
        super().index(tools)

    def upsert(self, tools: Sequence[Tool]) -> None:
        self.calls.append(("upsert", [t.name for t in tools]))

    def remove(self, names: Iterable[str]) -> None:
        self.calls.append(("remove", list(names)))

    def search(self, query: ParsedQuery, k: int) -> list[Hit]:
        return [Hit(t.name, 1.0) for t in self.built[:k]]


def test_incremental_backend_gets_only_the_changes() -> None:
    backend = CountingBackend()
    engine = ToolSearch(POOL, backend=backend)
    changed = [*POOL[1:], Tool("mcp__srv__tool_0", "changed"), Tool("mcp__new__x", "new")]
    engine.set_tools(changed[1:])  # drop tool_1
    assert backend.calls == [
        ("index", [t.name for t in POOL]),
        ("remove", ["mcp__srv__tool_1"]),
        ("upsert", ["mcp__new__x", "mcp__srv__tool_0"]),
    ]


class NoisyBackend(BaseBackend):
    """Returns unknown names and zero scores, which the engine must never pass on."""

    name = "noisy"

    def _build(self, tools: list[Tool]) -> None:
        self.built = tools

    def search(self, query: ParsedQuery, k: int) -> list[Hit]:
        return [Hit("mcp__ghost__tool", 9.0), Hit(self.built[0].name, 0.0)] + [
            Hit(t.name, 1.0) for t in self.built[1:k]
        ]


def test_engine_filters_unknown_names_and_zero_scores() -> None:
    result = ToolSearch(POOL, backend=NoisyBackend()).search("anything", 3)
    assert "mcp__ghost__tool" not in result.names
    assert POOL[0].name not in result.names


def test_required_filter_applies_to_any_backend() -> None:
    tools = [*POOL, Tool("mcp__zzz__thing", "special")]
    result = ToolSearch(tools, backend=NoisyBackend()).search("+special x", 5)
    assert result.names == ["mcp__zzz__thing"]


def test_backend_options_need_a_backend_name() -> None:
    with pytest.raises(QueryError, match="backend_options"):
        ToolSearch(POOL, backend=NoisyBackend(), backend_options={"x": 1})
