"""One contract, every registered backend.

Each case runs once per backend of the ``toolsearch.backends`` entry-point group (test ids are
the backend names). A backend whose extra is not installed is skipped with the missing module;
one whose module does not import is skipped with the import error. The embedding backend runs
with the deterministic :class:`~toolsearch.backends.embedding.HashingEncoder` (fake the model,
not the backend), hybrid fuses bm25 with keyword and postgres runs against a real server
(the ``postgres_url`` fixture) with hashed vectors.
"""

from __future__ import annotations

import copy
import importlib.util
import math
import uuid
from collections.abc import Callable, Sequence
from dataclasses import replace
from itertools import pairwise
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolsearch.backend import Hit, SearchBackend
from toolsearch.engine import ToolSearch
from toolsearch.errors import BackendError
from toolsearch.matching import TermIndex
from toolsearch.query import parse_query
from toolsearch.registry import available_backends, backend_info, load_backend
from toolsearch.tool import Tool, is_deferred, pool_order, pool_sort_key

BACKENDS = available_backends()

CATALOGUE = pool_order(
    [
        Tool(
            "mcp__slack__send_message",
            "Send a message to a Slack channel.",
            {"type": "object", "properties": {"channel": {}, "text": {}}},
        ),
        Tool("mcp__slack__list_channels", "List the channels of a Slack workspace."),
        Tool(
            "mcp__github__create_issue",
            "Create a new issue in a GitHub repository.",
            {"type": "object", "properties": {"owner": {}, "repo": {}, "title": {}}},
        ),
        Tool("mcp__github__list_pull_requests", "List the pull requests of a GitHub repository."),
        Tool("mcp__calendar__create_event", "Create an event in a calendar at a start time."),
        Tool("mcp__weather__forecast", "Get the weather forecast for a city."),
        Tool("NotebookEdit", "Edit a cell of a Jupyter notebook.", should_defer=True),
        Tool(
            "WebFetch",
            "Fetch a web page by URL and return its text.",
            should_defer=True,
            search_hint="download url page",
        ),
    ]
)

UNICODE = pool_order(
    [
        *CATALOGUE,
        Tool("mcp__cn__weather", "查询 天气 预报 城市"),
        Tool("mcp__fr__recipes", "Recettes de cuisine : café crème et crêpes."),
        Tool("mcp__ru__greeter", "Отправить приветствие пользователю."),
        Tool("mcp__ar__translate", "ترجمة النصوص بين اللغات"),
    ]
)

OBVIOUS = [
    ("send slack message", "mcp__slack__send_message"),
    ("create github issue", "mcp__github__create_issue"),
    ("weather forecast", "mcp__weather__forecast"),
    ("jupyter notebook", "NotebookEdit"),
    ("calendar event", "mcp__calendar__create_event"),
    ("github pull requests", "mcp__github__list_pull_requests"),
    ("fetch url", "WebFetch"),
]

SPECIALS = [
    '"',
    '""',
    "'",
    "*",
    "(",
    ")",
    "()",
    "NEAR",
    "NEAR(slack message)",
    "AND",
    "OR",
    "NOT",
    "^",
    "^slack",
    "\\b",
    "\\",
    "[",
    "]",
    "[a-z]+",
    "{",
    "$",
    "|",
    ".*",
    "?",
    "+",
    "-",
    "-slack",
    "slack:",
    "text:slack",
    "slack*",
    '"slack" AND "message"',
    "slack AND message",
    "slack OR github",
    "(slack",
    "a\x00b",
    "%s %d",
    "' OR 1=1 --",
]


def _factory(name: str, request: pytest.FixtureRequest) -> Callable[[], SearchBackend]:
    if name == "postgres":
        # a real server (tests/conftest.py); a fresh namespace per backend, hashed vectors
        url = request.getfixturevalue("postgres_url")
        return lambda: load_backend(
            "postgres", url=url, namespace=f"contract-{uuid.uuid4()}", encoder="hashing"
        )
    if name == "embedding":
        from toolsearch.backends.embedding import HashingEncoder

        return lambda: load_backend(
            "embedding", encoder=HashingEncoder(), cache_dir=None, progress=False
        )
    if name == "hybrid":
        return lambda: load_backend("hybrid", members={"bm25": 1.0, "keyword": 1.0})
    return lambda: load_backend(name)


