"""The fts5 backend's files: one catalogue per file, read-only indexes still searchable,
foreign databases left alone, and clear errors for versions and rows it cannot read."""

from __future__ import annotations

import sqlite3
from dataclasses import replace
from pathlib import Path

import pytest

pytest.importorskip("sqlite_utils")

from toolsearch.backends.fts5 import FTS5Backend
from toolsearch.engine import ToolSearch
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


@pytest.mark.parametrize(
    "damage",
    ["DROP TABLE tools_fts", "INSERT INTO tools_fts (tools_fts) VALUES ('delete-all')"],
)
def test_a_damaged_full_text_index_is_rebuilt_when_opened(tmp_path: Path, damage: str) -> None:
    path = tmp_path / "index.db"
    with FTS5Backend(path=path) as backend:
        backend.index(FIRST)
    conn = sqlite3.connect(path)
    conn.execute(damage)
    conn.commit()
    conn.close()  # the last connection: the change leaves the WAL for the file
    with pytest.raises(BackendError, match=r"full-text index is damaged \(0 of 2 tools indexed"):
        FTS5Backend(path=path, read_only=True)  # cannot be repaired there: said, not guessed
    with FTS5Backend(path=path) as backend:
        found = {h.name for h in backend.search(parse_query("issue"), 5)}
        assert found == {"mcp__gh__create_issue", "mcp__gh__close_issue"}
        backend.db.execute("INSERT INTO tools_fts (tools_fts) VALUES ('integrity-check')")
    with FTS5Backend(path=path, read_only=True) as reader:
        assert len(reader.search(parse_query("issue"), 5)) == 2


def test_an_index_missing_its_fts5_storage_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "index.db"
    with FTS5Backend(path=path) as backend:
        backend.index(FIRST)
    with sqlite3.connect(path) as conn:
        conn.execute("DROP TABLE tools_fts_data")
    with pytest.raises(BackendError, match="damaged: its table tools_fts_data is missing"):
        FTS5Backend(path=path)


def _engine(tools: list[Tool], path: Path) -> ToolSearch:
    deferred = [replace(tool, should_defer=True) for tool in tools]
    return ToolSearch(deferred, backend="fts5", backend_options={"path": str(path)})


def test_a_catalogue_replaced_by_another_writer_is_an_error_not_empty_results(
    tmp_path: Path,
) -> None:
    path = tmp_path / "shared.db"
    first = _engine(FIRST, path)
    assert set(first.search("issue").names) == {"mcp__gh__create_issue", "mcp__gh__close_issue"}
    same = _engine(FIRST, path)  # the same catalogue again: writes nothing, both keep working
    assert first.search("issue").names == same.search("issue").names
    second = _engine(SECOND, path)  # default options: the same catalogue name, "default"
    assert second.search("post").names == ["mcp__slack__post"]
    for engine in (first, same):
        with pytest.raises(BackendError, match="no longer holds this index's catalogue"):
            engine.search("issue")
    with pytest.raises(BackendError, match="no longer holds"):  # nor updated as if it were
        first.backend.upsert([Tool("mcp__gh__reopen_issue", "Reopen an issue")])
    with pytest.raises(BackendError, match="no longer holds"):
        first.backend.remove(["mcp__gh__close_issue"])
    with FTS5Backend(path=path) as reader:  # a reader that never indexed is not affected
        assert [h.name for h in reader.search(parse_query("post"), 5)] == ["mcp__slack__post"]


def test_the_writer_itself_may_replace_its_catalogue(tmp_path: Path) -> None:
    path = tmp_path / "index.db"
    with FTS5Backend(path=path) as backend:
        backend.index(FIRST)
        backend.index(SECOND)
        backend.remove(["Read"])
        backend.upsert([Tool("mcp__slack__read", "Read a channel")])
        assert [h.name for h in backend.search(parse_query("read"), 5)] == ["mcp__slack__read"]
