"""Dataset folders: loading, metadata kept, and cross-checks with file and line."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolsearch.dataset import load_dataset
from toolsearch.errors import CatalogError

TOOLS = '{"name": "mcp__a__x", "description": "x"}\n{"name": "mcp__a__y", "tier": 2}\n'
QUERIES = (
    '{"id": "q1", "text": "find x", "style": "keywords", "lang": "en"}\n'
    '{"id": "q2", "text": "nothing"}\n'
)
QRELS = "query-id\ttool-name\tscore\nq1\tmcp__a__x\t1\nq1\tmcp__a__y\t2\n"


def make(tmp_path: Path, tools: str = TOOLS, queries: str = QUERIES, qrels: str = QRELS) -> Path:
    (tmp_path / "tools.jsonl").write_text(tools)
    (tmp_path / "queries.jsonl").write_text(queries)
    (tmp_path / "qrels.tsv").write_text(qrels)
    return tmp_path


def test_loads_with_metadata_and_negatives(tmp_path: Path) -> None:
    dataset = load_dataset(make(tmp_path), name="demo")
    assert dataset.name == "demo"
    assert dataset.qrels == {"q1": {"mcp__a__x": 1, "mcp__a__y": 2}}
    assert dataset.queries[0].metadata == {"lang": "en"}
    assert dataset.tools[1].metadata == {"tier": 2}
    assert [q.id for q in dataset.negatives] == ["q2"]
    assert dataset.styles == ["keywords"]
    assert len(dataset.sha256()) == 64


@pytest.mark.parametrize(
    ("qrels", "fragments"),
    [
        ("query-id\ttool-name\tscore\nq9\tmcp__a__x\t1\n", ["line 2", "unknown query 'q9'"]),
        ("query-id\ttool-name\tscore\nq1\tnope\t1\n", ["line 2", "unknown tool 'nope'"]),
        ("query-id\ttool-name\tscore\nq1\tmcp__a__x\n", ["line 2", "3 tab-separated"]),
        ("query-id\ttool-name\tscore\n\nq1\tmcp__a__x\thigh\n", ["line 3", "integer"]),
        ("qid\ttool\tscore\n", ["line 1", "header"]),
        ("", ["header", "empty file"]),
    ],
)
def test_bad_qrels(tmp_path: Path, qrels: str, fragments: list[str]) -> None:
    with pytest.raises(CatalogError) as info:
        load_dataset(make(tmp_path, qrels=qrels))
    assert "qrels.tsv" in str(info.value)
    for fragment in fragments:
        assert fragment in str(info.value)


@pytest.mark.parametrize(
    ("queries", "fragments"),
    [
        ('{"id": "q1", "text": "a"}\n{"id": "q1", "text": "b"}\n', ["line 2", "duplicate"]),
        ('{"text": "a"}\n', ["line 1", "field 'id'"]),
        ('{"id": "q1", "text": 5}\n', ["field 'text'"]),
        ('{"id": "q1", "text": "a", "style": 1}\n', ["field 'style'"]),
        ('{"id": "q1", "text": "a"\n', ["line 1", "invalid JSON"]),
    ],
)
def test_bad_queries(tmp_path: Path, queries: str, fragments: list[str]) -> None:
    with pytest.raises(CatalogError) as info:
        load_dataset(make(tmp_path, queries=queries, qrels="query-id\ttool-name\tscore\n"))
    assert "queries.jsonl" in str(info.value)
    for fragment in fragments:
        assert fragment in str(info.value)


def test_catalogue_only_folder(tmp_path: Path) -> None:
    (tmp_path / "tools.jsonl").write_text(TOOLS)
    dataset = load_dataset(tmp_path)
    assert dataset.queries == [] and dataset.qrels == {}


@pytest.mark.parametrize("name", ["queries.jsonl", "qrels.tsv"])
def test_a_folder_where_a_dataset_file_belongs_is_named(tmp_path: Path, name: str) -> None:
    make(tmp_path)
    (tmp_path / name).unlink()
    (tmp_path / name).mkdir()
    with pytest.raises(CatalogError) as info:
        load_dataset(tmp_path)
    assert (
        str(info.value)
        == f"{tmp_path / name}: {name} must be a file, found a folder or other entry"
    )


def test_not_a_folder(tmp_path: Path) -> None:
    with pytest.raises(CatalogError, match="not a dataset folder"):
        load_dataset(tmp_path / "missing")


def test_shared_sets_load() -> None:
    shared = Path(__file__).resolve().parents[2] / "shared" / "datasets"
    if not (shared / "bfcl").is_dir():
        pytest.skip("public datasets not present")
    bfcl = load_dataset(shared / "bfcl")
    assert len(bfcl.tools) == 1287 and len(bfcl.queries) == 2351


GROUPED_TOOLS = "".join(
    f'{{"name": "mcp__{name}", "description": "{name}"}}\n'
    for name in ("gmail__send", "outlook__send", "cal__create", "docs__write")
)
GROUPED_QUERIES = (
    '{"id": "q1", "text": "email the team and book a slot"}\n'
    '{"id": "q2", "text": "write a doc"}\n'
    '{"id": "q3", "text": "no tool"}\n'
)
GROUPED_QRELS = (
    "query-id\ttool-name\tscore\tgroup\n"
    "q1\tmcp__gmail__send\t1\tmail\n"
    "q1\tmcp__outlook__send\t1\tmail\n"
    "q1\tmcp__cal__create\t1\tcal\n"
    "q2\tmcp__docs__write\t1\tdoc\n"
)


def test_group_column_gives_alternatives_and_n_tools(tmp_path: Path) -> None:
    dataset = load_dataset(make(tmp_path, GROUPED_TOOLS, GROUPED_QUERIES, GROUPED_QRELS))
    assert dataset.groups("q1") == (
        ("mcp__gmail__send", "mcp__outlook__send"),
        ("mcp__cal__create",),
    )
    assert dataset.n_tools("q1") == 2 and dataset.n_tools("q2") == 1 and dataset.n_tools("q3") == 0
    assert dataset.groups("q3") == ()
    assert set(dataset.query_groups) == {"q1", "q2"}
    assert dataset.has_groups
    assert dataset.qrels["q1"] == {
        "mcp__gmail__send": 1,
        "mcp__outlook__send": 1,
        "mcp__cal__create": 1,
    }


def test_without_group_column_every_row_is_its_own_group(tmp_path: Path) -> None:
    dataset = load_dataset(make(tmp_path))
    assert dataset.groups("q1") == (("mcp__a__x",), ("mcp__a__y",))
    assert dataset.n_tools("q1") == 2 and not dataset.has_groups


def test_typed_n_tools_must_agree_with_groups(tmp_path: Path) -> None:
    agreeing = GROUPED_QUERIES.replace('"id": "q1",', '"id": "q1", "n_tools": 2,')
    load_dataset(make(tmp_path, GROUPED_TOOLS, agreeing, GROUPED_QRELS))
    wrong = GROUPED_QUERIES.replace('"id": "q1",', '"id": "q1", "n_tools": 3,')
    with pytest.raises(CatalogError, match=r"'q1' types n_tools = 3 but its qrels give 2"):
        load_dataset(make(tmp_path, GROUPED_TOOLS, wrong, GROUPED_QRELS))


@pytest.mark.parametrize(
    ("qrels", "fragments"),
    [
        ("q1\tmcp__gmail__send\t1\n", ["line 2", "expected 4 tab-separated", "group"]),
        ("q1\tmcp__gmail__send\t1\t \n", ["line 2", "field 'group'", "must not be empty"]),
        (
            "q1\tmcp__gmail__send\t1\tmail\nq1\tmcp__gmail__send\t1\tother\n",
            ["line 3", "judges 'mcp__gmail__send' twice (first on line 2)"],
        ),
        ("q1\tmcp__gmail__send\t1.5\tmail\n", ["line 2", "field 'score'", "integer"]),
    ],
)
def test_bad_grouped_qrels(tmp_path: Path, qrels: str, fragments: list[str]) -> None:
    text = "query-id\ttool-name\tscore\tgroup\n" + qrels
    with pytest.raises(CatalogError) as info:
        load_dataset(make(tmp_path, GROUPED_TOOLS, GROUPED_QUERIES, text))
    for fragment in ["qrels.tsv", *fragments]:
        assert fragment in str(info.value)


def test_zero_grade_rows_are_not_gold_and_need_no_group_partner(tmp_path: Path) -> None:
    text = GROUPED_QRELS + "q2\tmcp__gmail__send\t0\tdoc\n"
    dataset = load_dataset(make(tmp_path, GROUPED_TOOLS, GROUPED_QUERIES, text))
    assert dataset.groups("q2") == (("mcp__docs__write",),)


def test_groups_built_in_code_must_label_the_gold_tools() -> None:
    from toolsearch.dataset import Dataset
    from toolsearch.tool import Tool

    with pytest.raises(CatalogError, match="mismatch: b"):
        Dataset(
            "x",
            [Tool("a", "a"), Tool("b", "b")],
            [],
            {"q": {"a": 1, "b": 1}},
            None,
            {"q": {"a": "g"}},
        )
