"""Catalogue loading: every format, and errors that name file, line and field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from toolsearch.catalog import load_catalog, tools_from_mcp_result
from toolsearch.errors import CatalogError


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_jsonl_with_extra_fields_kept(tmp_path: Path) -> None:
    path = write(
        tmp_path / "t.jsonl",
        '{"name": "mcp__a__b", "description": "d", "input_schema": {"type": "object"},'
        ' "annotations": {"readOnlyHint": true}}\n\n{"name": "Read", "always_load": true}\n',
    )
    tools = load_catalog(path)
    assert [t.name for t in tools] == ["mcp__a__b", "Read"]
    assert tools[0].metadata == {"annotations": {"readOnlyHint": True}}
    assert tools[1].always_load


def test_json_array_and_openai_function_wrapper(tmp_path: Path) -> None:
    data = [
        {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}},
        {"name": "x", "inputSchema": {"type": "object", "properties": {"q": {"type": "string"}}}},
    ]
    tools = load_catalog(write(tmp_path / "t.json", json.dumps(data)))
    assert [t.name for t in tools] == ["get_weather", "x"]
    assert tools[1].input_schema["properties"] == {"q": {"type": "string"}}


def test_mcp_tools_list_result_with_meta_hints(tmp_path: Path) -> None:
    result = {
        "tools": [
            {
                "name": "send message",
                "description": "Post",
                "inputSchema": {"type": "object"},
                "_meta": {"anthropic/searchHint": "  chat   post ", "anthropic/alwaysLoad": True},
            },
            {"name": "read", "inputSchema": {"type": "object"}},
        ]
    }
    tools = load_catalog(write(tmp_path / "my.server.json", json.dumps(result)))
    assert [t.name for t in tools] == ["mcp__my_server__send_message", "mcp__my_server__read"]
    assert tools[0].search_hint == "chat post" and tools[0].always_load
    assert tools[0].metadata["mcp_name"] == "send message"
    assert not tools[1].always_load
    server_wide = tools_from_mcp_result(result, "slack", always_load=True)
    assert all(t.always_load for t in server_wide)


def test_dataset_folder(tmp_path: Path) -> None:
    write(tmp_path / "tools.jsonl", '{"name": "a"}\n')
    assert [t.name for t in load_catalog(tmp_path)] == ["a"]


@pytest.mark.parametrize(
    ("text", "fragments"),
    [
        ('{"name": "a"}\n{"name": ', ["t.jsonl", "line 2", "invalid JSON"]),
        ('{"description": "x"}\n', ["line 1", "field 'name'", "missing"]),
        ('{"name": "a"}\n{"name": "a"}\n', ["line 2", "duplicate", "line 1"]),
        ('{"name": "a", "input_schema": []}\n', ["line 1", "field 'input_schema'", "JSON object"]),
        ('{"name": "a", "inputSchema": "x"}\n', ["field 'inputSchema'"]),
        ('{"name": 3}\n', ["field 'name'"]),
        ('{"name": "a b"}\n', ["whitespace"]),
        ('{"name": "a", "always_load": "yes"}\n', ["field 'always_load'"]),
        ('{"name": "a", "aliases": "b"}\n', ["field 'aliases'"]),
        ('["a"]\n', ["line 1", "JSON object"]),
    ],
)
def test_bad_jsonl_names_file_line_and_field(
    tmp_path: Path, text: str, fragments: list[str]
) -> None:
    path = write(tmp_path / "t.jsonl", text)
    with pytest.raises(CatalogError) as info:
        load_catalog(path)
    for fragment in fragments:
        assert fragment in str(info.value)


def test_bad_json_array_item(tmp_path: Path) -> None:
    path = write(tmp_path / "t.json", '[{"name": "a"}, {"name": "b", "input_schema": 1}]')
    with pytest.raises(CatalogError, match=r"field '\[1\]\.input_schema'"):
        load_catalog(path)


def test_invalid_json_reports_line(tmp_path: Path) -> None:
    with pytest.raises(CatalogError, match="line 3"):
        load_catalog(write(tmp_path / "t.json", '[\n{"name": "a"},\n oops]'))


def test_unreadable_and_non_utf8(tmp_path: Path) -> None:
    with pytest.raises(CatalogError, match=r"cannot read"):
        load_catalog(tmp_path / "missing.jsonl")
    (tmp_path / "bin.jsonl").write_bytes(b'{"name": "\xff"}\n')
    with pytest.raises(CatalogError, match="UTF-8"):
        load_catalog(tmp_path / "bin.jsonl")
    with pytest.raises(CatalogError, match=r"no tools\.jsonl"):
        load_catalog(tmp_path)


def test_wrong_top_level(tmp_path: Path) -> None:
    with pytest.raises(CatalogError, match="JSON array"):
        load_catalog(write(tmp_path / "t.json", '{"nope": 1}'))


def test_shared_catalogues_load() -> None:
    shared = Path(__file__).resolve().parents[2] / "shared" / "datasets"
    if not shared.is_dir():
        pytest.skip("public datasets not present")
    for name in ("mcp-docker-catalog", "mcp-github-catalog", "bfcl", "metatool"):
        assert load_catalog(shared / name)
