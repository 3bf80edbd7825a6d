"""A lone surrogate (``\\udfff``: valid JSON escape, not Unicode text) is refused wherever a tool
is made — a catalogue file (naming file, line and field), an MCP ``tools/list`` result and a
``Tool`` built in code — so no backend ever meets text it cannot encode."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolsearch.catalog import load_catalog, tools_from_mcp_result
from toolsearch.cli import main
from toolsearch.errors import CatalogError
from toolsearch.tool import Tool

GOOD = '{"name": "list_dir", "description": "lists a folder"}'
# What a file holds: a JSON escape that decodes to a lone surrogate.
BROKEN = '{"name": "read_file", "description": "reads a file \\udfff here"}'


def write(tmp_path: Path, *lines: str) -> Path:
    path = tmp_path / "tools.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_a_catalogue_line_with_a_lone_surrogate_is_an_error_naming_it(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD, BROKEN)
    with pytest.raises(CatalogError) as caught:
        load_catalog(path)
    error = caught.value
    assert (error.path, error.line, error.field) == (str(path), 2, "description")
    assert "lone surrogate U+DFFF at character 13" in str(error)


@pytest.mark.parametrize(
    ("record", "field"),
    [
        ('{"name": "x\\ud800"}', "name"),
        ('{"name": "x", "search_hint": "a \\udc00"}', "search_hint"),
        ('{"name": "x", "aliases": ["ok", "\\udfff"]}', "aliases[1]"),
        (
            '{"name": "x", "inputSchema": {"properties": {"p\\udfff": {}}}}',
            "inputSchema.properties",
        ),
        ('{"name": "x", "parameters": {"enum": ["a", "\\udfff"]}}', "parameters.enum[1]"),
        ('{"name": "x", "vendor": {"note": "\\udfff"}}', "vendor.note"),
    ],
)
def test_every_field_is_checked(tmp_path: Path, record: str, field: str) -> None:
    with pytest.raises(CatalogError) as caught:
        load_catalog(write(tmp_path, record))
    assert caught.value.field == field and caught.value.line == 1


def test_the_cli_prints_one_line_instead_of_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, GOOD, BROKEN)
    for backend in ("keyword", "bm25", "fts5"):
        code = main(["search", "read a file", "--catalog", str(path), "--backend", backend])
        err = capsys.readouterr().err
        assert code == 2, backend
        assert "Traceback" not in err and f"{path}, line 2, field 'description'" in err


def test_mcp_results_and_tools_built_in_code_follow_the_same_rule() -> None:
    listing = {"tools": [{"name": "ok"}, {"name": "read", "description": "a \udfff b"}]}
    with pytest.raises(CatalogError, match=r"field '\[1\]\.description'.*lone surrogate"):
        tools_from_mcp_result(listing, "files")
    with pytest.raises(ValueError, match="tool 'read': description has a lone surrogate"):
        Tool("read", "a \udfff b")
    with pytest.raises(ValueError, match=r"input_schema\.properties\.p\.description"):
        Tool("read", input_schema={"properties": {"p": {"description": "\ud83d"}}})
    assert Tool("read", "a \U0001f600 pair is fine").content_hash()
