"""The hybrid backend: weighted reciprocal rank fusion of registered backends."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("numpy")

from toolsearch import registry
from toolsearch.backend import Hit
from toolsearch.backends.embedding import HashingEncoder
from toolsearch.backends.hybrid import (
    DEFAULT_K,
    DEFAULT_MEMBER_OPTIONS,
    DEFAULT_MEMBERS,
    HybridBackend,
    member_backend,
    rrf_fuse,
)
from toolsearch.backends.keyword import KeywordBackend
from toolsearch.engine import ToolSearch
from toolsearch.errors import BackendError, ConfigError, UnknownBackendError
from toolsearch.multistep import Ranking, merge_steps, split_steps
from toolsearch.query import parse_query
from toolsearch.tool import Tool

FAKE_EMBEDDING = {"embedding": {"encoder": HashingEncoder(), "cache_dir": None}}


def _tools() -> list[Tool]:
    return [
        Tool("Read", "Read a file from the local filesystem."),
        Tool("Write", "Write a file to the local filesystem."),
        Tool("WebFetch", "Fetch a URL and return the page content."),
        Tool("mcp__slack__send_message", "Send a message to a Slack channel."),
        Tool("mcp__slack__read_channel", "Read recent messages of a Slack channel."),
        Tool("mcp__github__create_issue", "Create a new issue in a GitHub repository."),
        Tool("mcp__gcal__create_event", "Create a calendar event with attendees."),
    ]


def _hybrid(**options: Any) -> HybridBackend:
    options.setdefault("members", {"keyword": 1.0, "embedding": 1.0})
    options.setdefault("member_options", FAKE_EMBEDDING)
    return HybridBackend(**options)


def test_rrf_formula() -> None:
    fused = rrf_fuse({"a": ["x", "y", "z"], "b": ["y", "w"]}, {"a": 2.0, "b": 0.5}, k=10)
    assert fused == {
        "x": round(2 / 11, 12),
        "y": round(2 / 12 + 0.5 / 11, 12),
        "z": round(2 / 13, 12),
        "w": round(0.5 / 12, 12),
    }
    assert rrf_fuse({"a": ["x"]}, {}, k=0) == {"x": 1.0}  # weight 1 by default
    assert rrf_fuse({}, {"a": 1.0}) == {}


def test_fuses_the_members_own_rankings() -> None:
    tools = _tools()
    hybrid = _hybrid(k=10, depth=4, members={"keyword": 2.0, "embedding": 1.0}, fusion="rrf")
    hybrid.index(tools)
    query = parse_query("read slack messages")
    keyword, embedding = hybrid.members["keyword"], hybrid.members["embedding"]
    expected = rrf_fuse(
        {
            "keyword": [h.name for h in keyword.search(query, 4)],
            "embedding": [h.name for h in embedding.search(query, 4)],
        },
        {"keyword": 2.0, "embedding": 1.0},
        k=10,
    )
    order = {t.name: i for i, t in enumerate(sorted(tools, key=lambda t: (t.mcp, t.name)))}
    ranked = sorted(expected, key=lambda n: (-expected[n], order[n]))
    hits = hybrid.search(query, 3)  # each member contributes its best depth=4
    assert [(h.name, h.score) for h in hits] == [(n, expected[n]) for n in ranked[:3]]
    assert hits[0].name == "mcp__slack__read_channel"


def test_weights_shift_the_ranking() -> None:
    tools = [
        Tool("mcp__a__cat", "Unrelated text about dogs."),
        Tool("mcp__b__dog", "Unrelated text about cats."),
        Tool("mcp__c__x", "Nothing."),
        Tool("mcp__d__y", "Nothing at all."),
        Tool("mcp__e__z", "Nothing here."),
    ]
    query = parse_query("cat")
    names_only = HybridBackend(members={"keyword": 1.0}, fusion="rrf")
    names_only.index(tools)
    assert [h.name for h in names_only.search(query, 1)] == ["mcp__a__cat"]
    single = HybridBackend(members=["keyword"], fusion="rrf")
    single.index(tools)
    assert single.search(query, 5) == [
        h.__class__(h.name, round(1 / (DEFAULT_K + i), 12))
        for i, h in enumerate(names_only.search(query, 5), start=1)
    ]


def test_member_ties_keep_pool_order() -> None:
    twins = [Tool(f"mcp__s{i}__lookup_record", "Look up a record.") for i in range(6)]
    plain = [Tool(f"LookupRecord{i}", "Look up a record.") for i in range(2)]
    options = {"embedding": {**FAKE_EMBEDDING["embedding"], "fields": ["description"]}}
    # no name feature: "look up" is the read action of the twins' names, not of the plain ones
    hybrid = _hybrid(members=["embedding"], member_options=options, name_weight=0, action_bonus=0)
    hybrid.index(list(reversed(twins + plain)))
    expected = [t.name for t in plain] + [t.name for t in twins]
    for k in (1, 3, 8, 20):
        # one member ranks ties in pool order; its ranks differ, so fusion keeps that order
        assert [h.name for h in hybrid.search(parse_query("look up record"), k)] == expected[:k]


class _FixedRanking(KeywordBackend):
    """A member that always returns the same ranking (of the tools it has indexed)."""

    def __init__(self, names: list[str]) -> None:
        super().__init__()
        self.names = names

    def search(self, query: Any, k: int) -> list[Hit]:
        return [Hit(n, 1.0 / (i + 1)) for i, n in enumerate(self.names) if n in self.tools][:k]


def test_equal_fused_scores_tie_in_pool_order() -> None:
    tools = [Tool("mcp__a__x", "x"), Tool("Zed", "z"), Tool("Alpha", "a"), Tool("mcp__b__y", "y")]
    hybrid = HybridBackend(
        members=["keyword", "embedding"], member_options=FAKE_EMBEDDING, fusion="rrf"
    )
    # each tool is first for one member and second for the other: equal RRF sums
    hybrid.members = {
        "keyword": _FixedRanking(["mcp__b__y", "Zed", "mcp__a__x", "Alpha"]),
        "embedding": _FixedRanking(["Zed", "mcp__b__y", "Alpha", "mcp__a__x"]),
    }
    hybrid.index(tools)
    hits = hybrid.search(parse_query("anything"), 4)
    assert [h.name for h in hits] == ["Zed", "mcp__b__y", "Alpha", "mcp__a__x"]
    assert hits[0].score == hits[1].score and hits[2].score == hits[3].score
    assert [h.name for h in hybrid.search(parse_query("anything"), 1)] == ["Zed"]


def test_k_larger_than_catalogue_and_empty_cases() -> None:
    hybrid = _hybrid()
    assert hybrid.search(parse_query("file"), 5) == []
    hybrid.index(_tools())
    assert len(hybrid.search(parse_query("read file"), 1000)) <= len(_tools())
    assert hybrid.search(parse_query("   "), 5) == []
    assert hybrid.search(parse_query("file"), 0) == []
    hybrid.index([])
    assert hybrid.search(parse_query("file"), 5) == []


def test_depth_is_at_least_k() -> None:
    tools = [Tool(f"mcp__s__file_tool_{i}", "Works on a file.") for i in range(30)]
    hybrid = HybridBackend(members=["keyword"], depth=2)
    hybrid.index(tools)
    assert len(hybrid.search(parse_query("file"), 25)) == 25


def test_incremental_matches_rebuild() -> None:
    tools = _tools()
    changed = Tool("Write", "Save text into a note.")
    added = Tool("mcp__notion__create_page", "Create a Notion page.")
    inc = _hybrid()
    inc.index(tools)
    inc.upsert([changed, added])
    inc.remove(["WebFetch", "unknown"])
    rebuilt = _hybrid()
    rebuilt.index([t for t in tools if t.name not in {"Write", "WebFetch"}] + [changed, added])
    assert sorted(inc.tools) == sorted(rebuilt.tools)
    for query in ("create a page", "save a note", "read file", "slack", "fetch url"):
        assert inc.search(parse_query(query), 10) == rebuilt.search(parse_query(query), 10)


def test_incremental_only_when_every_member_is() -> None:
    assert HybridBackend.incremental is True
    assert _hybrid(members=["embedding"]).incremental is True
    assert KeywordBackend.incremental is True
    assert _hybrid(members=["keyword", "embedding"]).incremental is True


def test_params_report_members_weights_and_k() -> None:
    params = _hybrid(members={"keyword": 0.5, "embedding": 2}, k=20, depth=30).params()
    assert params["members"] == ["keyword", "embedding"]
    assert params["weights"] == {"keyword": 0.5, "embedding": 2.0}
    assert (params["k"], params["depth"]) == (20, 30)
    member_params: Any = params["member_params"]
    assert member_params["embedding"]["encoder"] == HashingEncoder().name


def test_loaded_through_the_registry() -> None:
    backend = registry.load_backend(
        "hybrid", members=["keyword", "embedding"], member_options=FAKE_EMBEDDING
    )
    assert isinstance(backend, HybridBackend)
    backend.index(_tools())
    assert backend.search(parse_query("github issue"), 1)[0].name == "mcp__github__create_issue"


def test_through_the_engine_with_required_terms() -> None:
    engine = ToolSearch(_tools(), backend=_hybrid())
    assert engine.search("+slack read").names[0] == "mcp__slack__read_channel"
    assert set(engine.search("+slack message", 10).names) == {
        "mcp__slack__send_message",
        "mcp__slack__read_channel",
    }
    engine.set_tools([*_tools(), Tool("mcp__notion__create_page", "Create a Notion page.")])
    assert engine.search("notion page").names[0] == "mcp__notion__create_page"


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        ({"members": "keyword"}, ConfigError, "got the string 'keyword'"),
        ({"members": []}, ConfigError, "at least one member"),
        ({"members": ["keyword", "keyword"]}, ConfigError, "repeat"),
        ({"members": ["hybrid"]}, ConfigError, "member of itself"),
        ({"members": {"keyword": 0}}, ConfigError, "positive number"),
        ({"members": {"keyword": float("nan")}}, ConfigError, "positive number"),
        ({"members": {"keyword": "1"}}, ConfigError, "positive number"),
        ({"members": ["keyword"], "k": -1}, ConfigError, "non-negative"),
        ({"members": ["keyword"], "depth": 0}, ConfigError, "depth"),
        ({"members": ["keyword"], "member_options": {"bm25": {}}}, ConfigError, "not members"),
        ({"members": ["keyword"], "member_options": {"keyword": 3}}, ConfigError, "table"),
        ({"members": ["nope"]}, UnknownBackendError, "unknown backend 'nope'"),
        ({"members": ["keyword"], "member_options": {"keyword": {"x": 1}}}, BackendError, "x"),
    ],
)
def test_bad_options(options: dict[str, Any], error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        HybridBackend(**options)


def test_requires_and_extra_describe_the_default_members() -> None:
    requires: set[str] = set()
    extras: set[str] = set()
    backends = {member_backend(m, DEFAULT_MEMBER_OPTIONS.get(m, {})) for m in DEFAULT_MEMBERS}
    for member in backends:
        try:
            cls = registry._backend_class(member)
        except BackendError as exc:  # a default member whose module is not importable
            pytest.fail(f"default hybrid member {member!r} cannot be imported: {exc}")
        requires.update(getattr(cls, "requires", ()))
        if getattr(cls, "extra", None):
            extras.add(cls.extra)
    # the default bm25 member stems (DEFAULT_MEMBER_OPTIONS), which needs PyStemmer
    assert DEFAULT_MEMBER_OPTIONS["bm25"]["stem"] is True
    assert set(HybridBackend.requires) == requires | {"Stemmer"}
    assert set((HybridBackend.extra or "").split(",")) - {""} == extras
    incremental = all(registry._backend_class(m).incremental for m in backends)
    assert HybridBackend.incremental is incremental


def test_default_is_convex_fusion_with_exact_name_action_bonus_and_multistep() -> None:
    hybrid = _hybrid()
    params = hybrid.params()
    # the name match is off since the broad model (lab/retrieval.md); the exact-name bonus stays
    assert params["fusion"] == "convex" and params["name_weight"] == 0.0
    assert params["exact_name_bonus"] == 0.1 and params["server_bonus"] == 0.2
    assert params["server_support"] == 0.5 and hybrid.fuser.server_support == 0.5
    assert params["action_bonus"] == 0.1 and hybrid.fuser.action_bonus == 0.1
    assert params["normalise"] == {"keyword": "max", "embedding": "minmax"}
    assert params["multistep"] is True  # gated per-step search of long requests
    assert DEFAULT_MEMBERS["embedding"] == 0.7
    # the lexical 0.3 split 4 : 3 between stemmed and unstemmed bm25
    assert DEFAULT_MEMBERS["bm25"] == pytest.approx(6 / 35)
    assert DEFAULT_MEMBERS["bm25_unstemmed"] == pytest.approx(9 / 70)
    assert set(DEFAULT_MEMBERS) == {"embedding", "bm25", "bm25_unstemmed"}
    # the members count their fields' words only, as when the fusion was chosen
    words = {"param_descriptions": False}
    assert DEFAULT_MEMBER_OPTIONS["bm25"] == {"stem": True, "stopwords": True, **words}
    assert DEFAULT_MEMBER_OPTIONS["bm25_unstemmed"] == {
        "backend": "bm25",
        "stem": False,
        "stopwords": False,
        **words,
    }
    assert params["member_backends"] == {"keyword": "keyword", "embedding": "embedding"}
    # the default's embedding member runs the int8 export; options of one's own update that
    assert HybridBackend().member_options["embedding"] == {"precision": "int8"}
    own = HybridBackend(member_options={"embedding": {"threads": 1}, "bm25": {"k1": 1.5}})
    assert own.member_options["embedding"] == {"precision": "int8", "threads": 1}
    assert own.member_options["bm25"] == {"stem": True, "stopwords": True, **words, "k1": 1.5}
    plain = HybridBackend(member_options={"embedding": {"precision": "fp32"}})
    assert plain.member_options["embedding"] == {"precision": "fp32"}


def test_convex_fusion_keeps_an_exact_name_first() -> None:
    tools = [
        Tool("mcp__github__create_pull_request", "Open a new pull request."),
        Tool("mcp__github__create_pull_request_review", "Review a pull request."),
        Tool("mcp__github__list_pull_requests", "List the pull requests of a repository."),
    ]
    hybrid = _hybrid(members={"keyword": 0.5, "embedding": 0.5})
    hybrid.index(tools)
    hits = hybrid.search(parse_query("create a github pull request"), 3)
    assert hits[0].name == "mcp__github__create_pull_request"
    assert all(h.score > 0 for h in hits)


def test_multistep_option_searches_each_step() -> None:
    tools = _tools()
    # without server support, which would rank the whole request's second server lower
    single = HybridBackend(members=["keyword"], server_support=0.0)
    multi = HybridBackend(members=["keyword"], multistep=True, server_support=0.0)
    for backend in (single, multi):
        backend.index(tools)
    query = parse_query("read the latest slack channel messages and then create a calendar event")
    top2 = [h.name for h in multi.search(query, 2)]
    assert set(top2) == {"mcp__slack__read_channel", "mcp__gcal__create_event"}
    short = parse_query("github issue")
    assert multi.search(short, 3) == single.search(short, 3)


def test_asking_for_more_hits_never_reorders_the_first_ones(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Cosines are min-max scaled over the hits a member returns: a step ranked from more hits
    # when more are asked for would put `ypsilon` (strong in bm25) ahead of `xenon`.
    text = "alpha beta gamma words here, then delta epsilon zeta words there"
    first, second = split_steps(text)
    dense: dict[str, list[Hit]] = {
        text: [Hit("amber", 0.5), Hit("birch", 0.45), Hit("cedar", 0.4)],
        first: [Hit("xenon", 0.8), Hit("ypsilon", 0.7), Hit("violet", 0.69), Hit("wheat", 0.1)],
        second: [Hit("ember", 0.6), Hit("fjord", 0.5)],
    }
    lexical = {text: [Hit("amber", 3.0)], first: [Hit("ypsilon", 10.0), Hit("xenon", 2.0)]}
    names = {hit.name for hits in dense.values() for hit in hits}
    hybrid = _hybrid(
        members={"embedding": 1.0, "bm25": 0.5},
        step_depth=3,
        server_support=0.0,
        name_weight=0.0,
        min_member_score={},
    )
    hybrid.index([Tool(name, "A tool.") for name in sorted(names)])
    for member, script in (("embedding", dense), ("bm25", lexical)):
        monkeypatch.setattr(
            hybrid.members[member], "search", lambda q, k, s=script: s.get(q.raw, [])[:k]
        )
    longest = [hit.name for hit in hybrid.search(parse_query(text), 20)]
    assert longest[:4] == ["amber", "birch", "xenon", "ember"]
    for k in range(1, len(longest) + 1):
        assert [hit.name for hit in hybrid.search(parse_query(text), k)] == longest[:k]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"fusion": "sum"}, "fusion must be one of convex, rrf"),
        ({"normalise": {"bm25": "max"}}, "not a member"),
        ({"normalise": {"keyword": "zscore"}}, "must be one of max, minmax"),
        ({"name_weight": -1}, "non-negative"),
        ({"name_weight": "high"}, "finite number"),
        ({"exact_name_bonus": -0.5}, "exact_name_bonus must be non-negative"),
        ({"exact_name_bonus": float("nan")}, "exact_name_bonus must be a finite number"),
        ({"server_bonus": -0.1}, "server_bonus must be non-negative"),
        ({"server_bonus": "0.2"}, "server_bonus must be a finite number"),
        ({"server_support": -1}, "server_support must be non-negative"),
        ({"server_support": float("inf")}, "server_support must be a finite number"),
        ({"action_bonus": -0.1}, "action_bonus must be non-negative"),
        ({"action_bonus": None}, "action_bonus must be a finite number"),
        ({"multistep": "yes"}, "multistep must be true or false"),
        ({"step_depth": 0}, "step_depth must be a positive integer, got 0"),
        ({"step_depth": True}, "step_depth must be a positive integer, got True"),
    ],
)
def test_bad_fusion_options(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        HybridBackend(members=["keyword"], **options)


def test_min_member_score_abstains_when_no_member_is_sure() -> None:
    tools = _tools()
    sure = HybridBackend(members=["keyword"], min_member_score={"keyword": 1.0})
    picky = HybridBackend(members=["keyword"], min_member_score={"keyword": 1e9})
    for backend in (sure, picky):
        backend.index(tools)
    query = parse_query("slack message")
    assert sure.search(query, 3) and picky.search(query, 3) == []
    assert picky.params()["min_member_score"] == {"keyword": 1e9}
    with pytest.raises(ConfigError, match="not a member"):
        HybridBackend(members=["keyword"], min_member_score={"bm25": 1.0})
    with pytest.raises(ConfigError, match="finite number"):
        HybridBackend(members=["keyword"], min_member_score={"keyword": "x"})


def test_default_abstention_only_for_a_calibrated_embedding_model() -> None:
    from toolsearch.backends.calibration import CALIBRATED_MIN_SIMILARITY
    from toolsearch.backends.encoders import BASE_MODEL, DEFAULT_MODEL
    from toolsearch.backends.hybrid import DEFAULT_MIN_SIMILARITY, _default_min_scores

    assert CALIBRATED_MIN_SIMILARITY[DEFAULT_MODEL] == DEFAULT_MIN_SIMILARITY
    assert HybridBackend(members=["embedding", "keyword"]).min_member_score == {
        "embedding": DEFAULT_MIN_SIMILARITY
    }
    assert _hybrid().min_member_score == {}  # a hashing encoder is not calibrated
    assert HybridBackend(members=["keyword"]).min_member_score == {}
    assert HybridBackend(members=["embedding"], min_member_score={}).min_member_score == {}
    # Options that only say how the default model runs keep the calibrated threshold ...
    runs = {"embedding": {"precision": "int8", "threads": 1, "cache_dir": False}}
    assert HybridBackend(members=["embedding"], member_options=runs).min_member_score == {
        "embedding": DEFAULT_MIN_SIMILARITY
    }
    # ... another calibrated model gets its own ...
    base = {"embedding": {**runs["embedding"], "model": BASE_MODEL}}
    assert _default_min_scores({"embedding": 1.0}, base) == {
        "embedding": CALIBRATED_MIN_SIMILARITY[BASE_MODEL]
    }
    # ... and options that change the vectors drop it.
    for changed in ({"model": "other"}, {"fields": ["name"]}, {"query_adapter": "a.npz"}):
        options = {"embedding": {**runs["embedding"], **changed}}
        assert _default_min_scores({"embedding": 1.0}, options) == {}


def test_the_default_puts_the_tool_the_query_names_first() -> None:
    """The bundled catalogue's obvious query: the tool named word for word comes first."""
    from toolsearch.dataset import load_dataset

    root = Path(__file__).resolve().parents[1] / "datasets" / "mcp-workbench"
    tools = list(load_dataset(root).tools)
    unstemmed = {"bm25": {"stem": False, "stopwords": False}}
    hybrid = _hybrid(members={"bm25": 0.55, "fts5": 0.45}, member_options=unstemmed)
    plain = _hybrid(
        members={"bm25": 0.55, "fts5": 0.45}, member_options=unstemmed, exact_name_bonus=0
    )
    for backend in (hybrid, plain):
        backend.index(tools)
    query = parse_query("create a github pull request")
    assert plain.search(query, 1)[0].name == "mcp__github__create_pull_request_review"
    assert hybrid.search(query, 1)[0].name == "mcp__github__create_pull_request"


