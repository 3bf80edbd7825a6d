"""A ``{"tools": [...]}`` object is a tools/list result (named for its server) or, when its
tools are already named in full, a wrapped catalogue kept as named."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from toolsearch.catalog import load_catalog
from toolsearch.errors import CatalogError


def _write(tmp_path: Path, names: list[str]) -> Path:
    path = tmp_path / "obj.json"
    tools = [{"name": n, "description": "d"} for n in names]
    path.write_text(json.dumps({"tools": tools}), encoding="utf-8")
    return path


def test_full_names_are_not_prefixed_twice(tmp_path: Path) -> None:
    path = _write(tmp_path, ["mcp__gmail__send_email", "mcp__slack__post"])
    assert [t.name for t in load_catalog(path)] == ["mcp__gmail__send_email", "mcp__slack__post"]


def test_plain_names_are_named_for_the_server(tmp_path: Path) -> None:
    path = _write(tmp_path, ["send_email"])
    assert [t.name for t in load_catalog(path)] == ["mcp__obj__send_email"]
    assert [t.name for t in load_catalog(path, server="gmail")] == ["mcp__gmail__send_email"]


def test_a_mix_of_full_and_plain_names_is_an_error(tmp_path: Path) -> None:
    path = _write(tmp_path, ["send_email", "mcp__gmail__read"])
    with pytest.raises(CatalogError, match=r"tools\[1\]\.name.*already have mcp__ names"):
        load_catalog(path)
