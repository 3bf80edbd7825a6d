"""A query term costs what it could match: whole-word matching compiles ``\\b<term>\\b`` only for
a text that holds the term literally, and caches only short terms' patterns — so a megabyte
term neither compiles nor stays in memory, and every term still scores as the reference does."""

from __future__ import annotations

import pytest
from keyword_reference import naive_keyword_search

from toolsearch.backend import Hit
from toolsearch.engine import ToolSearch
from toolsearch.matching import MAX_CACHED_TERM, TermIndex, whole_word_pattern
from toolsearch.query import MAX_QUERY_CHARS, parse_query
from toolsearch.tool import Tool

LONG_TEXT = "-".join(["a"] * 3000)  # 5,999 characters, one non-word term
TOOLS = [
    Tool("mcp__fs__read", "read a file -- or c++ code, e-mail: a-b", should_defer=True),
    Tool("mcp__fs__write", "write -- files; c++", search_hint="e-mail a-b", should_defer=True),
    Tool("Long", f"starts {LONG_TEXT} ends", should_defer=True),
    Tool("Plain", "nothing in common", should_defer=True),
]


def keyword_hits(query: str, k: int = 10) -> list[Hit]:
    engine = ToolSearch(TOOLS, backend="keyword")
    return engine.backend.search(parse_query(query), k)


@pytest.mark.parametrize(
    "query",
    ["--", "c++", "e-mail", "a-b", "+a-b read", "--- c++ e-mail", LONG_TEXT, f"+{LONG_TEXT}"],
)
def test_non_word_terms_score_as_the_reference(query: str) -> None:
    assert keyword_hits(query) == naive_keyword_search(TOOLS, query, 10)


def test_a_huge_term_is_neither_compiled_nor_cached() -> None:
    whole_word_pattern.cache_clear()
    for index in range(5):
        query = "-" * 1_000_000 + "+" * index  # no text holds it: nothing to compile
        assert keyword_hits(query) == []
        # the longest term a query can hold (MAX_QUERY_CHARS), required: still nothing compiled
        term = "-" * (MAX_QUERY_CHARS - len("read +") - index) + "+" * index
        assert keyword_hits(f"read +{term}") == []
    assert whole_word_pattern.cache_info().currsize == 0
    index = TermIndex(TOOLS)
    assert list(index.description_word(LONG_TEXT)) == [2]  # compiled once, not cached
    assert whole_word_pattern.cache_info().currsize == 0
    assert list(index.description_word("a-b")) == [0]
    assert whole_word_pattern.cache_info().currsize == 1
    assert len("a-b") <= MAX_CACHED_TERM < len(LONG_TEXT)
