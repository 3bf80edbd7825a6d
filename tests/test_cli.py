"""The CLI is a thin shell: same answers as the library, one JSON object with --json."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from toolsearch.cli import main

STARTER = str(Path(__file__).resolve().parents[1] / "datasets" / "starter")


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, object]:
    assert main(list(argv)) == 0
    out = capsys.readouterr().out
    data: dict[str, object] = json.loads(out)
    return data


def test_search_json_shape(capsys: pytest.CaptureFixture[str]) -> None:
    data = run_json(
        capsys, "search", "slack send message", "--catalog", STARTER, "--backend", "keyword",
        "--json",
    )  # fmt: skip
    assert set(data) == {"query", "matches", "total_deferred_tools", "pending_mcp_servers"}
    assert data["matches"][0] == {"name": "mcp__slack__send_message", "score": 42.0}  # type: ignore[index]
    assert data["total_deferred_tools"] == 19


@pytest.mark.parametrize(
    ("query", "first"),
    [
        ("notebook jupyter", {"name": "NotebookEdit", "score": 18.0}),
        ("select:mcp__github__search_code", {"name": "mcp__github__search_code", "score": None}),
        ("mcp__github", {"name": "mcp__github__create_issue", "score": None}),
        ("+slack send", {"name": "mcp__slack__send_message", "score": 28.0}),
    ],
)
def test_seed_examples(capsys: pytest.CaptureFixture[str], query: str, first: object) -> None:
    data = run_json(capsys, "search", query, "--catalog", STARTER, "--backend", "keyword", "--json")
    assert data["matches"][0] == first  # type: ignore[index]


def test_no_match_prints_the_text(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["search", "zzzz", "--catalog", STARTER, "--backend", "keyword"]) == 0
    assert "No matching deferred tools found" in capsys.readouterr().out


def test_errors_are_one_line_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["search", "x", "--catalog", STARTER, "--backend", "bm52"]) == 2
    err = capsys.readouterr().err
    assert "unknown backend 'bm52'; available:" in err and "Traceback" not in err
    assert main(["search", "x", "--catalog", "/no/such/file.jsonl"]) == 2
    assert "cannot read file" in capsys.readouterr().err
    assert (
        main(["search", "x", "--catalog", STARTER, "--backend", "keyword", "--max-results", "0"])
        == 2
    )
    assert "max_results must be between 1 and" in capsys.readouterr().err


def test_backends_command_json(capsys: pytest.CaptureFixture[str]) -> None:
    data = run_json(capsys, "backends", "--json")
    names = {b["name"] for b in data["backends"]}  # type: ignore[attr-defined]
    assert "keyword" in names


def test_installed_script_runs() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "toolsearch", "search", "slack", "--catalog", STARTER,
         "--backend", "keyword", "--json"],
        capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    assert json.loads(proc.stdout)["matches"][0]["name"].startswith("mcp__slack__")
