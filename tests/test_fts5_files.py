"""The fts5 backend's files: one catalogue per file, read-only indexes still searchable,
foreign databases left alone, and clear errors for versions and rows it cannot read."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

pytest.importorskip("sqlite_utils")

from toolsearch.backends.fts5 import FTS5Backend
from toolsearch.errors import BackendError
from toolsearch.query import parse_query
from toolsearch.tool import Tool

FIRST = [Tool("mcp__gh__create_issue", "Create an issue"), Tool("mcp__gh__close_issue", "Close")]
SECOND = [Tool("mcp__slack__post", "Post a message"), Tool("Read", "Read a file")]


def test_a_second_catalogue_on_one_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "index.db"
    with FTS5Backend(path=path, catalog="github") as first:
        first.index(FIRST)
        with pytest.raises(BackendError, match="holds the catalogue 'github', not 'slack'"):
            FTS5Backend(path=path, catalog="slack")
        assert [h.name for h in first.search(parse_query("issue"), 5)] == [
            "mcp__gh__close_issue",
            "mcp__gh__create_issue",
        ]
    with pytest.raises(BackendError, match="holds the catalogue 'github', not 'default'"):
        FTS5Backend(path=path)


def test_a_read_only_index_can_be_searched(tmp_path: Path) -> None:
    path = tmp_path / "index.db"
    with FTS5Backend(path=path) as writer:
        writer.index(FIRST)
    with FTS5Backend(path=path, read_only=True) as reader:
        assert reader.search(parse_query("create issue"), 1)[0].name == "mcp__gh__create_issue"
        reader.index(FIRST)  # the same catalogue: nothing to write
        with pytest.raises(BackendError, match="is read-only"):
            reader.index(SECOND)
    with pytest.raises(BackendError, match="does not exist"):
        FTS5Backend(path=tmp_path / "absent.db", read_only=True)


def test_a_foreign_database_is_not_taken_over(tmp_path: Path) -> None:
    path = tmp_path / "app.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
    with pytest.raises(
        BackendError, match=r"is not a toolsearch index \(it has the tables users\)"
    ):
        FTS5Backend(path=path)
    with sqlite3.connect(path) as conn:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
    assert tables == {"users"} and mode == "delete"


@pytest.mark.parametrize(("version", "fragment"), [("99", "newer than"), ("v2", "unknown")])
def test_an_unknown_tokenizer_version_is_an_error(
    tmp_path: Path, version: str, fragment: str
) -> None:
    path = tmp_path / "index.db"
    with FTS5Backend(path=path) as backend:
        backend.index(FIRST)
        with backend._transaction():
            backend.db.execute(
                "UPDATE toolsearch_meta SET value = ? WHERE key = 'tokenizer_version'", (version,)
            )
    with pytest.raises(BackendError, match=fragment):
        FTS5Backend(path=path)


def test_a_corrupt_stored_definition_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "index.db"
    with FTS5Backend(path=path) as backend:
        backend.index(FIRST)
        with backend._transaction():
            backend.db.execute(
                "UPDATE tools SET definition = '{not json' WHERE tool_name = 'mcp__gh__close_issue'"
            )
        with pytest.raises(BackendError, match="stored definition of 'mcp__gh__close_issue'"):
            _ = backend.tools