@pytest.fixture(params=BACKENDS, ids=BACKENDS)
def make(request: pytest.FixtureRequest) -> Callable[[], SearchBackend]:
    """A factory of fresh, unindexed backends of one registered kind."""
    name: str = request.param
    try:
        info = backend_info(name)
    except BackendError as exc:
        pytest.skip(f"backend {name!r} does not import yet: {exc}")
    for module in info.missing:
        pytest.importorskip(module, reason=f"backend {name!r} needs {info.install_command}")
    if name == "hybrid":
        for member in ("bm25", "keyword"):
            if backend_info(member).missing:
                pytest.skip(f"hybrid's members need {backend_info(member).install_command}")
    if name == "embedding" and importlib.util.find_spec("numpy") is None:
        pytest.skip("the embedding backend needs numpy")
    return _factory(name, request)


def _indexed(make: Callable[[], SearchBackend], tools: Sequence[Tool]) -> SearchBackend:
    backend = make()
    backend.index(list(tools))
    return backend


def _check(hits: list[Hit], k: int, names: set[str]) -> None:
    """The promises every result keeps."""
    assert isinstance(hits, list)
    assert all(isinstance(h, Hit) for h in hits)
    assert len(hits) <= max(k, 0)
    assert len({h.name for h in hits}) == len(hits), "a tool twice"
    assert {h.name for h in hits} <= names, "a tool that is not indexed"
    assert all(h.score > 0 and math.isfinite(h.score) for h in hits)
    scores = [h.score for h in hits]
    assert scores == sorted(scores, reverse=True), "not best first"


def _search(backend: SearchBackend, raw: str, k: int, tools: Sequence[Tool]) -> list[Hit]:
    hits = backend.search(parse_query(raw), k)
    _check(hits, k, {t.name for t in tools})
    return hits


@pytest.mark.parametrize(("raw", "want"), OBVIOUS, ids=[q for q, _ in OBVIOUS])
def test_obvious_answer_first(make: Callable[[], SearchBackend], raw: str, want: str) -> None:
    backend = _indexed(make, CATALOGUE)
    hits = _search(backend, raw, 3, CATALOGUE)
    assert hits and hits[0].name == want


def test_k_larger_than_the_catalogue(make: Callable[[], SearchBackend]) -> None:
    backend = _indexed(make, CATALOGUE)
    everything = "slack github calendar weather notebook fetch"
    for k in (len(CATALOGUE), len(CATALOGUE) + 1, 10_000):
        hits = _search(backend, everything, k, CATALOGUE)
        assert {h.name for h in hits} == {t.name for t in CATALOGUE}
    assert len(_search(backend, everything, 2, CATALOGUE)) == 2


def test_empty_catalogue(make: Callable[[], SearchBackend]) -> None:
    fresh = make()
    assert fresh.search(parse_query("send slack message"), 5) == []
    empty = _indexed(make, [])
    assert empty.search(parse_query("send slack message"), 5) == []
    emptied = _indexed(make, CATALOGUE)
    emptied.index([])
    assert emptied.search(parse_query("send slack message"), 5) == []


@pytest.mark.parametrize("raw", ["", " ", "   \t\n  ", "\u3000", "\u00a0\u2003"])
def test_empty_or_whitespace_query(make: Callable[[], SearchBackend], raw: str) -> None:
    backend = _indexed(make, CATALOGUE)
    assert backend.search(parse_query(raw), 5) == []


def test_zero_or_negative_k(make: Callable[[], SearchBackend]) -> None:
    backend = _indexed(make, CATALOGUE)
    assert backend.search(parse_query("slack"), 0) == []
    assert backend.search(parse_query("slack"), -3) == []


@pytest.mark.parametrize(
    ("raw", "want"),
    [
        ("天气", "mcp__cn__weather"),
        ("天气 预报", "mcp__cn__weather"),
        ("café crème", "mcp__fr__recipes"),
        ("приветствие", "mcp__ru__greeter"),
        ("ترجمة", "mcp__ar__translate"),
    ],
)
def test_unicode_and_cjk(make: Callable[[], SearchBackend], raw: str, want: str) -> None:
    backend = _indexed(make, UNICODE)
    hits = _search(backend, raw, 3, UNICODE)
    assert hits and hits[0].name == want


@pytest.mark.parametrize(
    "raw",
    [
        "🙂 emoji 🚀",
        "e\u0301cole",
        "\u200b\u200d zero width",
        "\uff46\uff55\uff4c\uff4c width",  # full-width letters
        "\ud800 lone surrogate",
        "\U0010ffff",
        "שלום עולם",
        "ﬁle ligature",
        "İstanbul ß ǅ",
    ],
)
def test_odd_unicode_never_raises(make: Callable[[], SearchBackend], raw: str) -> None:
    backend = _indexed(make, UNICODE)
    _search(backend, raw, 5, UNICODE)


