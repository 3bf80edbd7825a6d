"""The fts5 backend: a real SQLite database, escaping, incremental updates, processes, crashes."""

from __future__ import annotations

import math
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("sqlite_utils")

from toolsearch.backends import fts5
from toolsearch.backends.fts5 import FTS5Backend, match_expression
from toolsearch.catalog import load_catalog
from toolsearch.engine import ToolSearch
from toolsearch.errors import BackendError, ConfigError
from toolsearch.query import parse_query
from toolsearch.registry import load_backend
from toolsearch.synth import scale_catalog
from toolsearch.tool import Tool, pool_order

STARTER = Path(__file__).resolve().parents[1] / "datasets" / "starter"
SPECIALS = ['"', '""', "*", "(", ")", "NEAR", "NEAR(a b)", "AND", "OR", "NOT", "^", "\\b", "[", "{"]


@pytest.fixture(scope="module")
def catalogue() -> list[Tool]:
    return pool_order(load_catalog(STARTER))


@pytest.fixture
def backend(catalogue: list[Tool]) -> FTS5Backend:
    indexed = FTS5Backend()
    indexed.index(catalogue)
    return indexed


def _names(hits: list[object]) -> list[str]:
    return [h.name for h in hits]  # type: ignore[attr-defined]


def test_ranks_and_scores(backend: FTS5Backend) -> None:
    hits = backend.search(parse_query("slack send message"), 3)
    assert hits[0].name == "mcp__slack__send_message"
    assert all(h.score > 0 for h in hits)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert backend.search(parse_query("create github issue"), 1)[0].name == (
        "mcp__github__create_issue"
    )


def test_scores_are_minus_sqlite_bm25(backend: FTS5Backend) -> None:
    weights = [
        backend.field_weights[f] for f in ("server", "name", "description", "hint", "params")
    ]
    raw = backend.db.execute(
        "SELECT t.tool_name, bm25(tools_fts, ?, ?, ?, ?, ?) FROM tools_fts "
        "JOIN tools t ON t.id = tools_fts.rowid WHERE tools_fts MATCH ?",
        (*weights, '"slack" OR "message"'),
    ).fetchall()
    want = {name: -score for name, score in raw}
    hits = backend.search(parse_query("slack message"), 50)
    assert {h.name for h in hits} == set(want)
    assert all(math.isclose(h.score, want[h.name], rel_tol=1e-12) for h in hits)
    assert all(score < 0 for _, score in raw)  # SQLite's sign, turned around by the backend


def test_column_weights_change_the_ranking() -> None:
    tools = [
        Tool("mcp__files__archive", "Store an old invoice document."),
        Tool("mcp__billing__invoice", "Store a document."),
        *[Tool(f"mcp__misc__t{i}", f"Unrelated tool {i}.") for i in range(4)],
    ]
    default = FTS5Backend()
    default.index(tools)
    assert default.search(parse_query("invoice"), 1)[0].name == "mcp__billing__invoice"
    prose = FTS5Backend(field_weights={"name": 0.1, "description": 5})
    prose.index(tools)
    assert prose.search(parse_query("invoice"), 1)[0].name == "mcp__files__archive"


@pytest.mark.parametrize("raw", [*SPECIALS, 'title:"x" AND (y OR z*)', "- + : , ."])
def test_fts_syntax_is_never_interpreted(backend: FTS5Backend, raw: str) -> None:
    hits = backend.search(parse_query(raw), 5)
    assert all(h.score > 0 for h in hits)


def test_operator_words_are_plain_words() -> None:
    tools = [
        Tool("mcp__a__near", "Find places NEAR a point."),
        Tool("mcp__a__logic", "Combine filters with AND and OR."),
        *[Tool(f"mcp__a__t{i}", f"Other tool {i}.") for i in range(4)],
    ]
    backend = FTS5Backend()
    backend.index(tools)
    assert _names(backend.search(parse_query("NEAR"), 5)) == ["mcp__a__near"]
    assert _names(backend.search(parse_query("AND"), 5)) == ["mcp__a__logic"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(max_size=30), max_size=8))
def test_match_expression_is_never_a_syntax_error(tokens: list[str]) -> None:
    expression = match_expression(tokens)
    if expression:
        _SCRATCH.execute("SELECT count(*) FROM f WHERE f MATCH ?", (expression,)).fetchall()


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200), st.integers(min_value=-2, max_value=40))
def test_search_never_raises(raw: str, k: int) -> None:
    hits = _SHARED.search(parse_query(raw), k)
    assert len(hits) <= max(k, 0)
    assert all(h.score > 0 for h in hits)


