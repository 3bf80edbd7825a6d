"""The bm25 backend: scores against rank-bm25 on the same tokens, variants, incremental updates."""

from __future__ import annotations

import math
import random
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

rank_bm25 = pytest.importorskip("rank_bm25")
pytest.importorskip("numpy")

from toolsearch.backend import Hit  # noqa: E402
from toolsearch.backends.bm25 import VARIANTS, BM25Backend  # noqa: E402
from toolsearch.catalog import load_catalog  # noqa: E402
from toolsearch.engine import ToolSearch  # noqa: E402
from toolsearch.errors import BackendError, ConfigError  # noqa: E402
from toolsearch.query import parse_query  # noqa: E402
from toolsearch.registry import load_backend  # noqa: E402
from toolsearch.tokenize import query_tokens  # noqa: E402
from toolsearch.tool import Tool, pool_order  # noqa: E402

STARTER = Path(__file__).resolve().parents[1] / "datasets" / "starter"

QUERIES = [
    "send a slack message to the team channel",
    "create github issue",
    "+github pull request review",
    "read file",
    "search the web",
    "calendar event tomorrow",
    "notebook jupyter cell",
    "delete",
    "mcp",
    "nothing matches zzzqqq",
    "message message message",
]

WEATHER = [
    Tool("mcp__wx__forecast", "Weather forecast for a city."),
    Tool("mcp__wx__current", "Current weather conditions."),
    Tool("mcp__wx__alerts", "Severe weather alerts."),
    Tool("mcp__maps__route", "Driving route between two places."),
    Tool("mcp__maps__geocode", "Turn an address into coordinates."),
    Tool("mcp__mail__send", "Send an email message."),
]


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


@pytest.fixture(scope="module")
def catalogue() -> list[Tool]:
    return pool_order(load_catalog(STARTER))


def _reference_scores(
    bags: list[list[str]], tokens: list[str], variant: str, k1: float, b: float
) -> list[float]:
    """rank-bm25, called directly on the same token bags."""
    if variant == "okapi":
        model = rank_bm25.BM25Okapi(bags, k1=k1, b=b, epsilon=0.25)
    elif variant == "bm25l":
        model = rank_bm25.BM25L(bags, k1=k1, b=b, delta=0.5)
    else:
        # Lucene = BM25Okapi's term-frequency part with Lucene's idf. Check the idf table
        # against the formula first, so the reference does not rest on our reading of BM25L.
        model = rank_bm25.BM25Okapi(bags, k1=k1, b=b)
        lucene = rank_bm25.BM25L(bags, k1=k1, b=b).idf
        total = len(bags)
        for term, idf in lucene.items():
            n = sum(1 for bag in bags if term in bag)
            assert _close(idf, math.log(1 + (total - n + 0.5) / (n + 0.5)))
        model.idf = lucene
    return [float(x) for x in model.get_scores(tokens)]


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize(("k1", "b"), [(1.2, 0.75), (1.5, 0.3), (0.8, 1.0)])
def test_scores_equal_rank_bm25(catalogue: list[Tool], variant: str, k1: float, b: float) -> None:
    # the reference reads raw tokens: stems and stop words are checked on their own below
    backend = BM25Backend(variant=variant, k1=k1, b=b, stem=False, stopwords=False)
    backend.index(catalogue)
    bags = backend.token_bags(catalogue)
    for raw in QUERIES:
        query = parse_query(raw)
        want = _reference_scores(bags, query_tokens(query), variant, k1, b)
        got = backend.score_all(query)
        assert list(got) == [t.name for t in catalogue]
        for (name, score), expected in zip(got.items(), want, strict=True):
            assert _close(score, expected), (raw, name, score, expected)


@pytest.mark.parametrize("variant", VARIANTS)
def test_numpy_engine_equals_rank_bm25_engine(catalogue: list[Tool], variant: str) -> None:
    fast = BM25Backend(variant=variant)
    slow = BM25Backend(variant=variant, engine="rank_bm25")
    fast.index(catalogue)
    slow.index(catalogue)
    for raw in QUERIES:
        got = fast.search(parse_query(raw), 10)
        want = slow.search(parse_query(raw), 10)
        assert [h.name for h in got] == [h.name for h in want], raw
        assert all(_close(g.score, w.score) for g, w in zip(got, want, strict=True))