@pytest.mark.parametrize("raw", SPECIALS)
def test_regex_and_fts_specials(make: Callable[[], SearchBackend], raw: str) -> None:
    backend = _indexed(make, CATALOGUE)
    _search(backend, raw, 5, CATALOGUE)
    _search(backend, f"send {raw} message", 5, CATALOGUE)


def test_operators_are_words(make: Callable[[], SearchBackend]) -> None:
    backend = _indexed(make, CATALOGUE)
    hits = _search(backend, "slack AND message", 3, CATALOGUE)
    assert hits[0].name == "mcp__slack__send_message"
    hits = _search(backend, "NEAR github NOT issue", 3, CATALOGUE)
    assert hits[0].name == "mcp__github__create_issue"


def test_hundred_kilobyte_queries(make: Callable[[], SearchBackend]) -> None:
    backend = _indexed(make, CATALOGUE)
    repeated = ("send slack message " * 6000)[:100_000]
    hits = _search(backend, repeated, 5, CATALOGUE)
    assert hits[0].name == "mcp__slack__send_message"
    noise = ('lorem (ipsum) *dolor* "sit" amet [x] ^y NEAR z; ' * 2500)[:100_000]
    _search(backend, noise, 5, CATALOGUE)
    one_word = "x" * 100_000
    _search(backend, one_word, 5, CATALOGUE)


def test_duplicate_looking_tools(make: Callable[[], SearchBackend]) -> None:
    original = next(t for t in CATALOGUE if t.name == "mcp__github__create_issue")
    twin = replace(original, name="mcp__github_enterprise__create_issue", server=None)
    tools = pool_order([*CATALOGUE, twin])
    first = _indexed(make, tools)
    hits = _search(first, "create issue", 5, tools)
    assert {h.name for h in hits[:2]} == {original.name, twin.name}
    again = _indexed(make, tools)
    assert again.search(parse_query("create issue"), 5) == hits
    assert first.search(parse_query("create issue"), 5) == hits


def test_reindexing_replaces_the_old_index(make: Callable[[], SearchBackend]) -> None:
    backend = _indexed(make, CATALOGUE)
    assert _search(backend, "slack", 5, CATALOGUE)
    others = pool_order(
        [
            Tool("mcp__jira__create_ticket", "Create a ticket in a Jira project."),
            Tool("mcp__jira__search_tickets", "Search Jira tickets with JQL."),
            Tool("mcp__drive__upload_file", "Upload a file to a Drive folder."),
            Tool("mcp__drive__share_file", "Share a Drive file with someone."),
            Tool("mcp__maps__route", "Driving route between two places."),
        ]
    )
    backend.index(others)
    names = {t.name for t in others}
    for raw in ["slack message", "github issue", "jira ticket", "drive file", "weather"]:
        for hit in backend.search(parse_query(raw), 20):
            assert hit.name in names, (raw, hit)
    assert _search(backend, "jira ticket", 1, others)[0].name == "mcp__jira__create_ticket"


def _same_hits(got: list[Hit], want: list[Hit]) -> None:
    assert [h.name for h in got] == [h.name for h in want]
    for a, b in zip(got, want, strict=True):
        assert math.isclose(a.score, b.score, rel_tol=1e-9, abs_tol=1e-12), (a, b)


def test_incremental_updates_equal_a_rebuild(make: Callable[[], SearchBackend]) -> None:
    extra = [
        Tool("mcp__jira__create_ticket", "Create a ticket in a Jira project."),
        Tool("mcp__drive__upload_file", "Upload a file to a Drive folder."),
    ]
    edited = replace(CATALOGUE[0], description="Post a message with an emoji to a channel.")
    removed = {"mcp__weather__forecast", "WebFetch"}
    final = pool_order(
        [edited if t.name == edited.name else t for t in CATALOGUE if t.name not in removed] + extra
    )
    live = _indexed(make, CATALOGUE[:4])
    upsert = getattr(live, "upsert", None)
    remove = getattr(live, "remove", None)
    if upsert is None or remove is None:
        pytest.skip("backend has no upsert/remove")
    upsert(pool_order([*CATALOGUE[4:], *extra]))
    upsert([edited])
    remove([*sorted(removed), "no_such_tool"])
    rebuilt = _indexed(make, final)
    for raw in [q for q, _ in OBVIOUS] + ["emoji channel", "jira ticket", "upload file"]:
        _same_hits(_search(live, raw, 20, final), _search(rebuilt, raw, 20, final))


