"""Property tests: no text makes the parser or the engine raise, and select: stays in the pool."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from toolsearch.engine import ToolSearch
from toolsearch.query import parse_query, parse_select
from toolsearch.tool import Tool

POOL = [
    Tool("mcp__slack__send_message", "Send a message (to a channel) [fast]."),
    Tool("mcp__github__create_issue", "Create an issue: title & body.", search_hint="new bug"),
    Tool("mcp__db__run_sql", "Run SQL like SELECT * FROM t WHERE a ~ '^x$'."),
    Tool("NotebookEdit", "Edit a .ipynb cell.", search_hint="jupyter", should_defer=True),
    Tool("WebFetch", "Fetch a URL — ünïcödé 日本語.", should_defer=True),
    Tool("Read", "Read a file.", always_load=True),
]
ENGINE = ToolSearch(POOL, backend="keyword")
NAMES = {t.name for t in POOL}

specials = st.sampled_from(
    ["select:", "SELECT:", "mcp__", "+", "++", "\\b", "(", ")", "[", "*", "?", "$", "^", "|",
     '"', "'", "\x00", "\n", "\t", " ", ",", "日本", "é", "NEAR", "AND", "OR", "NOT", "-"]
)  # fmt: skip
queries = st.lists(st.one_of(st.text(max_size=12), specials), max_size=12).map("".join)


@given(queries)
def test_parser_never_raises_and_is_consistent(raw: str) -> None:
    parsed = parse_query(raw)
    assert len(parsed.required) + len(parsed.optional) == len(parsed.terms)
    assert all(term and not any(c.isspace() for c in term) for term in parsed.terms)
    assert list(parsed.scoring_terms) == list(parsed.required) + list(parsed.optional)


@given(queries, st.integers(min_value=1, max_value=100))
def test_search_never_raises(raw: str, k: int) -> None:
    result = ENGINE.search(raw, k)
    assert len(result.matches) <= max(k, len(POOL))
    assert set(result.names) <= NAMES


@given(st.lists(st.one_of(st.sampled_from(sorted(NAMES)), st.text(max_size=20)), max_size=8))
def test_select_never_returns_a_name_outside_the_pool(names: list[str]) -> None:
    raw = "select:" + ",".join(names)
    result = ENGINE.search(raw)
    wanted = parse_select(raw)
    assert wanted is not None
    assert set(result.names) <= NAMES
    assert result.names == list(dict.fromkeys(n for n in wanted if n in NAMES))


@settings(max_examples=10, deadline=None)
@given(st.text(min_size=1, max_size=20))
def test_100kb_queries(word: str) -> None:
    raw = (word + " ") * (100_000 // (len(word) + 1) + 1)
    assert len(raw) >= 100_000
    ENGINE.search(raw)
    ENGINE.search("+" + raw)