_SCRATCH = sqlite3.connect(":memory:")
_SCRATCH.execute("CREATE VIRTUAL TABLE f USING fts5(a, b, tokenize='ascii')")
_SCRATCH.execute("INSERT INTO f VALUES ('hello world', 'near and or')")
_SHARED = FTS5Backend()
_SHARED.index(pool_order(load_catalog(STARTER)))


def test_cjk_without_spaces() -> None:
    tools = [
        Tool("mcp__cn__weather", "查询天气预报和气温"),
        Tool("mcp__cn__stocks", "查询股票价格"),
        Tool("mcp__cn__news", "今日新闻头条"),
        Tool("mcp__jp__translate", "日本語のテキストを翻訳する"),
        Tool("mcp__en__mail", "Send an email."),
    ]
    backend = FTS5Backend()
    backend.index(tools)
    assert backend.search(parse_query("天气"), 1)[0].name == "mcp__cn__weather"
    assert backend.search(parse_query("テキスト"), 1)[0].name == "mcp__jp__translate"


def test_ties_keep_pool_order_past_the_fetched_rows() -> None:
    # More tools tie than the rows fetched beyond k, so the tie is fetched whole.
    tied = fts5._TIE_SLACK + 40
    tools = [Tool(f"mcp__s{i:03d}__probe", "Checks the status.") for i in range(tied)]
    tools += [Tool("probe_status", "Checks the status.", should_defer=True)]
    tools += [Tool(f"mcp__other__t{i}", "Unrelated.") for i in range(tied)]
    backend = FTS5Backend(field_weights={"server": 0, "name": 0})
    backend.index(list(reversed(tools)))
    hits = backend.search(parse_query("status"), 5)
    assert [h.name for h in hits] == ["probe_status", *(f"mcp__s{i:03d}__probe" for i in range(4))]
    assert len({h.score for h in hits}) == 1
    assert len(backend.search(parse_query("status"), 1000)) == tied + 1


def test_pruned_ranking_equals_scoring_every_row(monkeypatch: pytest.MonkeyPatch) -> None:
    base = pool_order(load_catalog(STARTER))
    tools = pool_order(scale_catalog(base, 3000, seed=1))
    backend = FTS5Backend()
    backend.index(tools)
    queries = [
        "get the file contents of a repository",
        "send a message to the team on slack",
        "create issue",
        "list all the pages in the workspace",
        "read",
        "search the web for news about the weather",
    ]
    expressions: list[str] = []
    ranked_rows = backend._ranked_rows

    def spy(expression: str, k: int) -> list[tuple[float, int, str]]:
        expressions.append(expression)
        return ranked_rows(expression, k)

    backend._ranked_rows = spy  # type: ignore[method-assign]
    pruned = {(q, k): backend.search(parse_query(q), k) for q in queries for k in (1, 5, 30)}
    assert any(") NOT (" in e for e in expressions)  # the split path did run
    monkeypatch.setattr(fts5, "_SPLIT", False)  # score every matching row
    for q in queries:
        for k in (1, 5, 30):
            full = backend.search(parse_query(q), k)
            assert pruned[q, k] == full, (q, k)  # same phrase order: equal to the last bit


def test_common_only_query_still_matches() -> None:
    tools = [Tool(f"mcp__s__t{i}", "common word here") for i in range(8)]
    backend = FTS5Backend()
    backend.index(tools)
    hits = backend.search(parse_query("common"), 100)
    assert len(hits) == 8
    assert all(h.score > 0 for h in hits)
    assert _names(hits) == sorted(t.name for t in tools)


def _changed(tool: Tool, i: int) -> Tool:
    return replace(tool, description=f"{tool.description} revised {i} message")


def test_incremental_equals_rebuild(catalogue: list[Tool]) -> None:
    live = FTS5Backend()
    live.index(catalogue[:10])
    live.upsert(list(reversed(catalogue[10:])))
    changed = [_changed(t, i) for i, t in enumerate(catalogue[::4])]
    live.upsert(changed)
    removed = [t.name for t in catalogue[1::5]]
    live.remove([*removed, "no_such_tool"])
    final = {t.name: t for t in catalogue}
    final.update((t.name, t) for t in changed)
    for name in removed:
        final.pop(name)
    rebuilt = FTS5Backend()
    rebuilt.index(pool_order(final.values()))
    assert set(live.tools) == set(final)
    assert live.tools == {name: final[name] for name in live.tools}
    for raw in ["slack message", "create issue", "revised message", "read file", "github"]:
        query = parse_query(raw)
        assert live.search(query, 30) == rebuilt.search(query, 30), raw


