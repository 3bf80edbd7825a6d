"""The keyword backend's ``upsert``/``remove`` change only the tools they name, and any sequence
of them answers every query exactly as an index built from scratch."""

from __future__ import annotations

import random
import sys
from dataclasses import replace
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from test_keyword_differential import WORDS, generated_catalogue, random_query

from toolsearch.backends.keyword import KeywordBackend
from toolsearch.query import parse_query
from toolsearch.tool import Tool, pool_order

EXTRA_QUERIES = ["c++", "a.b", "x-ray", "+x-ray send", "++", "-", "naïve 日本", "+c++ read"]


def _fresh(tools: list[Tool]) -> KeywordBackend:
    backend = KeywordBackend()
    backend.index(pool_order(tools))
    return backend


def _edit(rng: random.Random, tool: Tool) -> Tool:
    description = " ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 10)))
    hint = " ".join(rng.sample(WORDS, 2)) if rng.random() < 0.4 else None
    return replace(tool, description=description, search_hint=hint)


def _assert_same(live: KeywordBackend, tools: dict[str, Tool], rng: random.Random) -> None:
    fresh = _fresh(list(tools.values()))
    assert dict(live.tools) == dict(fresh.tools)
    for query in [random_query(rng) for _ in range(25)] + EXTRA_QUERIES:
        for k in (1, 5, 200):
            parsed = parse_query(query)
            assert live.search(parsed, k) == fresh.search(parsed, k), (query, k)


@pytest.mark.parametrize("seed", range(6))
def test_random_update_sequences_answer_like_a_fresh_index(seed: int) -> None:
    rng = random.Random(seed)
    universe = generated_catalogue(rng, 120)
    current = {t.name: t for t in rng.sample(universe, 40)}
    live = _fresh(list(current.values()))
    for _ in range(12):
        roll = rng.random()
        if roll < 0.45:
            batch = rng.sample(universe, rng.randint(1, 15))
            batch += [
                _edit(rng, t) for t in rng.sample(list(current.values()), min(3, len(current)))
            ]
            live.upsert(batch)
            current.update((t.name, t) for t in batch)
        else:
            names = rng.sample(sorted(current), min(len(current), rng.randint(0, 20)))
            live.remove([*names, "no_such_tool"])
            for name in names:
                del current[name]
        _assert_same(live, current, rng)


def test_emptying_and_refilling_the_index() -> None:
    rng = random.Random(7)
    tools = generated_catalogue(rng, 60)
    live = _fresh(tools)
    live.remove([t.name for t in tools])
    assert live.search(parse_query("send message"), 5) == []
    live.upsert(tools[::-1])
    _assert_same(live, {t.name: t for t in tools}, rng)


def test_updates_after_an_index_not_in_pool_order_equal_a_rebuild() -> None:
    rng = random.Random(3)
    tools = generated_catalogue(rng, 50)
    live = KeywordBackend()
    live.index(tools[::-1])  # ties follow the given order until the first upsert
    live.remove([tools[0].name])
    live.upsert([_edit(rng, tools[1])])
    current = {t.name: t for t in tools[1:]}
    current[tools[1].name] = live.tools[tools[1].name]
    _assert_same(live, current, rng)


def test_updates_never_rebuild_the_index(monkeypatch: pytest.MonkeyPatch) -> None:
    tools = generated_catalogue(random.Random(1), 200)
    live = _fresh(tools[:150])
    assert KeywordBackend.incremental is True

    def no_rebuild(self: KeywordBackend, tools: list[Tool]) -> None:
        raise AssertionError(f"rebuilt the index of {len(tools)} tools")

    monkeypatch.setattr(KeywordBackend, "_build", no_rebuild)
    live.upsert(tools[150:])
    live.upsert([replace(tools[0], description="edited")])
    live.remove([tools[1].name])
    assert len(live.tools) == 199


def test_parts_no_tool_has_any_more_are_dropped_and_answers_stay_exact() -> None:
    tools = [Tool(f"mcp__s__tool_{i}x", f"tool number {i}", should_defer=True) for i in range(3000)]
    live = _fresh(tools)
    live.remove([t.name for t in tools[500:]])  # most parts now belong to no tool
    live.upsert([replace(tools[2999], description="back again")])
    kept = {t.name: t for t in [*tools[:500], replace(tools[2999], description="back again")]}
    fresh = _fresh(list(kept.values()))
    assert len(live._terms._vocabulary) < 1600  # the vocabulary was rebuilt from live parts
    for query in ["1", "29x", "99", "2999x", "tool 12", "+x 4", "back"]:
        assert live.search(parse_query(query), 600) == fresh.search(parse_query(query), 600)