def test_scores_equal_rank_bm25_on_a_real_catalogue() -> None:
    # A catalogue with real vocabulary statistics (hundreds of tools, long descriptions).
    from toolsearch.datasets import shared_datasets_dir

    shared = shared_datasets_dir()
    folder = shared / "mcp-docker-catalog" if shared is not None else STARTER
    tools = pool_order(load_catalog(folder))[:300]
    backend = BM25Backend(stem=False, stopwords=False)
    backend.index(tools)
    bags = backend.token_bags(tools)
    for raw in ["list issues in a project", "create a payment refund", "query database table"]:
        query = parse_query(raw)
        want = _reference_scores(bags, query_tokens(query), "lucene", 1.2, 0.75)
        got = list(backend.score_all(query).values())
        assert all(_close(g, w) for g, w in zip(got, want, strict=True))


def test_lucene_idf_keeps_a_term_in_half_the_tools() -> None:
    # "weather" is in 3 of 6 tools: BM25Okapi's idf is ln(3.5/3.5) = 0, so a perfect match
    # scores nothing; Lucene's idf stays positive.
    okapi = BM25Backend(variant="okapi")
    lucene = BM25Backend()
    okapi.index(WEATHER)
    lucene.index(WEATHER)
    query = parse_query("weather")
    assert okapi.search(query, 5) == []
    names = [h.name for h in lucene.search(query, 5)]
    assert sorted(names) == ["mcp__wx__alerts", "mcp__wx__current", "mcp__wx__forecast"]


def test_every_tool_sharing_a_token_scores_above_zero() -> None:
    tools = [Tool(f"mcp__s__t{i}", "common word here") for i in range(8)]
    backend = BM25Backend()
    backend.index(tools)
    hits = backend.search(parse_query("common"), 100)
    assert len(hits) == 8
    assert all(h.score > 0 for h in hits)


def test_name_parts_outweigh_description_words() -> None:
    tools = [
        Tool("mcp__files__archive", "Store an old invoice document."),
        Tool("mcp__billing__invoice", "Store a document."),
        Tool("mcp__misc__noop", "Does nothing at all."),
        Tool("mcp__misc__echo", "Repeats what it hears."),
        Tool("mcp__misc__ping", "Checks a host is up."),
    ]
    backend = BM25Backend()
    backend.index(tools)
    assert backend.search(parse_query("invoice"), 2)[0].name == "mcp__billing__invoice"
    flat = BM25Backend(field_weights={"name": 1, "description": 4})
    flat.index(tools)
    assert flat.search(parse_query("invoice"), 2)[0].name == "mcp__files__archive"


def test_parameter_names_are_searchable() -> None:
    tools = [
        Tool("mcp__a__one", "Does a thing.", {"properties": {"zipCode": {}}}),
        *[Tool(f"mcp__a__other{i}", "Does a thing.") for i in range(4)],
    ]
    backend = BM25Backend()
    backend.index(tools)
    assert [h.name for h in backend.search(parse_query("zip code"), 5)] == ["mcp__a__one"]
    off = BM25Backend(field_weights={"params": 0})
    off.index(tools)
    assert off.search(parse_query("zip code"), 5) == []


def test_cjk_without_spaces() -> None:
    tools = [
        Tool("mcp__cn__weather", "查询天气预报和气温"),
        Tool("mcp__cn__stocks", "查询股票价格"),
        Tool("mcp__cn__news", "今日新闻头条"),
        Tool("mcp__jp__translate", "日本語のテキストを翻訳する"),
        Tool("mcp__en__mail", "Send an email."),
    ]
    backend = BM25Backend()
    backend.index(tools)
    assert backend.search(parse_query("天气"), 1)[0].name == "mcp__cn__weather"
    assert backend.search(parse_query("股票"), 1)[0].name == "mcp__cn__stocks"
    assert backend.search(parse_query("テキスト 翻訳"), 1)[0].name == "mcp__jp__translate"


