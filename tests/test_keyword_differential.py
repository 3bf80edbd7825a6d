"""The fast keyword backend against a naive transcription of the rules, on random queries."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from keyword_reference import naive_keyword_search

from toolsearch.backends.keyword import KeywordBackend
from toolsearch.query import parse_query
from toolsearch.tool import Tool, pool_order

WORDS = [
    "send", "message", "messages", "slack", "create", "issue", "issues", "file", "read",
    "list", "get", "update", "delete", "search", "query", "user", "page", "notebook", "edit",
    "jupyter", "calendar", "event", "mail", "email", "repo", "pull", "request", "run", "c++",
    "a.b", "naïve", "日本", "x-ray", "re", "e", "sql", "db", "web", "fetch", "url",
]  # fmt: skip
SERVERS = ["slack", "github", "gmail", "db", "web-tools", "jira", "x"]


def generated_catalogue(rng: random.Random, n: int) -> list[Tool]:
    tools: dict[str, Tool] = {}
    while len(tools) < n:
        parts = rng.sample(WORDS[:28], rng.randint(1, 3))
        kind = rng.random()
        if kind < 0.6:
            name = f"mcp__{rng.choice(SERVERS)}__{'_'.join(p.replace('+', '') for p in parts)}"
        elif kind < 0.8:
            name = "".join(p.capitalize() for p in parts if p.isalpha()) or "Tool"
        else:
            name = "_".join(p for p in parts if p.isalpha()) or "tool"
        description = " ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 12)))
        if rng.random() < 0.3:
            description = description.upper()
        hint = " ".join(rng.sample(WORDS, 3)) if rng.random() < 0.3 else None
        tools[name] = Tool(name, description, search_hint=hint, should_defer=True)
    return pool_order(tools.values())


def random_query(rng: random.Random) -> str:
    terms = []
    for _ in range(rng.randint(0, 5)):
        term = rng.choice(WORDS)
        roll = rng.random()
        if roll < 0.15:
            term = "+" + term
        elif roll < 0.2:
            term = term.upper()
        elif roll < 0.25:
            term = term[: rng.randint(1, len(term))]
        terms.append(term)
    if rng.random() < 0.05:
        terms.append("+")
    return rng.choice([" ", "  ", "\t"]).join(terms)


@pytest.mark.parametrize("seed", range(5))
def test_fast_scorer_equals_naive_transcription(seed: int) -> None:
    rng = random.Random(seed)
    tools = generated_catalogue(rng, 80)
    backend = KeywordBackend()
    backend.index(tools)
    for _ in range(80):
        query = random_query(rng)
        k = rng.choice([1, 5, 100])
        expected = naive_keyword_search(tools, query, k)
        assert backend.search(parse_query(query), k) == expected, query