def test_updates_touch_only_changed_rows(catalogue: list[Tool]) -> None:
    backend = FTS5Backend()
    backend.index(catalogue)
    ids = dict(backend.db.execute("SELECT tool_name, id FROM tools").fetchall())
    changes = backend.db.conn.total_changes
    backend.index(catalogue)  # same content: nothing written
    backend.upsert(catalogue[:3])
    assert backend.db.conn.total_changes == changes
    edited = _changed(catalogue[5], 1)
    backend.upsert([edited])
    assert backend.db.conn.total_changes > changes
    after = dict(backend.db.execute("SELECT tool_name, id FROM tools").fetchall())
    assert after == ids  # updated in place: every row keeps its id
    assert backend.search(parse_query("revised"), 5)[0].name == edited.name
    backend.index([*catalogue[:4], edited])
    assert len(backend) == 5
    assert sorted(backend.tools) == sorted(t.name for t in [*catalogue[:4], edited])


def test_through_tool_search_incrementally(catalogue: list[Tool]) -> None:
    backend = FTS5Backend()
    search = ToolSearch(catalogue, backend=backend)
    first = search.search("slack message").names[0]
    edited = [replace(t, description="Posts a parrot") if t.name == first else t for t in catalogue]
    written: list[tuple[list[str], list[str]]] = []
    write = backend._write

    def spy(rows: list[tuple[object, ...]], removals: list[str]) -> None:
        written.append(([str(row[0]) for row in rows], list(removals)))
        write(rows, removals)

    backend._write = spy  # type: ignore[method-assign]
    search.set_tools(edited)
    assert written == [([first], [])]  # one row rewritten, nothing else touched
    assert search.search("parrot").names == [first]
    search.set_tools([t for t in edited if t.name != first])
    assert written[-1] == ([], [first])
    assert search.search("parrot").names == []


def test_file_database_persists_and_uses_wal(tmp_path: Path, catalogue: list[Tool]) -> None:
    path = tmp_path / "sub" / "tools.db"
    with FTS5Backend(path=path, busy_timeout=2.5) as first:
        first.index(catalogue)
        want = first.search(parse_query("slack message"), 5)
        assert first.db.journal_mode == "wal"
        assert first.db.execute("PRAGMA busy_timeout").fetchone()[0] == 2500
        assert first.db.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL
    with FTS5Backend(path=str(path), synchronous="full") as second:
        assert second.search(parse_query("slack message"), 5) == want
        assert len(second) == len(catalogue)
        assert second.tools == {t.name: t for t in catalogue}
        assert second.db.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
        changes = second.db.conn.total_changes
        second.index(catalogue)
        assert second.db.conn.total_changes == changes
        # The layout is sqlite-utils' own, so its tools read the file as usual.
        assert second.db["tools"].detect_fts() == "tools_fts"
        found = [row["tool_name"] for row in second.db["tools"].search("slack")]
        assert "mcp__slack__send_message" in found


def test_new_tokeniser_version_retokenises(tmp_path: Path, catalogue: list[Tool]) -> None:
    path = tmp_path / "tools.db"
    with FTS5Backend(path=path) as backend:
        backend.index(catalogue)
        # Pretend the rows were written by an older tokeniser.
        with backend._transaction():
            backend.db.execute("UPDATE tools SET description = 'stale'")
            backend.db.execute(
                "UPDATE toolsearch_meta SET value = '0' WHERE key = 'tokenizer_version'"
            )
        assert backend.search(parse_query("slack"), 5)  # names still match
        assert backend.search(parse_query("stale"), 50)
    with FTS5Backend(path=path) as reopened:
        assert reopened.search(parse_query("stale"), 50) == []
        assert reopened.search(parse_query("post message channel"), 1)[0].name.startswith(
            "mcp__slack"
        )


def test_bad_options_and_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="unknown field"):
        FTS5Backend(field_weights={"title": 1})
    with pytest.raises(ConfigError, match="busy_timeout"):
        FTS5Backend(busy_timeout=-1)
    with pytest.raises(ConfigError, match="synchronous"):
        FTS5Backend(synchronous="off")
    with pytest.raises(ConfigError, match="path"):
        FTS5Backend(path=42)  # type: ignore[arg-type]
    with pytest.raises(BackendError, match="cannot open database"):
        FTS5Backend(path=tmp_path)  # a directory
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"this is not a database" * 100)
    with pytest.raises(BackendError, match=r"cannot open database .*garbage\.db"):
        FTS5Backend(path=garbage)


def test_load_backend_with_path(tmp_path: Path, catalogue: list[Tool]) -> None:
    backend = load_backend("fts5", path=tmp_path / "x.db", field_weights={"hint": 3})
    params = backend.params()  # type: ignore[attr-defined]
    assert params["path"] == str(tmp_path / "x.db")
    assert params["field_weights"]["hint"] == 3.0  # type: ignore[index]
    backend.index(catalogue)
    assert (tmp_path / "x.db").is_file()