def test_a_backend_can_be_a_member_twice_under_its_own_names() -> None:
    hybrid = HybridBackend(
        members={"stems": 1.0, "words": 1.0, "vectors": 1.0},
        member_options={
            "stems": {"backend": "bm25", "stem": True},
            "words": {"backend": "bm25", "stem": False, "stopwords": False},
            "vectors": {"backend": "embedding", "encoder": HashingEncoder(), "cache_dir": None},
        },
    )
    hybrid.index(_tools())
    params = hybrid.params()
    assert params["member_backends"] == {"stems": "bm25", "words": "bm25", "vectors": "embedding"}
    # a member's normalisation follows its backend, not its name
    assert params["normalise"] == {"stems": "max", "words": "max", "vectors": "minmax"}
    assert hybrid.members["stems"].params()["stem"] is True
    assert hybrid.members["words"].params()["stem"] is False
    query = parse_query("sending messages to slack")
    # only the stemmed member matches "sending" and "messages" to "send" and "message"
    assert hybrid.members["stems"].search(query, 1)[0].name == "mcp__slack__send_message"
    assert hybrid.search(query, 1)[0].name == "mcp__slack__send_message"


def test_the_default_unstemmed_member_is_bm25_on_the_words_as_written() -> None:
    hybrid = HybridBackend(member_options=FAKE_EMBEDDING)
    member = hybrid.members["bm25_unstemmed"]
    assert member.name == "bm25" and member.params()["stem"] is False
    assert hybrid.members["bm25"].params()["stem"] is True


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        ({"words": {"backend": ""}}, ConfigError, r"member_options\['words'\].backend"),
        ({"words": {"backend": 3}}, ConfigError, "must be a backend name, got 3"),
        ({"words": {"backend": "hybrid"}}, ConfigError, "cannot be a member of itself"),
        ({"words": {"backend": "nope"}}, UnknownBackendError, "unknown backend 'nope'"),
        ({}, UnknownBackendError, "unknown backend 'words'"),
    ],
)
def test_bad_member_backends(options: dict[str, Any], error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        HybridBackend(members={"words": 1.0}, member_options=options)


def test_a_dropped_step_costs_only_its_leading_member(monkeypatch: pytest.MonkeyPatch) -> None:
    hybrid = _hybrid(members={"embedding": 1.0, "bm25": 0.5}, min_member_score={})
    hybrid.index(_tools())
    text = (
        "read the recent messages of the slack channel, then create a calendar event with "
        "attendees. Thank you so much for all of your kind help"
    )
    steps = split_steps(text)
    assert len(steps) == 3

    def eager(step: str, depth: int) -> Ranking:  # every member ranks every step
        query = parse_query(step)
        hits = hybrid.member_hits(query, depth)
        return Ranking(hybrid._ranked(query, hits, depth), hits["embedding"][0].score)

    whole = eager(text, hybrid.depth)
    rankings = [eager(step, hybrid.step_depth) for step in steps]
    kept = [s for s, r in zip(steps, rankings, strict=True) if r.confidence >= whole.confidence]
    assert 0 < len(kept) < len(steps)  # the case this test is about: some steps are dropped
    expected = merge_steps(whole, rankings, 5)

    calls: list[str] = []
    bm25 = hybrid.members["bm25"]
    search = bm25.search
    monkeypatch.setattr(bm25, "search", lambda q, k: calls.append(q.raw) or search(q, k))
    assert hybrid.search(parse_query(text), 5) == expected
    assert calls == [text, *kept]


def test_a_request_that_names_a_server_lifts_that_servers_tools_only() -> None:
    tools = [
        Tool("mcp__discord__send_message", "Post a message to a channel, with a link."),
        Tool("mcp__slack__send_message", "Send a message to a channel."),
    ]
    query = parse_query("post the ticket link to the deploys channel on slack")
    scores = {}
    for bonus in (0.0, 0.5):
        hybrid = HybridBackend(members={"bm25": 1.0}, server_bonus=bonus, server_support=0.0)
        hybrid.index(tools)
        scores[bonus] = {hit.name.split("__")[1]: hit.score for hit in hybrid.search(query, 2)}
    assert scores[0.0]["discord"] > scores[0.0]["slack"]
    assert scores[0.5]["discord"] == scores[0.0]["discord"]
    assert scores[0.5]["slack"] == pytest.approx(scores[0.0]["slack"] + 0.5)
    assert scores[0.5]["slack"] > scores[0.5]["discord"]  # the named service comes first


def test_a_github_request_does_not_name_a_server_called_git() -> None:
    """The request word "GitHub" names the server ``github``, not ``git`` (its camel-case
    part), also once the github tools join by an upsert (issue 54)."""
    git = [
        Tool("mcp__git__git_commit", "Record changes to the repository."),
        Tool("mcp__git__git_status", "Show the working tree status."),
    ]
    github = [Tool("mcp__github__create_issue", "Open a new issue in a GitHub repository.")]
    request = parse_query("open an issue on GitHub")

    def scores(server_bonus: float) -> dict[str, float]:
        hybrid = _hybrid(members={"embedding": 1.0}, server_bonus=server_bonus, multistep=False)
        hybrid.index(git)
        hybrid.upsert(github)
        return {hit.name: hit.score for hit in hybrid.search(request, 3)}

    plain, named = scores(0.0), scores(0.2)
    for tool in git:
        assert named[tool.name] == pytest.approx(plain[tool.name])
    assert named[github[0].name] > plain[github[0].name]
