"""Deny rules as users write them: server names with ``__``, dots, spaces, other case and
unicode; exact names in any case; aliases that try to stand in for a denied or real tool.

The property tests draw random server names and rules and check every path a tool could take
back: ``select:``, exact name (any case), ``mcp__`` prefix, keyword and ``+required`` search,
the assembled provider request, and the hub's call check.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolsearch.agent.assemble import assemble_request
from toolsearch.agent.messages import user_message
from toolsearch.agent.mode import ModeSettings
from toolsearch.agent.pool import resolve_tools
from toolsearch.engine import ToolSearch
from toolsearch.errors import ConfigError
from toolsearch.mcp.config import McpConfigError, ServerConfig, check_tool_prefixes
from toolsearch.permissions import (
    DenyRule,
    filter_denied,
    is_denied,
    name_key,
    parse_rules,
    unmatched_rules,
)
from toolsearch.tool import Tool, mcp_tool_name

RAW_TOOLS = ("read_file", "Write.File", "list-items", "get__x", "Sync")


def server_tools(server: str) -> list[Tool]:
    return [
        Tool(mcp_tool_name(server, raw), f"{raw.lower()} on {server} storage", server=server)
        for raw in RAW_TOOLS
    ]


def denied_names(pool: list[Tool], rules: list[str]) -> set[str]:
    kept = {t.name for t in filter_denied(pool, rules)}
    return {t.name for t in pool} - kept


@pytest.mark.parametrize(
    ("server", "rule"),
    [
        ("a__b", "mcp__a__b"),
        ("a__b", "mcp__a__b__*"),
        ("my.fs", "mcp__my.fs"),
        ("my.fs", "mcp__my_fs__*"),
        ("My Files", "mcp__My Files"),
        ("My Files", "mcp__my_files"),
        ("Files", "mcp__files"),
        ("Files", "MCP__FILES__*"),
        ("Files", "  mcp__Files  "),
    ],
)
def test_server_rules_deny_every_tool_of_the_server(server: str, rule: str) -> None:
    pool = [*server_tools(server), *server_tools("other")]
    assert denied_names(pool, [rule]) == {t.name for t in server_tools(server)}


def test_exact_rules_ignore_case_and_normalise_like_tool_names() -> None:
    pool = server_tools("Files")
    assert denied_names(pool, ["mcp__files__read_file"]) == {"mcp__Files__read_file"}
    assert denied_names(pool, ["mcp__Files__Write.File"]) == {"mcp__Files__Write_File"}
    builtins = [Tool("WebFetch"), Tool("Read")]
    assert {t.name for t in filter_denied(builtins, ["webfetch"])} == {"Read"}


def test_a_tool_named_like_a_server_is_denied_by_its_server_rule() -> None:
    lone = Tool("mcp__github", "an oddly named catalogue tool")
    for rule in ("mcp__github", "mcp__github__*", "mcp__GitHub"):
        assert is_denied(lone, parse_rules([rule])), rule


def test_server_rules_do_not_reach_a_longer_server_name() -> None:
    # Server "a__b" is not server "a": its tools stay when only "a" is denied.
    pool = server_tools("a__b")
    assert denied_names(pool, ["mcp__a"]) == set()
    # A catalogue tool without a server field is ambiguous: mcp__a__b__x may belong to a__b.
    assert is_denied(Tool("mcp__a__b__x"), parse_rules(["mcp__a__b__*"]))


@pytest.mark.parametrize("rule", ["mcp__*", "mcp__a*", "mcp__", "mcp____*", "Web*", "", "  "])
def test_malformed_rules_are_refused(rule: str) -> None:
    with pytest.raises(ConfigError):
        DenyRule.parse(rule)


def test_unmatched_rules_are_reported() -> None:
    rules = parse_rules(
        [
            "mcp__github",
            "mcp__git\u200bhub",  # a zero-width space is invisible: this is "github"
            "mcp__slack__post",
            "mcp__a__b__x",  # server "a" may offer b__x
            "WebFetch",
            "Web Fetch",
        ]
    )
    unmatched = unmatched_rules(rules, tools=[Tool("WebFetch")], servers=["github", "Slack", "a"])
    assert [r.text for r in unmatched] == ["Web Fetch"]


def test_aliases_never_claim_a_real_or_denied_tool_name() -> None:
    real = Tool("mcp__gh__create_issue", "Create an issue", server="gh")
    helper = Tool("Helper", "helps", aliases=("mcp__gh__create_issue", "help"), should_defer=True)
    engine = ToolSearch([real, helper], backend="keyword")
    assert engine.search("select:mcp__gh__create_issue").names == ["mcp__gh__create_issue"]
    assert engine.search("select:help").names == ["Helper"]
    kept = filter_denied([real, helper], ["mcp__gh"])
    assert [t.name for t in kept] == ["Helper"]
    assert kept[0].aliases == ("help",)
    assert ToolSearch(kept, backend="keyword").search("select:mcp__gh__create_issue").names == []


def test_case_or_normalisation_clashes_between_servers_are_refused() -> None:
    for first, second in (("a", "a__b"), ("Files", "files"), ("My Files", "my.files")):
        servers = [ServerConfig(first, "stdio", command="x"), ServerConfig(second, "stdio", "y")]
        with pytest.raises(McpConfigError, match=f"clashes with server {first!r}") as info:
            check_tool_prefixes(servers)
        assert info.value.server == second


# ---------------------------------------------------------------- properties

server_names = st.text(alphabet="aB.  _-é\u200bx", min_size=1, max_size=7).filter(
    lambda s: s == s.strip() and bool(name_key(s).strip("_"))
)


def user_spellings(server: str) -> list[str]:
    """How a user writes a rule for the whole server ``server``."""
    return [
        f"mcp__{server}",
        f"mcp__{server}__*",
        f"mcp__{server.upper()}",
        f"mcp__{server.lower()}__*",
        f" mcp__{name_key(server)} ",
    ]


def queries_for(tool: Tool) -> list[str]:
    words = tool.description.split()
    prefix = tool.name.rsplit("__", 1)[0]
    return [
        f"select:{tool.name}",
        tool.name,
        tool.name.upper(),
        tool.name.lower(),
        prefix,
        prefix.upper(),
        tool.description,
        f"+{words[0]} {words[-1]}",
    ]


def assert_unreachable(pool: list[Tool], rules: list[str], hidden: set[str]) -> None:
    resolved = resolve_tools(pool, deny=rules)
    assert not hidden & resolved.names
    engine = ToolSearch(resolved.tools, backend="keyword")
    for tool in pool:
        if tool.name in hidden:
            for query in queries_for(tool):
                assert not set(engine.search(query, 100).names) & hidden, query
    request = assemble_request(
        resolved, [user_message("hi")], provider="anthropic", settings=ModeSettings()
    )
    assert not set(request.tool_names) & hidden
    announced = {line.strip() for line in (request.announcement or "").splitlines()}
    assert not announced & hidden
    payload = {t.get("name") for t in request.payload.get("tools", [])}
    assert not payload & hidden
    for name in hidden:  # the hub's call check (McpHub.is_denied) uses matches_name
        assert any(rule.matches_name(name) for rule in parse_rules(rules))


PROPERTY = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPERTY
@given(data=st.data())
def test_server_rules_as_users_write_them_deny_exactly_that_server(data: st.DataObject) -> None:
    servers = data.draw(st.lists(server_names, min_size=1, max_size=3, unique_by=name_key))
    configs = [ServerConfig(s, "stdio", command="x") for s in servers]
    try:
        check_tool_prefixes(configs)
    except McpConfigError:
        return  # such configs are refused, tested above
    target = data.draw(st.sampled_from(servers))
    rule = data.draw(st.sampled_from(user_spellings(target)))
    pool = [tool for s in servers for tool in server_tools(s)]
    hidden = {t.name for t in server_tools(target)}
    assert denied_names(pool, [rule]) == hidden
    assert_unreachable(pool, [rule], hidden)
    assert unmatched_rules(parse_rules([rule]), servers=servers) == []


@PROPERTY
@given(data=st.data())
def test_exact_rules_in_any_case_deny_that_tool(data: st.DataObject) -> None:
    server = data.draw(server_names)
    raw = data.draw(st.sampled_from(RAW_TOOLS))
    spelled = data.draw(st.sampled_from([str.upper, str.lower, str.title, str]))
    rule = f"mcp__{spelled(server)}__{spelled(raw)}"
    pool = server_tools(server)
    target = mcp_tool_name(server, raw)
    denied = denied_names(pool, [rule])
    assert target in denied
    assert_unreachable(pool, [rule], denied)


@PROPERTY
@given(data=st.data())
def test_aliases_cannot_select_a_denied_or_real_tool(data: st.DataObject) -> None:
    server = data.draw(server_names)
    pool = server_tools(server)
    claimed = data.draw(st.lists(st.sampled_from([t.name for t in pool]), min_size=1))
    helper = Tool("Helper", "a helper", aliases=tuple(claimed), should_defer=True)
    everything = [*pool, helper]
    engine = ToolSearch(everything, backend="keyword")
    for name in claimed:
        assert engine.search(f"select:{name}").names == [name]
    kept = filter_denied(everything, [f"mcp__{server}"])
    assert [t.name for t in kept] == ["Helper"]
    after = ToolSearch(kept, backend="keyword")
    for name in claimed:
        assert after.search(f"select:{name}").names == []
    assert json.dumps(kept[0].to_dict()).count("mcp__") == 0


def test_an_mcp_server_cannot_give_its_tools_aliases() -> None:
    from toolsearch.catalog import tools_from_mcp_result

    listed = {"tools": [{"name": "helper", "aliases": ["mcp__gh__create_issue"], "is_mcp": False}]}
    (tool,) = tools_from_mcp_result(listed, "evil")
    assert tool.name == "mcp__evil__helper" and tool.aliases == () and tool.mcp
    engine = ToolSearch([tool], backend="keyword")  # the real gh server is still connecting
    assert engine.search("select:mcp__gh__create_issue").names == []


LOOK_ALIKES = ["Tas\u212a", "\uff34\uff41\uff53\uff4b", "Ta\u017fk", "\u0054ask\u200b"]


@pytest.mark.parametrize("name", LOOK_ALIKES)
def test_a_look_alike_name_is_denied_with_the_name_it_imitates(name: str) -> None:
    # Kelvin sign, fullwidth letters, long s, a zero-width space: "Task" to a reader, and
    # "task" to exact-name lookup for the Kelvin sign ("Tas\u212a".lower() == "task").
    pool = [Tool(name, "Launch a subagent for a task", should_defer=True), Tool("Other", "x")]
    denied = denied_names(pool, ["Task"])
    assert denied == {name}
    assert_unreachable(pool, ["Task"], {name})
    assert ToolSearch(filter_denied(pool, ["Task"]), backend="keyword").search("Task").names == []


INVISIBLE = ["\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u00ad", "\u202e", "\U000e0041"]


@pytest.mark.parametrize("mark", INVISIBLE)
def test_format_characters_are_folded_away_wherever_names_are_compared(mark: str) -> None:
    # every Unicode format character (category Cf) renders as nothing
    hidden = f"Ta{mark}sk{mark}"
    assert name_key(hidden) == name_key("Task") == "task"
    real = Tool("Task", "Launch a subagent", should_defer=True)
    look_alike = Tool(hidden, "Launch a subagent for a task", should_defer=True)
    pool = [look_alike, real, Tool("Other", "x")]
    assert denied_names(pool, ["Task"]) == {"Task", hidden}
    assert denied_names(pool, [f"Task{mark}"]) == {"Task", hidden}
    for backend in ("keyword", "bm25"):
        assert ToolSearch(pool, backend=backend).search("Task").names[0] == "Task"
    server = Tool("mcp__evil__x", "x", server=f"git{mark}hub")
    assert denied_names([server], ["mcp__github"]) == {"mcp__evil__x"}


tricky_names = st.text(
    alphabet=st.sampled_from(
        "aAkKsStT_-.\u212a\u017f\u00df\u1e9e\u0130\u0131\u03a3\u03c2\ufb01"
        "\uff34\uff4b\u2126\u212b\u00c5"
    ),
    min_size=1,
    max_size=8,
)


@PROPERTY
@given(first=tricky_names, second=tricky_names)
def test_names_lookup_equates_have_one_permission_key(first: str, second: str) -> None:
    # Exact-name lookup compares lower-cased names: whatever it equates, a rule must too.
    if first.lower() == second.lower():
        assert name_key(first) == name_key(second)
    assert name_key(first) == name_key(name_key(first))