def _changed(tool: Tool, i: int) -> Tool:
    return replace(tool, description=f"{tool.description} revised {i} message")


@pytest.mark.parametrize("variant", VARIANTS)
def test_incremental_equals_rebuild_exactly(catalogue: list[Tool], variant: str) -> None:
    rng = random.Random(7)
    half = catalogue[: len(catalogue) // 2]
    rest = catalogue[len(catalogue) // 2 :]
    live = BM25Backend(variant=variant)
    live.index(half)
    live.upsert(list(reversed(rest)))  # upsert order must not matter
    changed = [_changed(t, i) for i, t in enumerate(rng.sample(catalogue, 5))]
    live.upsert(changed)
    removed = [t.name for t in rng.sample(catalogue, 4)]
    live.remove([*removed, "no_such_tool"])
    final = {t.name: t for t in catalogue}
    final.update((t.name, t) for t in changed)
    for name in removed:
        final.pop(name)
    rebuilt = BM25Backend(variant=variant)
    rebuilt.index(pool_order(final.values()))
    assert set(live.tools) == set(final)
    for raw in [*QUERIES, "revised message"]:
        query = parse_query(raw)
        assert live.search(query, 50) == rebuilt.search(query, 50), raw
        assert live.score_all(query) == {
            name: rebuilt.score_all(query)[name] for name in live.score_all(query)
        }


def test_incremental_equals_rebuild_across_compaction() -> None:
    base = [
        Tool(f"mcp__srv{i % 7}__tool_{i}", f"Handles item {i} of kind {i % 5}.") for i in range(600)
    ]
    live = BM25Backend()
    live.index(base[:100])
    # Enough upserts to trigger segment merges several times, interleaved with removals.
    for start in range(100, 600, 50):
        live.upsert(base[start : start + 50])
        live.remove([base[start - 3].name, base[start - 40].name])
    live.upsert([_changed(base[5], 0), _changed(base[550], 1)])
    expected = {t.name: t for t in base}
    for start in range(100, 600, 50):
        expected.pop(base[start - 3].name, None)
        expected.pop(base[start - 40].name, None)
    expected[base[5].name] = _changed(base[5], 0)
    expected[base[550].name] = _changed(base[550], 1)
    rebuilt = BM25Backend()
    rebuilt.index(pool_order(expected.values()))
    for raw in ["handles item", "kind 3", "revised message", "tool 42", "srv3"]:
        query = parse_query(raw)
        assert live.search(query, 40) == rebuilt.search(query, 40), raw


def test_ties_keep_pool_order_whatever_the_indexing_order() -> None:
    tools = [Tool(f"mcp__s{c}__probe", "Checks the status.") for c in "edcba"]
    tools.append(Tool("probe_status", "Checks the status.", should_defer=True))
    backend = BM25Backend(field_weights={"server": 0, "name": 0})
    backend.index(list(reversed(tools)))
    hits = backend.search(parse_query("status"), 10)
    assert len({h.score for h in hits}) == 1
    assert [h.name for h in hits] == [t.name for t in pool_order(tools)]
    backend.upsert([tools[0]])
    assert [h.name for h in backend.search(parse_query("status"), 10)] == [
        t.name for t in pool_order(tools)
    ]


def test_large_ties_keep_pool_order() -> None:
    # More tied tools than are ordered in Python: the numpy path must agree on pool order.
    tools = [Tool(f"mcp__s{i:03d}__probe", "Checks the status.") for i in range(400)]
    tools += [Tool(f"probe_{i:03d}", "Checks the status.", should_defer=True) for i in range(5)]
    backend = BM25Backend(field_weights={"server": 0, "name": 0})
    backend.index(list(reversed(tools)))
    want = [t.name for t in pool_order(tools)]
    assert [h.name for h in backend.search(parse_query("status"), 8)] == want[:8]
    backend.upsert([tools[0]])  # now with a delta segment
    assert [h.name for h in backend.search(parse_query("status"), 8)] == want[:8]


def test_top_k_matches_a_full_sort(catalogue: list[Tool]) -> None:
    # The sampled threshold in top-k selection must never drop a hit a naive sort would keep.
    from toolsearch.synth import scale_catalog

    tools = pool_order(scale_catalog(catalogue, 3000, seed=3))
    backend = BM25Backend()
    backend.index(tools)
    order = {t.name: i for i, t in enumerate(tools)}
    for raw in ["message", "create issue", "the a to", "file read write", "zz"]:
        query = parse_query(raw)
        scores = backend.score_all(query)
        naive = sorted(
            (name for name, score in scores.items() if score > 0),
            key=lambda n: (-scores[n], order[n]),
        )
        for k in (1, 5, 17, 400):
            assert [h.name for h in backend.search(query, k)] == naive[:k], (raw, k)


def test_empty_and_degenerate_catalogues() -> None:
    backend = BM25Backend()
    assert backend.search(parse_query("anything"), 5) == []
    backend.index([])
    assert backend.search(parse_query("anything"), 5) == []
    backend.index([Tool("x"), Tool("y")])  # names only: "x", "y"
    assert backend.search(parse_query("x"), 5)[0].name == "x"
    backend.remove(["x", "y"])
    assert backend.search(parse_query("x"), 5) == []
    slow = BM25Backend(engine="rank_bm25")
    slow.index([])
    assert slow.search(parse_query("x"), 5) == []


def test_duplicate_names_in_one_call_keep_the_last() -> None:
    backend = BM25Backend()
    backend.index([Tool("mcp__a__x", "first words"), Tool("mcp__a__x", "second words")])
    assert list(backend.tools) == ["mcp__a__x"]
    assert backend.search(parse_query("first"), 5) == []
    assert backend.search(parse_query("second"), 5)[0].name == "mcp__a__x"


def test_through_tool_search_incrementally(catalogue: list[Tool]) -> None:
    backend = BM25Backend()
    search = ToolSearch(catalogue, backend=backend)
    first = search.search("slack message").names
    assert first and first[0].startswith("mcp__slack")
    edited = [
        replace(t, description="Posts a parrot emoji") if t.name == first[0] else t
        for t in catalogue
    ]
    search.set_tools(edited)
    assert search.search("parrot").names == [first[0]]
    assert search.search("parrot emoji").names[0] == first[0]


def test_options_are_validated() -> None:
    with pytest.raises(ConfigError, match="unknown bm25 variant 'bm25plus'"):
        BM25Backend(variant="bm25plus")
    with pytest.raises(ConfigError, match="engine"):
        BM25Backend(engine="lucene")
    with pytest.raises(ConfigError, match="k1 must be at least 0"):
        BM25Backend(k1=-1)
    with pytest.raises(ConfigError, match=r"b must be between 0\.0 and 1\.0"):
        BM25Backend(b=1.5)
    with pytest.raises(ConfigError, match="finite number"):
        BM25Backend(k1=float("inf"))
    with pytest.raises(ConfigError, match="unknown field"):
        BM25Backend(field_weights={"title": 2})
    with pytest.raises(ConfigError, match="integer"):
        BM25Backend(field_weights={"name": 2.5})
    with pytest.raises(BackendError, match="rejected options"):
        load_backend("bm25", k2=3)


def test_params_report_the_options() -> None:
    backend = load_backend("bm25", variant="okapi", k1=1.5, field_weights={"name": 4})
    params = backend.params()  # type: ignore[attr-defined]
    assert params["variant"] == "okapi"
    assert params["k1"] == 1.5
    assert params["epsilon"] == 0.25
    assert params["field_weights"]["name"] == 4  # type: ignore[index]
    assert params["engine"] == "numpy"
    assert "delta" not in params


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=300), st.integers(min_value=-3, max_value=50))
def test_search_never_raises(raw: str, k: int) -> None:
    backend = _SHARED_BACKEND
    hits = backend.search(parse_query(raw), k)
    assert len(hits) <= max(k, 0)
    assert all(isinstance(h, Hit) and h.score > 0 for h in hits)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


