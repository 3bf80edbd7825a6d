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


def test_not_a_folder(tmp_path: Path) -> None:
    with pytest.raises(CatalogError, match="not a dataset folder"):
        load_dataset(tmp_path / "missing")


def test_shared_sets_load() -> None:
    shared = Path(__file__).resolve().parents[2] / "shared" / "datasets"
    if not (shared / "bfcl").is_dir():
        pytest.skip("public datasets not present")
    bfcl = load_dataset(shared / "bfcl")
    assert len(bfcl.tools) == 1287 and len(bfcl.queries) == 2351