def test_ties_keep_pool_order(make: Callable[[], SearchBackend]) -> None:
    tools = pool_order(
        [
            *CATALOGUE,
            Tool("mcp__bravo__lookup", "Look up a record by its key."),
            Tool("mcp__alpha__lookup", "Look up a record by its key."),
        ]
    )
    backend = _indexed(make, tools)
    order = {t.name: i for i, t in enumerate(tools)}
    for raw in ["lookup record", "record key", "create", "list", "slack github"]:
        hits = _search(backend, raw, 20, tools)
        for a, b in pairwise(hits):
            if a.score == b.score:
                assert order[a.name] < order[b.name], (raw, a, b)
        assert backend.search(parse_query(raw), 20) == hits  # deterministic
    hits = backend.search(parse_query("lookup record"), 2)
    assert [h.name for h in hits] == ["mcp__alpha__lookup", "mcp__bravo__lookup"]


def test_inputs_are_not_mutated(make: Callable[[], SearchBackend]) -> None:
    tools = [
        Tool(
            f"mcp__s__tool_{i}",
            f"Tool number {i}.",
            {"type": "object", "properties": {"arg": {"type": "string"}}, "required": ["arg"]},
        )
        for i in range(6)
    ]
    given_list = list(tools)
    schemas = copy.deepcopy([dict(t.input_schema) for t in tools])
    backend = make()
    backend.index(given_list)
    backend.search(parse_query("tool number"), 3)
    assert given_list == tools
    assert [dict(t.input_schema) for t in tools] == schemas


# ------------------------------------------------------------------ through ToolSearch

FAST_PATHS = [
    "select:mcp__slack__send_message,NotebookEdit,unknown_tool",
    "SELECT: WebFetch , mcp__slack__send_message,WebFetch",
    "select:",
    "mcp__slack__send_message",
    "NOTEBOOKEDIT",
    "  webfetch  ",
    "mcp__github",
    "mcp__gith",
    "mcp__s",
]


def _engine(backend: SearchBackend | str, tools: Sequence[Tool]) -> ToolSearch:
    return ToolSearch(tools, backend=backend)


@pytest.mark.parametrize("raw", FAST_PATHS)
def test_fast_paths_identical_across_backends(make: Callable[[], SearchBackend], raw: str) -> None:
    reference = _engine("keyword", CATALOGUE).search(raw, 3)
    result = _engine(make(), CATALOGUE).search(raw, 3)
    assert result.matches == reference.matches
    assert all(m.source != "ranked" for m in result.matches) or not result.matches


@pytest.mark.parametrize("raw", ["+slack", "+slack message", "+github list", "+jupyter edit"])
def test_required_terms_filter_every_backend(make: Callable[[], SearchBackend], raw: str) -> None:
    engine = _engine(make(), CATALOGUE)
    deferred = [t for t in CATALOGUE if is_deferred(t)]
    allowed = {
        deferred[i].name for i in TermIndex(deferred).required_filter(parse_query(raw).required)
    }
    result = engine.search(raw, 100)
    assert result.names, raw
    assert set(result.names) <= allowed
    assert all(m.source == "ranked" for m in result.matches)
    if raw in ("+slack", "+jupyter edit"):
        # Every tool that passes the filter shares the required word: all are found.
        assert set(result.names) == allowed


def test_no_match_is_empty_through_tool_search(make: Callable[[], SearchBackend]) -> None:
    result = _engine(make(), CATALOGUE).search("+zzzqqq slack", 5)
    assert result.matches == ()
    assert result.text().startswith("No matching deferred tools found")


def test_engine_keeps_pool_order_on_ties(make: Callable[[], SearchBackend]) -> None:
    tools = pool_order(
        [
            *CATALOGUE,
            Tool("mcp__bravo__lookup", "Look up a record by its key."),
            Tool("mcp__alpha__lookup", "Look up a record by its key."),
        ]
    )
    names = _engine(make(), tools).search("lookup record", 2).names
    assert names == ["mcp__alpha__lookup", "mcp__bravo__lookup"]
    assert sorted(names, key=lambda n: pool_sort_key(next(t for t in tools if t.name == n))) == (
        names
    )


# ------------------------------------------------------------------ any text at all

_TEXT = st.text(
    alphabet=st.characters(codec=None, exclude_categories=("Cs",)), max_size=120
) | st.sampled_from(SPECIALS)


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(raw=_TEXT, k=st.integers(min_value=-1, max_value=30))
def test_any_text_any_k(make: Callable[[], SearchBackend], raw: str, k: int) -> None:
    backend = _backend_for(make)
    _search(backend, raw, k, UNICODE)


_CACHE: dict[int, Any] = {}


def _backend_for(make: Callable[[], SearchBackend]) -> SearchBackend:
    # One indexed backend per factory for all hypothesis examples of a test.
    found = _CACHE.get(id(make))
    if found is None or found[0] is not make:
        found = (make, _indexed(make, UNICODE))
        _CACHE[id(make)] = found
    backend: SearchBackend = found[1]
    return backend
