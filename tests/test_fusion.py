"""Score fusion of the hybrid backend: normalisation, convex combination, name match."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from toolsearch.backend import Hit
from toolsearch.fusion import (
    FLOOR,
    Fuser,
    convex_fuse,
    name_coverage,
    name_table,
    name_words,
    names_server,
    names_whole_name,
    normalise,
    query_words,
)
from toolsearch.query import parse_query
from toolsearch.tool import Tool


def test_max_and_minmax_normalisation() -> None:
    hits = [Hit("a", 4.0), Hit("b", 2.0), Hit("c", 1.0)]
    assert normalise(hits, "max") == pytest.approx(
        {"a": 1.0, "b": FLOOR + (1 - FLOOR) * 0.5, "c": FLOOR + (1 - FLOOR) * 0.25}
    )
    assert normalise(hits, "minmax") == pytest.approx(
        {"a": 1.0, "b": FLOOR + (1 - FLOOR) / 3, "c": FLOOR}
    )
    assert normalise([Hit("a", 0.3), Hit("b", 0.3)], "minmax") == {"a": 1.0, "b": 1.0}
    assert normalise([], "max") == {}
    with pytest.raises(ValueError, match="unknown normalisation 'z'"):
        normalise(hits, "z")


def test_convex_combination_keeps_a_confident_lexical_hit_first() -> None:
    # the lexical member is sure (one hit far ahead); the dense member slightly prefers others
    lexical = [Hit("exact", 20.0), Hit("near", 2.0)]
    dense = [Hit("near", 0.72), Hit("other", 0.70), Hit("exact", 0.69), Hit("far", 0.2)]
    fused = convex_fuse(
        {"dense": dense, "lexical": lexical},
        {"dense": 0.5, "lexical": 0.5},
        {"dense": "minmax", "lexical": "max"},
    )
    assert max(fused, key=lambda n: fused[n]) == "exact"
    assert all(score > 0 for score in fused.values())


def test_name_coverage_prefers_the_name_that_is_the_request() -> None:
    query = query_words(parse_query("create a github pull request"))
    assert query == {"create", "github", "pull", "request"}
    exact = name_words(Tool("mcp__github__create_pull_request", "Open a PR."))
    longer = name_words(Tool("mcp__github__create_pull_request_review", "Review a PR."))
    assert name_coverage(query, exact.words) == 1.0
    assert name_coverage(query, exact.words) > name_coverage(query, longer.words) > 0
    assert name_coverage(set(), exact.words) == 0.0


def test_fuser_adds_the_name_weight() -> None:
    tools = [Tool("mcp__github__create_issue", "x"), Tool("mcp__jira__create_ticket", "y")]
    names = {t.name: name_words(t) for t in tools}
    hits = {"m": [Hit("mcp__jira__create_ticket", 1.0), Hit("mcp__github__create_issue", 0.9)]}
    plain = Fuser({"m": 1.0}, "convex", {"m": "max"})
    named = Fuser({"m": 1.0}, "convex", {"m": "max"}, name_weight=0.5)
    query = parse_query("github create issue")
    assert max(plain.fuse(query, hits, names).items(), key=lambda p: p[1])[0].endswith("ticket")
    assert max(named.fuse(query, hits, names).items(), key=lambda p: p[1])[0].endswith("issue")
    rrf = Fuser({"m": 1.0}, "rrf", k=0)
    assert rrf.fuse(query, hits, names) == {
        "mcp__jira__create_ticket": 1.0,
        "mcp__github__create_issue": 0.5,
    }


def test_names_whole_name_needs_every_word_of_the_own_name() -> None:
    query = query_words(parse_query("create a github pull request"))
    exact = name_words(Tool("mcp__github__create_pull_request", "Open a PR."))
    longer = name_words(Tool("mcp__github__create_pull_request_review", "Review a PR."))
    short = name_words(Tool("mcp__brave__create", "Create."))
    assert names_whole_name(query, exact.own, 2)
    assert not names_whole_name(query, longer.own, 2)  # the query does not say "review"
    assert not names_whole_name(query, short.own, 2)  # one word: below the minimum
    assert names_whole_name(query, short.own, 1)


def test_exact_name_bonus_puts_the_named_tool_above_a_stronger_paraphrase() -> None:
    tools = [
        Tool("mcp__github__create_pull_request", "Open a PR."),
        Tool("mcp__github__create_pull_request_review", "Review a PR."),
    ]
    names = {t.name: name_words(t) for t in tools}
    hits = {"m": [Hit(tools[1].name, 1.0), Hit(tools[0].name, 0.5)]}
    query = parse_query("create a github pull request")
    named = Fuser({"m": 1.0}, "convex", {"m": "max"}, name_weight=0.2)
    tiered = Fuser({"m": 1.0}, "convex", {"m": "max"}, name_weight=0.2, exact_name_bonus=1.0)
    assert max(named.fuse(query, hits, names).items(), key=lambda p: p[1])[0] == tools[1].name
    fused = tiered.fuse(query, hits, names)
    assert max(fused.items(), key=lambda p: p[1])[0] == tools[0].name
    assert fused[tools[1].name] == named.fuse(query, hits, names)[tools[1].name]


def test_server_bonus_lifts_the_tools_of_the_server_the_query_names() -> None:
    tools = [
        Tool("mcp__discord__send_message", "Send a message to a channel."),
        Tool("mcp__slack__send_message", "Send a message to a channel."),
        Tool("mcp__google_drive__share_file", "Share a file."),
    ]
    names = {t.name: name_words(t) for t in tools}
    query = query_words(parse_query("drop the ticket link in #deploys on Slack"))
    assert names_server(query, names[tools[1].name])
    assert not names_server(query, names[tools[0].name])
    assert not names_server(query_words(parse_query("share it on Google")), names[tools[2].name])
    assert not names_server(query, name_words(Tool("send_message", "")))  # no server
    hits = {"m": [Hit(tools[0].name, 1.0), Hit(tools[1].name, 0.8)]}
    request = parse_query("drop the ticket link in #deploys on Slack")
    plain = Fuser({"m": 1.0}, "convex", {"m": "max"})
    lifted = Fuser({"m": 1.0}, "convex", {"m": "max"}, server_bonus=0.3)
    before = plain.fuse(request, hits, names)
    assert max(before, key=lambda name: before[name]) == tools[0].name
    fused = lifted.fuse(request, hits, names)
    assert fused == {tools[0].name: 1.0, tools[1].name: pytest.approx(before[tools[1].name] + 0.3)}


def test_a_brand_in_camel_case_names_its_own_server_not_the_one_its_part_names() -> None:
    """The request word "GitHub" is the server ``github``: read as ``git`` + ``hub`` it named
    a server ``git`` in every GitHub request (issue 54)."""
    tools = [
        Tool("mcp__git__git_commit", "Record changes to the repository."),
        Tool("mcp__github__create_issue", "Open a new issue in a GitHub repository."),
        Tool("mcp__gitlab__create_issue", "Open a new issue in a GitLab project."),
    ]
    names = name_table(tools)
    request = parse_query("open an issue on GitHub")
    words = query_words(request, names.vocabulary)
    assert "github" in words and "git" not in words and "hub" not in words
    assert [t.name for t in tools if names_server(words, names[t.name])] == [tools[1].name]
    hits = {"m": [Hit(tools[0].name, 1.0), Hit(tools[1].name, 0.9), Hit(tools[2].name, 0.9)]}
    plain = Fuser({"m": 1.0}, "convex", {"m": "max"}).fuse(request, hits, names)
    fused = Fuser({"m": 1.0}, "convex", {"m": "max"}, server_bonus=0.2).fuse(request, hits, names)
    assert fused[tools[0].name] == plain[tools[0].name]  # no bonus for git
    assert fused[tools[1].name] == pytest.approx(plain[tools[1].name] + 0.2)
    assert fused[tools[2].name] == plain[tools[2].name]
    # a plain mapping of name words reads the same catalogue the same way
    assert (
        Fuser({"m": 1.0}, "convex", {"m": "max"}, server_bonus=0.2).fuse(request, hits, dict(names))
        == fused
    )


def test_a_camel_case_word_the_catalogue_does_not_name_is_read_by_its_parts() -> None:
    names = name_table([Tool("mcp__notebook__edit_cell", "Edit a cell.")])
    words = query_words(parse_query("NotebookEdit the first cell"), names.vocabulary)
    assert {"notebookedit", "notebook", "edit"} <= words
    assert names_server(words, names["mcp__notebook__edit_cell"])


def test_a_registry_style_server_is_named_by_its_service() -> None:
    """``okta-mcp-server`` is named by "Okta": nobody asks for an "mcp server"."""
    okta = name_words(Tool("mcp__okta-mcp-server__list_users", "List users."))
    assert names_server(query_words(parse_query("list the users in Okta")), okta)
    assert okta.words == {"okta", "list", "users"}  # the Dice match is not diluted either
    assert okta.home == "okta-mcp-server"  # server support still groups by the whole name


def test_server_support_pulls_down_the_tools_of_a_server_whose_best_tool_ranks_low() -> None:
    tools = [
        Tool("mcp__github__create_issue", ""),
        Tool("mcp__github__list_issues", ""),
        Tool("mcp__jira__create_ticket", ""),
        Tool("search_web", ""),
    ]
    names = {t.name: name_words(t) for t in tools}
    scores = [1.0, 0.7, 0.75, 0.4]
    hits = {"m": [Hit(t.name, s) for t, s in zip(tools, scores, strict=True)]}
    query = parse_query("anything")
    plain = Fuser({"m": 1.0}, "convex", {"m": "max"}).fuse(query, hits, names)
    supported = Fuser({"m": 1.0}, "convex", {"m": "max"}, server_support=0.5).fuse(
        query, hits, names
    )
    # each tool gains half its own server's best; a tool with no server is a server of its own
    lead = {"github": plain[tools[0].name], "jira": plain[tools[2].name], None: plain["search_web"]}
    assert supported == {t.name: pytest.approx(plain[t.name] + 0.5 * lead[t.server]) for t in tools}
    order = sorted(supported, key=lambda name: -supported[name])
    assert order.index("mcp__github__list_issues") < order.index("mcp__jira__create_ticket")


@pytest.mark.parametrize(
    ("server_bonus", "server_support", "action_bonus"),
    [
        (0.0, 0.0, 0.0),
        (0.3, 0.0, 0.0),
        (0.0, 0.5, 0.0),
        (0.3, 0.8, 0.0),
        (0.0, 0.0, 0.2),
        (0.3, 0.5, 0.1),
    ],
)
def test_fusing_for_the_best_k_keeps_every_tool_that_can_reach_them(
    server_bonus: float, server_support: float, action_bonus: float
) -> None:
    rng = random.Random(3)
    vocabulary = [
        "create",
        "read",
        "update",
        "delete",
        "issue",
        "pull",
        "request",
        "file",
        "slack",
        "message",
        "list",
    ]
    servers = ["git", "chat", "files", "git_hub", ""]
    named = {
        f"mcp__{server}__{'_'.join(rng.sample(vocabulary, 2))}"
        if server
        else "_".join(rng.sample(vocabulary, 3))
        for server in (rng.choice(servers) for _ in range(80))
    }
    tools = [Tool(name, "") for name in sorted(named)]
    names = {tool.name: name_words(tool) for tool in tools}
    fuser = Fuser(
        {"embedding": 0.65, "bm25": 0.35},
        "convex",
        {"embedding": "minmax", "bm25": "max"},
        name_weight=0.2,
        exact_name_bonus=0.1,
        server_bonus=server_bonus,
        server_support=server_support,
        action_bonus=action_bonus,
    )
    left_out = 0
    for _ in range(200):
        query = parse_query(" ".join(rng.sample(vocabulary + servers, rng.randint(1, 9))))
        hits = {
            member: [Hit(t.name, rng.random()) for t in rng.sample(tools, rng.randint(0, 40))]
            for member in ("embedding", "bm25")
        }
        hits = {m: sorted(h, key=lambda hit: -hit.score) for m, h in hits.items()}
        full = fuser.fuse(query, hits, names)
        k = rng.randint(1, 12)
        pruned = fuser.fuse(query, hits, names, k)
        assert all(full[name] == score for name, score in pruned.items())
        best = sorted(full, key=lambda name: (-full[name], name))[:k]
        assert best == sorted(pruned, key=lambda name: (-pruned[name], name))[:k]
        # the members' order, which callers use to break ties, not a hash order
        assert list(full) == list(convex_fuse(hits, fuser.weights, fuser.methods))
        assert list(pruned) == [name for name in full if name in pruned]
        left_out += len(full) - len(pruned)
    assert left_out > 0  # the bound did leave tools out


def _siblings(request: str, action_bonus: float) -> list[str]:
    """The ranking of three tools of one server the member scores alike, read first."""
    tools = [
        Tool("mcp__asana__get_project_status", ""),
        Tool("mcp__asana__create_project_status", ""),
        Tool("mcp__asana__delete_project_status", ""),
    ]
    names = {t.name: name_words(t) for t in tools}
    hits = {"m": [Hit(t.name, s) for t, s in zip(tools, (0.8, 0.78, 0.76), strict=True)]}
    fuser = Fuser({"m": 1.0}, "convex", {"m": "max"}, server_support=0.5, action_bonus=action_bonus)
    fused = fuser.fuse(parse_query(request), hits, names)
    return sorted(fused, key=lambda name: -fused[name])


def test_the_action_bonus_puts_the_sibling_that_does_what_the_request_asks_first() -> None:
    request = "post the project status update in Asana"  # post: create or send
    assert _siblings(request, 0.0)[0] == "mcp__asana__get_project_status"
    assert _siblings(request, 0.2)[0] == "mcp__asana__create_project_status"
    removing = _siblings("remove the project status in Asana", 0.2)
    assert removing[0] == "mcp__asana__delete_project_status"


def test_a_request_without_an_action_word_leaves_the_ranking_alone() -> None:
    assert _siblings("asana project status", 0.2) == _siblings("asana project status", 0.0)


def test_the_action_bonus_comes_after_server_support_and_only_to_tools_with_a_server() -> None:
    tools = [
        Tool("mcp__git__create_issue", ""),
        Tool("mcp__git__list_issues", ""),
        Tool("create_ticket", ""),  # no server: no siblings to tell apart
    ]
    names = {t.name: name_words(t) for t in tools}
    hits = {"m": [Hit(tools[0].name, 0.5), Hit(tools[1].name, 1.0), Hit(tools[2].name, 0.4)]}
    query = parse_query("open an issue")  # open: create
    base = Fuser({"m": 1.0}, "convex", {"m": "max"}, server_support=0.5)
    plain = base.fuse(query, hits, names)
    acting = replace(base, action_bonus=0.3).fuse(query, hits, names)
    # the bonus does not raise the server's lead, so list_issues gains nothing from it
    assert acting == {
        tools[0].name: pytest.approx(plain[tools[0].name] + 0.3),
        tools[1].name: pytest.approx(plain[tools[1].name]),
        tools[2].name: pytest.approx(plain[tools[2].name]),
    }
