"""Catalogue files are read as strict JSON: what a hostile or corrupt file holds is a
:class:`CatalogError` naming the file and line, never a traceback or a silent guess."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from toolsearch.catalog import MAX_DEPTH, load_catalog, tool_from_dict
from toolsearch.cli import main
from toolsearch.errors import CatalogError


def nested_schema(depth: int) -> dict[str, object]:
    schema: dict[str, object] = {"type": "string"}
    for _ in range(depth):
        schema = {"type": "object", "properties": {"x": schema}}
    return schema


def jsonl(tmp_path: Path, *lines: str) -> Path:
    path = tmp_path / "tools.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


GOOD = '{"name": "Good", "description": "fine"}'


@pytest.mark.parametrize(
    ("line", "fragment"),
    [
        ('{"name": "A", "name": "B"}', "duplicate key 'name' in one object"),
        ('{"name": "A", "input_schema": {"default": NaN}}', "NaN is not a JSON number"),
        ('{"name": "A", "input_schema": {"maximum": Infinity}}', "Infinity is not a JSON number"),
        ('{"name": "A", "input_schema": {"maximum": 1e999}}', "does not fit a float"),
        ('{"name": "A", "input_schema": {"maximum": ' + "9" * 5000 + "}}", "5,000 digits"),
        ("[" * 10_000 + "]" * 10_000, "nested deeper than"),
    ],
    ids=["duplicate-key", "nan", "infinity", "overflow", "huge-int", "deep"],
)
def test_hostile_json_is_a_located_error(tmp_path: Path, line: str, fragment: str) -> None:
    path = jsonl(tmp_path, GOOD, line)
    with pytest.raises(CatalogError) as info:
        load_catalog(path)
    assert fragment in str(info.value)
    assert info.value.line == 2 and str(path) in str(info.value)


def test_json_files_are_strict_too(tmp_path: Path) -> None:
    path = tmp_path / "tools.json"
    path.write_text('[\n {"name": "A",\n  "description": "x", "description": "y"}\n]', "utf-8")
    with pytest.raises(CatalogError, match="duplicate key 'description'"):
        load_catalog(path)
    path.write_text("[" * 50_000 + "]" * 50_000, encoding="utf-8")
    with pytest.raises(CatalogError, match="nested deeper than"):
        load_catalog(path)


def test_schemas_deeper_than_the_limit_are_refused_and_shallower_ones_serialise() -> None:
    deep = {"name": "Deep", "input_schema": nested_schema(400)}
    with pytest.raises(CatalogError, match=f"deeper than {MAX_DEPTH} levels"):
        tool_from_dict(deep, path="tools.jsonl", line=3)
    ok = tool_from_dict({"name": "Ok", "input_schema": nested_schema(40)})
    assert json.loads(json.dumps(ok.definition()))["name"] == "Ok"


def test_values_json_cannot_hold_are_refused() -> None:
    with pytest.raises(CatalogError, match="must be plain JSON"):
        tool_from_dict({"name": "A", "input_schema": {"default": math.nan}})


def test_the_cli_reports_a_hostile_catalogue_without_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = jsonl(tmp_path, '{"name": "A", "input_schema": {"default": NaN}}')
    assert main(["request", "--catalog", str(path)]) == 2
    err = capsys.readouterr().err
    assert "NaN is not a JSON number" in err and "Traceback" not in err


def test_a_tool_built_in_code_refuses_a_schema_it_could_not_serialise() -> None:
    from toolsearch.tool import Tool

    with pytest.raises(ValueError, match=f"nests deeper than {MAX_DEPTH} levels"):
        Tool("Deep", input_schema=nested_schema(400))
