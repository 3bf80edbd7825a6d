"""Every lexical backend reads at most the first 1,024 terms of a query, so a megabyte of
query text cannot stall the searches of everyone else sharing the engine."""

from __future__ import annotations

import pytest

from toolsearch.engine import ToolSearch
from toolsearch.tokenize import MAX_QUERY_TOKENS
from toolsearch.tool import Tool

TOOLS = [
    Tool("mcp__gh__create_issue", "Create a GitHub issue"),
    Tool("mcp__notes__write", "Write a note"),
]


@pytest.mark.parametrize("backend", ["keyword", "bm25"])
def test_terms_past_the_cap_are_not_read(backend: str) -> None:
    engine = ToolSearch(TOOLS, backend=backend)
    filler = " ".join(f"zz{i}" for i in range(MAX_QUERY_TOKENS))
    assert engine.search("note").names == ["mcp__notes__write"]
    assert engine.search(f"{filler} note").names == []
    assert engine.search(f"note {filler}").names == ["mcp__notes__write"]
    required = " ".join(f"+zz{i}" for i in range(MAX_QUERY_TOKENS))
    assert engine.search(f"note {required}").names == []  # the 1,024 required terms count
    assert engine.search(f"{required} +note").names == []


def test_a_megabyte_query_is_answered() -> None:
    engine = ToolSearch(TOOLS, backend="keyword")
    huge = "issue " + "x" * 1_000_000 + " " + " ".join(["+qqq", "b"] * 50_000)
    # only the first MAX_QUERY_CHARS are read: the required "+qqq" past them is not
    assert engine.search(huge).names == ["mcp__gh__create_issue"]
    assert engine.search("+qqq issue " + "x" * 1_000_000).names == []  # "+qqq" is read
    assert engine.search("issue " + "y " * 500_000).names == ["mcp__gh__create_issue"]


@pytest.mark.parametrize("backend", ["keyword", "bm25", "fts5", "embedding"])
def test_a_lone_surrogate_in_a_query_is_dropped_by_every_backend(backend: str) -> None:
    from toolsearch.backends.embedding import EmbeddingBackend, HashingEncoder

    chosen = EmbeddingBackend(encoder=HashingEncoder(), cache_dir=False)
    engine = ToolSearch(TOOLS, backend=chosen if backend == "embedding" else backend)
    assert engine.search("\ud800").names == []
    assert "mcp__notes__write" in engine.search("write \ud800 note").names
