"""Tool-aware tokenisation: identifiers, scripts without spaces, fields, queries, any text."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolsearch.errors import ConfigError
from toolsearch.query import ParsedQuery, parse_query
from toolsearch.tokenize import (
    DEFAULT_FIELD_WEIGHTS,
    FIELDS,
    MAX_QUERY_TOKENS,
    check_field_weights,
    param_names,
    query_tokens,
    service_words,
    split_tool_name,
    tokenize,
    tool_fields,
    weighted_tokens,
)
from toolsearch.tool import Tool


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("send_message", ["send", "message"]),
        ("uber.ride", ["uber", "ride"]),
        ("e-mail to a/b", ["e", "mail", "to", "a", "b"]),
        ("NotebookEdit", ["notebookedit", "notebook", "edit"]),
        ("getHTTPResponse", ["gethttpresponse", "get", "http", "response"]),
        ("GitHub", ["github", "git", "hub"]),
        ("base64Encode", ["base64encode", "base64", "encode"]),
        ("HTTP API", ["http", "api"]),
        ("Hello, World!", ["hello", "world"]),
        ("Straße", ["strasse"]),
        ("\uff21\uff22\uff23", ["abc"]),  # full-width letters
        ("café naïve", ["café", "naïve"]),
        ("cafe\u0301", ["café"]),  # NFKC composes the accent
        ("Привет мир", ["привет", "мир"]),
        ("हिन्दी भाषा", ["हिन्दी", "भाषा"]),  # vowel signs stay inside the word
        ("", []),
        ("  \t\n ", []),
        ("!!! ... ___", []),
    ],
)
def test_words_and_identifiers(text: str, tokens: list[str]) -> None:
    assert tokenize(text) == tokens


def test_cjk_runs_become_characters_and_bigrams() -> None:
    assert tokenize("天气预报") == ["天", "气", "预", "报", "天气", "气预", "预报"]
    assert tokenize("天") == ["天"]
    # Script changes split words: Latin and Han are separate runs.
    assert tokenize("iPhone手机") == ["iphone", "i", "phone", "手", "机", "手机"]
    assert "テキ" in tokenize("日本語のテキスト")
    assert "한국" in tokenize("한국어")


def test_split_tool_name() -> None:
    assert split_tool_name("mcp__github__create_issue") == (["github"], ["create", "issue"])
    assert split_tool_name("mcp__github_eu2__list_pull_requests") == (
        ["github", "eu2"],
        ["list", "pull", "requests"],
    )
    assert split_tool_name("mcp__my-server__do.thing") == (["my", "server"], ["do", "thing"])
    assert split_tool_name("mcp__solo") == (["solo"], [])
    assert split_tool_name("ChaDri.change_drink") == (
        [],
        ["chadri", "cha", "dri", "change", "drink"],
    )


def test_param_names_nested_and_tolerant() -> None:
    schema = {
        "type": "object",
        "properties": {
            "userId": {"type": "string"},
            "filter": {
                "type": "object",
                "properties": {"createdAfter": {"type": "string"}},
            },
            "tags": {"type": "array", "items": {"properties": {"label": {}}}},
            "choice": {"anyOf": [{"properties": {"left": {}}}, {"properties": {"right": {}}}]},
            "odd": "not a schema",
        },
    }
    assert param_names(schema) == [
        "userId",
        "filter",
        "createdAfter",
        "tags",
        "label",
        "choice",
        "left",
        "right",
        "odd",
    ]
    assert param_names("nonsense") == []
    assert param_names({"properties": ["not", "a", "mapping"]}) == []


def test_param_names_stop_at_max_depth() -> None:
    deep: dict[str, object] = {}
    node = deep
    for i in range(50):
        child: dict[str, object] = {}
        node["properties"] = {f"p{i}": child}
        node = child
    assert param_names(deep, max_depth=3) == ["p0", "p1", "p2", "p3"]


def test_tool_fields() -> None:
    tool = Tool(
        "mcp__slack__send_message",
        "Post a message to a Slack channel.",
        {"type": "object", "properties": {"channelId": {}, "text": {}}},
        search_hint="chat post",
        aliases=("slack_post",),
    )
    fields = tool_fields(tool)
    assert fields.server == ("slack",)
    assert fields.name == ("send", "message", "slack", "post")
    assert fields.description == ("post", "a", "message", "to", "a", "slack", "channel")
    assert fields.hint == ("chat", "post")
    assert fields.params == ("channelid", "channel", "id", "text")
    assert fields.column_text()["params"] == "channelid channel id text"
    assert set(fields.column_text()) == set(FIELDS)


def test_non_mcp_tool_takes_its_server_field() -> None:
    fields = tool_fields(Tool("lookup", "Find things.", server="Acme Corp", is_mcp=False))
    assert fields.server == ("acme", "corp")


def test_packaging_words_are_not_server_words() -> None:
    """``okta-mcp-server`` names Okta: "mcp", "server" and "remote" say how it is packaged."""
    fields = tool_fields(Tool("mcp__okta-mcp-server__list_users", "List users."))
    assert (fields.server, fields.name) == (("okta",), ("list", "users"))
    assert tool_fields(Tool("x", server="notion-remote", is_mcp=False)).server == ("notion",)
    assert service_words(["mcp", "server", "git"]) == ["git"]
    assert service_words(["mcp", "server"]) == ["mcp", "server"]  # nothing else: all kept
    # only the server part: a tool's own name keeps the word
    assert tool_fields(Tool("mcp__kubectl-mcp__get_server_info")).name == ("get", "server", "info")


def test_schema_cache_is_keyed_by_identity() -> None:
    schema = {"properties": {"alpha": {}}}
    other = {"properties": {"beta": {}}}
    cache: dict[int, tuple[object, tuple[str, ...]]] = {}
    first = tool_fields(Tool("a", input_schema=schema), schema_cache=cache)
    second = tool_fields(Tool("b", input_schema=other), schema_cache=cache)
    again = tool_fields(Tool("c", input_schema=schema), schema_cache=cache)
    assert (first.params, second.params, again.params) == (("alpha",), ("beta",), ("alpha",))


def test_weighted_tokens_repeat_fields() -> None:
    fields = tool_fields(Tool("mcp__s__get_item", "Fetch one."))
    bag = weighted_tokens(fields, DEFAULT_FIELD_WEIGHTS)
    assert bag.count("get") == DEFAULT_FIELD_WEIGHTS["name"]
    assert bag.count("s") == DEFAULT_FIELD_WEIGHTS["server"]
    assert bag.count("fetch") == DEFAULT_FIELD_WEIGHTS["description"]
    assert weighted_tokens(fields, {"description": 1}) == ["fetch", "one"]


def test_check_field_weights() -> None:
    assert check_field_weights(None, integer=True) == dict(DEFAULT_FIELD_WEIGHTS)
    assert check_field_weights({"name": 5}, integer=True)["name"] == 5
    assert check_field_weights({"name": 2.5}, integer=False)["name"] == 2.5
    with pytest.raises(ConfigError, match="unknown field 'nmae'"):
        check_field_weights({"nmae": 1}, integer=True)
    with pytest.raises(ConfigError, match="non-negative integer"):
        check_field_weights({"name": 1.5}, integer=True)
    with pytest.raises(ConfigError, match="non-negative number"):
        check_field_weights({"name": -1}, integer=False)
    with pytest.raises(ConfigError, match="non-negative number"):
        check_field_weights({"name": float("nan")}, integer=False)
    with pytest.raises(ConfigError, match="non-negative"):
        check_field_weights({"name": True}, integer=True)
    with pytest.raises(ConfigError, match="at least one field"):
        check_field_weights(dict.fromkeys(FIELDS, 0), integer=True)
    with pytest.raises(ConfigError, match="mapping"):
        check_field_weights([("name", 1)], integer=True)  # type: ignore[arg-type]


def test_query_tokens_required_first_and_camel_case_kept() -> None:
    assert query_tokens(parse_query("send +Slack createIssue")) == [
        "slack",
        "send",
        "createissue",
        "create",
        "issue",
    ]
    assert query_tokens(parse_query("weather weather")) == ["weather", "weather"]
    assert query_tokens(parse_query("   ")) == []


def test_query_tokens_read_a_camel_case_word_whole_when_the_catalogue_knows_it() -> None:
    known = {"github", "paypal", "hubspot"}
    assert query_tokens(parse_query("GitHub PayPal HubSpot"), whole=known) == [
        "github",
        "paypal",
        "hubspot",
    ]
    assert query_tokens(parse_query("GitHub")) == ["github", "git", "hub"]  # nothing known
    assert query_tokens(parse_query("createIssue"), whole=known) == [
        "createissue",
        "create",
        "issue",
    ]
    assert tokenize("天气预报", whole={"天"}) == tokenize("天气预报")  # not a camel-case word


def test_query_tokens_fall_back_to_terms_when_raw_does_not_line_up() -> None:
    query = ParsedQuery(raw="unrelated", terms=("get", "+user"), required=("user",), optional=())
    assert query_tokens(query) == ["user"]


def test_query_tokens_are_capped() -> None:
    query = parse_query("word " * (MAX_QUERY_TOKENS * 3))
    assert len(query_tokens(query)) == MAX_QUERY_TOKENS
    assert len(query_tokens(query, limit=7)) == 7


def test_hundred_kilobyte_texts() -> None:
    assert len(tokenize("abc " * 25_000)) == 25_000
    assert len(tokenize("字" * 100_000)) == 100_000 + 99_999
    assert tokenize("x" * 100_000) == ["x" * 100_000]


def test_lone_surrogates_and_controls_do_not_raise() -> None:
    assert tokenize("\ud800bad\x00text\U0010ffff") == ["bad", "text"]


def test_non_strings_tokenise_to_nothing() -> None:
    assert tokenize(None) == []  # type: ignore[arg-type]
    assert tokenize(42) == []  # type: ignore[arg-type]


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(codec=None), max_size=200))
def test_tokenize_never_raises_and_tokens_are_clean(text: str) -> None:
    tokens = tokenize(text)
    for token in tokens:
        assert token
        assert not any(ch.isspace() for ch in token)
        # Only letters, digits and marks: the fts5 backend stores tokens joined by spaces and
        # lets SQLite's ASCII tokenizer split them again, which must give back the same tokens.
        assert all(ch.isalnum() for ch in token if ch.isascii())


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=120), st.text(max_size=60))
def test_query_tokens_never_raise(raw: str, noise: str) -> None:
    parsed = parse_query(raw + " +" + noise)
    tokens = query_tokens(parsed)
    assert len(tokens) <= MAX_QUERY_TOKENS


@settings(max_examples=150, deadline=None)
@given(
    st.text(min_size=1, max_size=40).filter(
        lambda s: s.strip() and not any(c.isspace() for c in s)
    ),
    st.text(max_size=100),
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=10),
        lambda inner: (
            st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
        ),
        max_leaves=12,
    ),
)
def test_tool_fields_never_raise(name: str, description: str, schema_part: object) -> None:
    tool = Tool(name, description, {"type": "object", "properties": {"x": schema_part}})
    fields = tool_fields(tool)
    assert "x" in fields.params