_SHARED_BACKEND = BM25Backend()
_SHARED_BACKEND.index(pool_order(load_catalog(STARTER)))


def test_stemming_and_stopwords_match_inflections() -> None:
    from toolsearch.backends.bm25 import BM25Backend
    from toolsearch.query import parse_query
    from toolsearch.tool import Tool

    tools = [
        Tool("mcp__cal__create_booking", "Creates bookings for a room."),
        Tool("mcp__cal__list_rooms", "Lists the rooms of the office."),
    ]
    plain = BM25Backend(stem=False, stopwords=False)
    stemmed = BM25Backend()  # English stems and stop words by default, as stock BM25 does
    for backend in (plain, stemmed):
        backend.index(tools)
    query = parse_query("can you book the room")
    assert plain.search(query, 2)[0].name == "mcp__cal__list_rooms"
    assert stemmed.search(query, 2)[0].name == "mcp__cal__create_booking"
    assert stemmed.search(parse_query("the of to"), 2) == []
    assert stemmed.params()["stem"] is True and plain.params()["stopwords"] is False


def test_parameter_descriptions_count_as_description_words() -> None:
    from toolsearch.backends.bm25 import BM25Backend
    from toolsearch.errors import ConfigError
    from toolsearch.query import parse_query
    from toolsearch.tool import Tool

    schema = {"properties": {"q": {"type": "string", "description": "ISBN of the book"}}}
    tools = [
        Tool("lookup", "Looks a record up.", input_schema=schema),
        Tool("find_book", "Finds a book record."),
    ]
    described, words_only = BM25Backend(), BM25Backend(param_descriptions=False)
    for backend in (described, words_only):
        backend.index(tools)
    query = parse_query("isbn")
    assert [hit.name for hit in described.search(query, 2)] == ["lookup"]
    assert words_only.search(query, 2) == []
    # weighted like the description: zero description weight leaves them out too
    silent = BM25Backend(field_weights={"description": 0})
    silent.index(tools)
    assert silent.search(query, 2) == []
    assert described.params()["param_descriptions"] is True
    with pytest.raises(ConfigError, match="param_descriptions must be true or false"):
        BM25Backend(param_descriptions=1)  # type: ignore[arg-type]


