"""The framework-neutral pool every integration shares (no framework needed)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from toolsearch.errors import ConfigError
from toolsearch.integrations.deferred import DeferredPool, Savings, framework_tool
from toolsearch.tokens import CharEstimate, definition_text
from toolsearch.tool import TOOL_SEARCH_NAME, Tool


def test_importing_the_package_loads_no_framework() -> None:
    code = (
        "import sys, toolsearch.integrations as i; i.DeferredPool\n"
        "loaded = [m for m in ('langchain', 'langgraph', 'agents', 'pydantic_ai', 'google.adk', "
        "'crewai') "
        "if m in sys.modules]\n"
        "print(loaded)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_framework_tools_are_deferred_unless_loaded_up_front() -> None:
    assert framework_tool("a", None, None, deferred=True).should_defer
    upfront = framework_tool("b", "B", {"type": "object"}, deferred=False)
    assert upfront.always_load and upfront.description == "B"


@pytest.mark.parametrize(
    ("names", "message"),
    [
        ([TOOL_SEARCH_NAME], "a framework tool is named 'ToolSearch'"),
        (["a", "b", "a"], "two framework tools share a name: a"),
    ],
)
def test_bad_tool_lists_are_refused(names: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        DeferredPool([Tool(n) for n in names], backend="keyword")


def test_denied_tools_are_neither_found_nor_callable(workbench: list[Tool]) -> None:
    pool = DeferredPool(workbench, deny=["mcp__stripe"], backend="keyword")
    answer = pool.search("select:mcp__stripe__create_refund,mcp__slack__send_message")
    assert answer.names == ("mcp__slack__send_message",)
    assert "Not found: mcp__stripe__create_refund" in answer.text
    assert "mcp__stripe" not in pool.announcement()
    assert pool.call_error("mcp__stripe__create_refund") == (
        "No such tool available: mcp__stripe__create_refund"
    )
    assert pool.call_error("mcp__slack__send_message") is None


def test_a_saved_discovered_set_is_restored_without_denied_tools(workbench: list[Tool]) -> None:
    saved = ["mcp__slack__send_message", "mcp__stripe__create_refund"]
    pool = DeferredPool(workbench, deny=["mcp__stripe__create_refund"], discovered=saved)
    assert pool.discovered == ("mcp__slack__send_message",)
    assert [t.name for t in pool.visible()] == [TOOL_SEARCH_NAME, "mcp__slack__send_message"]


def test_bad_arguments_come_back_as_an_error_text(workbench: list[Tool]) -> None:
    pool = DeferredPool(workbench, backend="keyword")
    answer = pool.search("slack", 0)
    assert answer.is_error and answer.names == ()
    assert answer.text == "ToolSearch error: max_results must be between 1 and 100, got 0"
    assert pool.search(None).text == "ToolSearch error: 'query' must be a string, got None"


def test_savings_count_what_is_sent_against_every_tool_bound(workbench: list[Tool]) -> None:
    counter = CharEstimate()
    pool = DeferredPool(workbench, backend="keyword", counter=counter)
    pool.search("select:mcp__slack__send_message")
    figures = pool.count_request()
    sent = [pool.engine.get(TOOL_SEARCH_NAME), pool.engine.get("mcp__slack__send_message")]
    expected = sum(counter.count(definition_text(t)) for t in sent if t is not None)
    assert figures.tokens_sent == expected + counter.count(pool.announcement())
    assert figures.tokens_without_search == sum(
        counter.count(definition_text(t)) for t in workbench
    )
    pool.count_request()
    assert pool.savings() == Savings(2, 2 * figures.tokens_sent, 2 * figures.tokens_without_search)
    assert pool.savings().percent == round(100 * figures.saved / figures.tokens_without_search, 1)


def test_a_pool_without_a_hub_cannot_call_one() -> None:
    pool = DeferredPool([Tool("a", should_defer=True)], backend="keyword")
    with pytest.raises(ConfigError, match="this pool has no MCP hub"):
        pool.call_hub("a", {})


def adapter_tools() -> list[Tool]:
    """Tools an MCP adapter named its own way (``<server>_<tool>``), with the server known."""
    return [
        framework_tool(
            f"workspace_{tool}",
            f"{tool} on the workspace",
            None,
            deferred=True,
            server="workspace",
            server_tool=tool,
        )
        for tool in ("github_delete_repository", "github_list_issue")
    ]


@pytest.mark.parametrize(
    "rule", ["mcp__workspace", "mcp__workspace__*", "mcp__workspace__github_delete_repository"]
)
def test_server_rules_apply_to_tools_an_adapter_named(rule: str) -> None:
    pool = DeferredPool(adapter_tools(), deny=[rule], backend="keyword")
    assert pool.pool.get("workspace_github_delete_repository") is None
    assert pool.is_denied("workspace_github_delete_repository")
    answer = pool.search("select:mcp__workspace__github_delete_repository")
    assert answer.names == ()


def test_the_claude_code_name_of_an_adapter_tool_selects_it() -> None:
    pool = DeferredPool(adapter_tools(), backend="keyword")
    answer = pool.search("select:mcp__workspace__github_list_issue")
    assert answer.names == ("workspace_github_list_issue",)


def test_a_tool_outside_the_pool_is_denied_by_its_server() -> None:
    pool = DeferredPool([], deny=["mcp__github"], backend="keyword")
    assert pool.is_denied("create_issue", server="github")
    assert pool.is_denied("github_create_issue", server="github", server_tool="create_issue")
    assert not pool.is_denied("create_issue", server="gitlab")


@pytest.mark.parametrize(
    ("rule", "hint"),
    [
        ("mcp__gitlab__", "write mcp__gitlab or mcp__gitlab__*"),
        ("workspace", "'workspace' is a server: write mcp__workspace"),
        ("gitlab", ""),
        ("\uff4d\uff43\uff50__gitlab", "look-alike characters"),
    ],
)
def test_a_rule_that_matches_no_tool_warns(rule: str, hint: str) -> None:
    import re

    from toolsearch.integrations.deferred import DenyRuleWarning

    pool = DeferredPool(adapter_tools(), deny=[rule, "mcp__workspace"], backend="keyword")
    with pytest.warns(DenyRuleWarning, match=f"deny rule {rule!r} matches no tool") as caught:
        pool.visible()
    assert re.search(re.escape(hint), str(caught[0].message))
    assert pool.pool.deferred == ()


def test_a_rule_for_a_tool_outside_the_pool_does_not_warn() -> None:
    pool = DeferredPool(adapter_tools(), deny=["delete_everything"], backend="keyword")
    pool.note_outside([framework_tool("delete_everything", None, None, deferred=False)])
    pool.visible()


def test_loaded_names_are_read_back_from_the_result_text() -> None:
    from toolsearch.integrations.deferred import loaded_names

    pool = DeferredPool(adapter_tools(), backend="keyword")
    answer = pool.search("select:workspace_github_list_issue,workspace_github_delete_repository")
    assert loaded_names(answer.text) == answer.names
    assert loaded_names("No matching deferred tools found") == ()


def test_found_tools_keep_all_or_the_called_and_the_latest_search() -> None:
    from toolsearch.integrations.deferred import FoundTools

    found = FoundTools()
    found.record_search("s1", ["a", "b"])
    found.record_call("a")
    found.record_search("s2", [])  # a search that loaded nothing is not the latest
    found.record_search("s3", ["c", "b"])
    found.record_search("s3", ["x"])  # the same call read again: no change
    assert found.loaded() == ("a", "b", "c")
    assert found.loaded("called") == ("a", "b", "c")
    found.record_search("s4", ["d"])
    assert found.loaded("called") == ("a", "d")


def test_keep_loaded_must_be_known() -> None:
    with pytest.raises(ConfigError, match="keep_loaded must be one of all, called, got 'some'"):
        DeferredPool([], keep_loaded="some")  # type: ignore[arg-type]
