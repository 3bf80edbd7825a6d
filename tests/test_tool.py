"""The tool model, MCP naming, the deferral rule and pool order (docs/reference-behaviour.md §1)."""

from __future__ import annotations

import pytest

from toolsearch.matching import parse_tool_name
from toolsearch.tool import TOOL_SEARCH_NAME, Tool, is_deferred, mcp_tool_name, pool_order


def test_mcp_name_normalisation() -> None:
    assert mcp_tool_name("my server.io", "get/item v2") == "mcp__my_server_io__get_item_v2"
    assert mcp_tool_name("a-b", "c_d") == "mcp__a-b__c_d"


def test_server_and_is_mcp_are_derived_unless_given() -> None:
    tool = Tool("mcp__slack__send_message")
    assert (tool.server, tool.mcp) == ("slack", True)
    assert Tool("Read").server is None and not Tool("Read").mcp
    assert Tool("lookup", server="crm").mcp
    assert not Tool("mcp__x__y", is_mcp=False).mcp


def test_search_hint_whitespace_collapsed() -> None:
    assert Tool("A", search_hint="  edit \n notebooks ").search_hint == "edit notebooks"
    assert Tool("A", search_hint="   ").search_hint is None


@pytest.mark.parametrize("name", ["", "  ", "has space", "tab\there"])
def test_invalid_names_rejected(name: str) -> None:
    with pytest.raises(ValueError, match="name"):
        Tool(name)


def test_schema_must_be_an_object() -> None:
    with pytest.raises(ValueError, match="input_schema"):
        Tool("A", input_schema=["not", "an", "object"])  # type: ignore[arg-type]


def test_deferral_rules_in_order() -> None:
    assert not is_deferred(Tool("mcp__a__b", always_load=True))
    assert is_deferred(Tool("mcp__a__b"))
    assert not is_deferred(Tool(TOOL_SEARCH_NAME, should_defer=True))
    assert is_deferred(Tool("WebFetch", should_defer=True))
    assert not is_deferred(Tool("Read"))


def test_pool_order_builtins_first_and_builtin_wins_clash() -> None:
    builtin = Tool("Zeta", "built in")
    clash = Tool("Zeta", "from a server", server="srv")
    pool = pool_order([Tool("mcp__b__x"), clash, Tool("mcp__a__y"), Tool("Alpha"), builtin])
    assert [t.name for t in pool] == ["Alpha", "Zeta", "mcp__a__y", "mcp__b__x"]
    assert pool[1].description == "built in"


def test_content_hash_tracks_searchable_fields() -> None:
    a = Tool("mcp__a__b", "one")
    assert a.content_hash() == Tool("mcp__a__b", "one").content_hash()
    assert a.content_hash() != Tool("mcp__a__b", "two").content_hash()


@pytest.mark.parametrize(
    ("name", "parts", "full"),
    [
        ("mcp__slack__send_message", ("slack", "send", "message"), "slack send message"),
        ("mcp__my-srv__get__thing", ("my-srv", "get", "thing"), "my-srv get thing"),
        ("NotebookEdit", ("notebook", "edit"), "notebook edit"),
        ("web_fetch_URL", ("web", "fetch", "url"), "web fetch url"),
        ("HTTPServer", ("httpserver",), "httpserver"),
    ],
)
def test_name_parsing(name: str, parts: tuple[str, ...], full: str) -> None:
    parsed = parse_tool_name(name)
    assert (parsed.parts, parsed.full) == (parts, full)
