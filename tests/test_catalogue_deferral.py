"""One deferral rule for catalogue files: the library, the CLI and the benchmark agree.

A catalogue lists the tools to search, so a plain tool in a catalogue file is deferred unless its
record says ``always_load: true`` or ``should_defer: false``; a tool built in code keeps the
reference default (not deferred). A search over a pool without deferred tools says so.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from toolsearch import ToolSearch, load_catalog
from toolsearch.bench.runner import deferred_catalog
from toolsearch.catalog import tool_from_dict
from toolsearch.cli import build_parser, main
from toolsearch.tool import Tool, is_deferred

ROOT = Path(__file__).resolve().parents[1]

PLAIN = [
    {"name": "send_invoice", "description": "Send an invoice to a customer by email."},
    {"name": "refund_payment", "description": "Refund a card payment."},
    {"name": "kept_loaded", "description": "Send a fax.", "should_defer": False},
    {"name": "always_there", "description": "Send a letter.", "always_load": True},
]


def write_catalogue(tmp_path: Path, records: list[dict[str, object]]) -> Path:
    path = tmp_path / "my.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def cli_names(capsys: pytest.CaptureFixture[str], query: str, catalog: Path) -> list[str]:
    argv = ["search", query, "--catalog", str(catalog), "--backend", "keyword", "--json"]
    assert main(argv) == 0
    return [m["name"] for m in json.loads(capsys.readouterr().out)["matches"]]


def test_the_library_finds_a_plain_catalogues_tools(tmp_path: Path) -> None:
    engine = ToolSearch(load_catalog(write_catalogue(tmp_path, PLAIN)), backend="keyword")
    assert [t.name for t in engine.deferred] == ["refund_payment", "send_invoice"]
    assert engine.search("invoice customer").names == ["send_invoice"]


@pytest.mark.parametrize("query", ["send", "refund", "fax", "letter", "select:kept_loaded"])
def test_library_cli_and_bench_use_one_rule(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], query: str
) -> None:
    path = write_catalogue(tmp_path, PLAIN)
    engine = ToolSearch(load_catalog(path), backend="keyword")
    assert cli_names(capsys, query, path) == engine.search(query).names
    plain = [t for t in load_catalog(path) if t.name in {"send_invoice", "refund_payment"}]
    assert deferred_catalog(plain) == plain  # the benchmark changes nothing about plain tools


def test_a_tool_built_in_code_keeps_the_reference_default() -> None:
    assert not is_deferred(Tool("Read", "Reads a file."))
    assert is_deferred(Tool("mcp__fs__read", "Reads a file."))


@pytest.mark.parametrize(
    "tool",
    [
        Tool("plain_loaded", "x"),
        Tool("plain_deferred", "x", should_defer=True),
        Tool("Pinned", "x", always_load=True),
        Tool("mcp__srv__tool", "x"),
        Tool("fetch", "x", server="srv"),
    ],
)
def test_a_written_tool_reads_back_the_same(tool: Tool) -> None:
    again = tool_from_dict(json.loads(json.dumps(tool.to_dict())))
    assert again == tool
    assert is_deferred(again) == is_deferred(tool)


def test_search_help_states_the_rule() -> None:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    help_text = " ".join(sub.choices["search"].format_help().split())  # type: ignore[union-attr]
    assert "always_load: true or should_defer: false" in help_text
    assert "counts as deferred unless" not in help_text


def test_the_catalogue_format_documents_should_defer() -> None:
    text = (ROOT / "docs" / "getting-started.md").read_text(encoding="utf-8")
    section = text.split("## Catalogues and datasets", 1)[1].split("\n## ", 1)[0]
    assert "should_defer" in section and "always_load" in section


@pytest.fixture(autouse=True)
def _engine_log_reaches_caplog(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI (run in-process by other tests) stops the engine logger propagating."""
    monkeypatch.setattr(logging.getLogger("toolsearch.engine"), "propagate", True)


def engine_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "toolsearch.engine"]


def test_a_pool_without_deferred_tools_warns_once(caplog: pytest.LogCaptureFixture) -> None:
    engine = ToolSearch([Tool("Read", "Reads a file."), Tool("Edit", "Edits a file.")])
    with caplog.at_level(logging.WARNING, logger="toolsearch.engine"):
        result = engine.search("read file")
        assert result.names == []
        assert "should_defer" in result.notice()
        engine.search("edit")  # once per engine
        assert engine.search("select:Read").names == ["Read"]
    [warning] = engine_warnings(caplog)
    assert warning.startswith("none of the pool's 2 tools is deferred")


def test_no_notice_when_something_is_deferred_or_the_pool_is_empty(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="toolsearch.engine"):
        assert ToolSearch([]).search("x").notice() == ""
        engine = ToolSearch([Tool("Read", "r"), Tool("Grep", "g", should_defer=True)])
        assert engine.search("zzz").notice() == ""
    assert engine_warnings(caplog) == []


def test_the_cli_says_when_nothing_is_deferred(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_catalogue(tmp_path, PLAIN[2:])
    assert main(["search", "send", "--catalog", str(path), "--backend", "keyword"]) == 0
    captured = capsys.readouterr()
    assert "No matching deferred tools found" in captured.out
    assert "toolsearch: none of the pool's 2 tools is deferred" in captured.err