def test_stem_option_must_be_boolean() -> None:
    import pytest

    from toolsearch.backends.bm25 import BM25Backend
    from toolsearch.errors import ConfigError

    with pytest.raises(ConfigError, match="stem must be true or false"):
        BM25Backend(stem="yes")  # type: ignore[arg-type]


@pytest.mark.parametrize("engine", ["numpy", "rank_bm25"])
@pytest.mark.parametrize("stem", [True, False])
def test_a_brand_the_catalogue_knows_is_not_matched_by_its_parts(engine: str, stem: bool) -> None:
    """A catalogue that has the word ``github`` reads "GitHub" as it, not ``git`` + ``hub``, which
    matched every tool of a server called ``git`` (issue 54); a camel-case word the catalogue
    does not know is still read by its parts."""
    tools = [
        Tool("mcp__git__git_commit", "Record changes to the repository."),
        Tool("mcp__git__git_status", "Show the working tree status."),
        Tool("mcp__github__create_issue", "Open a new issue in a GitHub repository."),
    ]
    backend = BM25Backend(engine=engine, stem=stem)
    backend.index(tools)
    found = [hit.name for hit in backend.search(parse_query("open an issue on GitHub"), 5)]
    assert found == ["mcp__github__create_issue"]
    assert backend.score_all(parse_query("GitHub"))["mcp__git__git_commit"] == 0
    assert backend.search(parse_query("GitStatus"), 5)[0].name.endswith("status")
    backend.remove(["mcp__github__create_issue"])
    if engine == "rank_bm25":  # rebuilt without the word: "GitHub" is read by its parts again
        assert backend.search(parse_query("GitHub"), 5)