def _tools_script(body: str) -> str:
    return textwrap.dedent(
        """
        import sys, time
        from pathlib import Path
        from toolsearch.backends.fts5 import FTS5Backend
        from toolsearch.query import parse_query
        from toolsearch.tool import Tool

        def catalogue(prefix, version, n=300):
            return [
                Tool(f"mcp__{prefix}__tool_{i}", f"Tool {i} shared words version{version}")
                for i in range(n)
            ]
        """
    ) + textwrap.dedent(body)


def _python(script: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(script), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_readers_in_other_processes_see_whole_states(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"
    writer = tmp_path / "writer.py"
    writer.write_text(
        _tools_script(
            """
            backend = FTS5Backend(path=sys.argv[1])
            backend.index(catalogue("alpha", 1))
            print("ready", flush=True)
            stop, deadline = Path(sys.argv[2]), time.time() + 120
            commits = 0
            while not stop.exists() and time.time() < deadline:
                backend.index(catalogue("bravo" if commits % 2 == 0 else "alpha", commits))
                commits += 1
            print("commits", commits, flush=True)
            """
        )
    )
    reader = tmp_path / "reader.py"
    reader.write_text(
        _tools_script(
            """
            backend = FTS5Backend(path=sys.argv[1])
            deadline = time.time() + float(sys.argv[2])
            states, searches = set(), 0
            while time.time() < deadline:
                hits = backend.search(parse_query("shared words"), 1000)
                prefixes = {h.name.split("__")[1] for h in hits}
                if len(hits) != 300 or len(prefixes) != 1:
                    print("inconsistent", len(hits), sorted(prefixes), flush=True)
                    sys.exit(1)
                states |= prefixes
                searches += 1
            print("ok", searches, ",".join(sorted(states)), flush=True)
            """
        )
    )
    stop = tmp_path / "stop"
    write = _python(writer, str(path), str(stop))
    assert write.stdout is not None
    assert write.stdout.readline().strip() == "ready"
    readers = [_python(reader, str(path), "0.5") for _ in range(2)]
    outputs = [r.communicate(timeout=60) for r in readers]
    stop.touch()  # the writer kept rewriting the index all the time the readers searched
    written, write_errors = write.communicate(timeout=60)
    assert write.returncode == 0, write_errors
    assert int(written.split()[-1]) >= 2
    seen: set[str] = set()
    for process, (out, err) in zip(readers, outputs, strict=True):
        assert process.returncode == 0, out + err
        status, searches, states = out.split()
        assert status == "ok" and int(searches) > 0
        seen |= set(states.split(","))
    assert seen == {"alpha", "bravo"}


def test_writer_killed_mid_update_leaves_the_last_commit(tmp_path: Path) -> None:
    path = tmp_path / "crash.db"
    writer = tmp_path / "writer.py"
    writer.write_text(
        _tools_script(
            """
            class Stalling(FTS5Backend):
                stall = False

                def _write(self, rows, removals):
                    super()._write(rows, removals)
                    if self.stall:  # every row written, the transaction not committed
                        print("written", flush=True)
                        time.sleep(120)

            backend = Stalling(path=sys.argv[1])
            for version in (1, 2):
                backend.index(catalogue("svc", version))
                print("committed", version, flush=True)
            backend.stall = True
            backend.index(catalogue("svc", 3) + catalogue("extra", 3))
            """
        )
    )
    process = _python(writer, str(path))
    assert process.stdout is not None
    lines = []
    deadline = time.time() + 60
    while time.time() < deadline:
        line = process.stdout.readline().strip()
        lines.append(line)
        if line == "written" or not line:
            break
    assert lines == ["committed 1", "committed 2", "written"], lines
    os.kill(process.pid, signal.SIGKILL)
    process.communicate(timeout=30)  # reap it and close its pipes
    assert process.returncode == -signal.SIGKILL

    with FTS5Backend(path=path) as backend:
        db = backend.db
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        db.execute("INSERT INTO tools_fts (tools_fts) VALUES ('integrity-check')")
        assert len(backend) == 300
        assert backend.search(parse_query("version3"), 10) == []
        assert len(backend.search(parse_query("version2"), 1000)) == 300
        assert not any(name.startswith("mcp__extra") for name in backend.tools)
        # The lock died with the writer: the index can be written again.
        backend.index([Tool("mcp__svc__only", "recovered")])
        assert [h.name for h in backend.search(parse_query("recovered"), 5)] == ["mcp__svc__only"]
