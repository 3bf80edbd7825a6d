"""BEIR import and export, and the ``toolsearch dataset`` command."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from toolsearch.bench.beir import export_beir, import_beir, read_beir, write_dataset
from toolsearch.cli import main
from toolsearch.dataset import Dataset, Query, load_dataset
from toolsearch.errors import CatalogError
from toolsearch.tool import Tool

TOOLS = [
    Tool(
        "mcp__mail__send_email",
        "Send an email.",
        {"type": "object", "properties": {"to": {"type": "string"}}, "required": ["to"]},
        search_hint="send mail to people",
    ),
    Tool("mcp__mail__search_inbox", "Search the inbox."),
    Tool("mcp__chat__post_message", "Post to a channel.", aliases=("post",)),
    Tool("mcp__calendar__create_event", "Create an event."),
    Tool("Notebook", "Edit a notebook cell.", always_load=True),
]
QUERIES = [
    Query("k1", "send email", "keywords"),
    Query("r1", "email and book a meeting", "request", {"author": "fixture"}),
    Query("n1", "weather on mars", "negative"),
    Query("h1", "let the team know"),
]
QRELS = {
    "k1": {"mcp__mail__send_email": 1},
    "r1": {"mcp__mail__send_email": 1, "mcp__calendar__create_event": 2},
    "h1": {"mcp__chat__post_message": 1},
}


@pytest.fixture
def dataset_dir(tmp_path: Path) -> Path:
    written = write_dataset(Dataset("fixture", TOOLS, QUERIES, QRELS), tmp_path / "fixture")
    assert written.path is not None
    return written.path


def test_round_trip_keeps_tools_queries_and_qrels(dataset_dir: Path, tmp_path: Path) -> None:
    original = load_dataset(dataset_dir)
    beir = export_beir(original, tmp_path / "beir")
    assert sorted(p.name for p in beir.iterdir()) == ["corpus.jsonl", "qrels", "queries.jsonl"]
    first = json.loads((beir / "corpus.jsonl").read_text().splitlines()[0])
    assert first["_id"] == first["title"] == "mcp__mail__send_email"
    assert first["text"] == "Send an email."
    assert first["metadata"]["search_hint"] == "send mail to people"
    header = (beir / "qrels" / "test.tsv").read_text().splitlines()[0]
    assert header == "query-id\tcorpus-id\tscore"

    back = import_beir(beir, tmp_path / "again").dataset
    assert [t.to_dict() for t in back.tools] == [t.to_dict() for t in original.tools]
    assert [(q.id, q.text, q.style, dict(q.metadata)) for q in back.queries] == [
        (q.id, q.text, q.style, dict(q.metadata)) for q in original.queries
    ]
    assert back.qrels == original.qrels
    assert [q.id for q in back.negatives] == ["n1"]


def _beir(folder: Path, corpus: list[str], queries: list[str], qrels: dict[str, str]) -> Path:
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text("\n".join(corpus) + "\n")
    (folder / "queries.jsonl").write_text("\n".join(queries) + "\n")
    for split, text in qrels.items():
        (folder / "qrels" / f"{split}.tsv").write_text(text)
    return folder


CORPUS = [
    '{"_id": "weather_get", "title": "Weather lookup", "text": "Current weather for a city."}',
    '{"_id": "mail_send", "title": "mail_send", "text": "Send an email."}',
    '{"_id": 7, "text": "A numbered tool."}',
]
BEIR_QUERIES = [
    '{"_id": "q1", "text": "what is the weather", "metadata": {"style": "request"}}',
    '{"_id": "q2", "text": "send mail"}',
    '{"_id": "q3", "text": "train only"}',
    '{"_id": "q4", "text": "no tool at all"}',
]


def test_import_splits_titles_and_negatives(tmp_path: Path) -> None:
    src = _beir(
        tmp_path / "src",
        CORPUS,
        BEIR_QUERIES,
        {
            "test": "query-id\tcorpus-id\tscore\nq1\tweather_get\t1\nq2\tmail_send\t1.0\n",
            "train": "query-id\tcorpus-id\tscore\nq3\t7\t1\n",
        },
    )
    done = import_beir(src, tmp_path / "dst")
    data = done.dataset
    assert [q.id for q in data.queries] == ["q1", "q2", "q4"]  # q3 is judged only in train
    assert done.excluded_queries == 1
    assert "1 queries judged only in other splits left out" in done.summary()
    assert data.queries[0].style == "request"
    tools = {t.name: t for t in data.tools}
    assert tools["weather_get"].description == "Weather lookup\nCurrent weather for a city."
    assert tools["mail_send"].description == "Send an email."  # title equal to the id
    assert "7" in tools
    assert [q.id for q in data.negatives] == ["q4"]
    train = read_beir(src, split="train").dataset
    assert [q.id for q in train.queries] == ["q3", "q4"]


@pytest.mark.parametrize(
    ("corpus", "queries", "qrels", "message"),
    [
        (
            [*CORPUS, "{not json"],
            BEIR_QUERIES,
            "q1\tweather_get\t1\n",
            r"corpus.jsonl, line 4: invalid JSON",
        ),
        (
            [*CORPUS, '{"_id": "has space", "text": "x"}'],
            BEIR_QUERIES,
            "",
            r"corpus.jsonl, line 4, field '_id': 'has space' contains whitespace",
        ),
        (
            [*CORPUS, '{"_id": "mail_send", "text": "again"}'],
            BEIR_QUERIES,
            "",
            r"line 4, field '_id': duplicate document id 'mail_send' \(first on line 2\)",
        ),
        (
            CORPUS,
            BEIR_QUERIES,
            "query-id\tcorpus-id\tscore\nq1\tweather_get\t1\nq1\tnope\t1\n",
            r"test.tsv, line 3, field 'corpus-id': unknown document 'nope'",
        ),
        (
            CORPUS,
            BEIR_QUERIES,
            "query-id\tcorpus-id\tscore\nq9\tweather_get\t1\n",
            r"test.tsv, line 2, field 'query-id': unknown query 'q9'",
        ),
        (
            CORPUS,
            BEIR_QUERIES,
            "q1\tweather_get\thigh\n",
            r"test.tsv, line 1, field 'score': must be an integer, got 'high'",
        ),
        (
            CORPUS,
            BEIR_QUERIES,
            "q1 weather_get 1\n",
            r"test.tsv, line 1: expected 3 tab-separated fields",
        ),
        (
            CORPUS,
            [*BEIR_QUERIES, '{"_id": "q5"}'],
            "",
            r"queries.jsonl, line 5, field 'text': must be a string",
        ),
    ],
)
def test_bad_beir_input_names_file_and_line(
    tmp_path: Path, corpus: list[str], queries: list[str], qrels: str, message: str
) -> None:
    src = _beir(tmp_path / "src", corpus, queries, {"test": qrels})
    with pytest.raises(CatalogError, match=message):
        read_beir(src)


def test_missing_files_and_splits(tmp_path: Path) -> None:
    src = _beir(tmp_path / "src", CORPUS, BEIR_QUERIES, {"dev": "q1\tweather_get\t1\n"})
    with pytest.raises(CatalogError, match=r"no qrels for split 'test'.*splits found: dev"):
        read_beir(src)
    (src / "corpus.jsonl").unlink()
    with pytest.raises(CatalogError, match=r"corpus.jsonl: missing BEIR corpus file"):
        read_beir(src, split="dev")
    with pytest.raises(CatalogError, match="not a BEIR folder"):
        read_beir(tmp_path / "nowhere")


def test_existing_output_needs_force(dataset_dir: Path, tmp_path: Path) -> None:
    export_beir(dataset_dir, tmp_path / "beir")
    with pytest.raises(CatalogError, match=r"already has corpus.jsonl.*pass --force"):
        export_beir(dataset_dir, tmp_path / "beir")
    export_beir(dataset_dir, tmp_path / "beir", force=True)
    with pytest.raises(CatalogError, match=r"already has tools\.jsonl"):
        import_beir(tmp_path / "beir", dataset_dir)


def test_dataset_cli(dataset_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["dataset", "validate", str(dataset_dir), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["tools"] == 5 and summary["queries"] == 4
    assert summary["negative_queries"] == 1 and summary["multi_tool_queries"] == 1
    assert summary["queries_with_alternatives"] == 0
    assert summary["dev_queries"] + summary["test_queries"] == 4
    assert summary["servers"] == 3 and summary["styles"] == {
        "keywords": 1,
        "request": 1,
        "negative": 1,
    }
    assert main(["dataset", "validate", str(dataset_dir)]) == 0
    assert "dataset fixture: valid" in capsys.readouterr().out

    beir = tmp_path / "beir"
    assert main(["dataset", "export-beir", str(dataset_dir), str(beir)]) == 0
    assert "exported fixture: 5 documents, 4 queries" in capsys.readouterr().out
    assert main(["dataset", "import-beir", str(beir), str(tmp_path / "back")]) == 0
    assert "imported back: 5 tools, 4 queries (1 negative)" in capsys.readouterr().out
    assert main(["dataset", "import-beir", str(beir), str(tmp_path / "back")]) == 2
    assert "pass --force" in capsys.readouterr().err

    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "tools.jsonl").write_text('{"name": "a"}\n')
    (broken / "queries.jsonl").write_text('{"id": "q1", "text": "x"}\n')
    (broken / "qrels.tsv").write_text("query-id\ttool-name\tscore\nq1\tb\t1\n")
    assert main(["dataset", "validate", str(broken)]) == 2
    assert "qrels.tsv, line 2, field 'tool-name': unknown tool 'b'" in capsys.readouterr().err
    assert main(["dataset", "validate", str(tmp_path / "missing")]) == 2
    assert "not a dataset folder" in capsys.readouterr().err


def test_groups_travel_through_beir_in_query_metadata(tmp_path: Path) -> None:
    groups = {"r1": {"mcp__mail__send_email": "mail", "mcp__calendar__create_event": "mail"}}
    original = write_dataset(
        Dataset("fixture", TOOLS, QUERIES, QRELS, None, groups), tmp_path / "grouped"
    )
    assert original.path is not None
    qrels_text = (original.path / "qrels.tsv").read_text().splitlines()
    assert qrels_text[0] == "query-id\ttool-name\tscore\tgroup"
    assert original.groups("r1") == (("mcp__mail__send_email", "mcp__calendar__create_event"),)
    assert original.n_tools("r1") == 1 and original.n_tools("k1") == 1

    beir = export_beir(original, tmp_path / "beir")
    # BEIR's qrels have no group column: every gold tool is a plain judgement ...
    rows = (beir / "qrels" / "test.tsv").read_text().splitlines()
    assert "r1\tmcp__mail__send_email\t1" in rows and "r1\tmcp__calendar__create_event\t2" in rows
    # ... and the groups ride along in the query's metadata.
    lines = [json.loads(line) for line in (beir / "queries.jsonl").read_text().splitlines()]
    r1 = next(line for line in lines if line["_id"] == "r1")
    assert r1["metadata"]["qrel_groups"] == groups["r1"]

    back = import_beir(beir, tmp_path / "again").dataset
    assert back.groups("r1") == original.groups("r1")
    assert {q.id: back.groups(q.id) for q in back.queries} == {
        q.id: original.groups(q.id) for q in original.queries
    }
    assert all("qrel_groups" not in q.metadata for q in back.queries)


def test_beir_groups_must_match_the_split_judgements(tmp_path: Path) -> None:
    folder = _beir(
        tmp_path / "b",
        ['{"_id": "a", "text": "a"}', '{"_id": "b", "text": "b"}'],
        ['{"_id": "q", "text": "x", "metadata": {"qrel_groups": {"a": "g"}}}'],
        {"test": "query-id\tcorpus-id\tscore\nq\ta\t1\nq\tb\t1\n"},
    )
    with pytest.raises(CatalogError, match=r"metadata.qrel_groups.*mismatch: b"):
        read_beir(folder)


def test_validate_counts_groups_not_rows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    groups = {"r1": {"mcp__mail__send_email": "g", "mcp__calendar__create_event": "g"}}
    folder = write_dataset(Dataset("g", TOOLS, QUERIES, QRELS, None, groups), tmp_path / "g").path
    assert main(["dataset", "validate", str(folder), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    # r1 lists two tools, but they are alternatives: it needs one
    assert summary["multi_tool_queries"] == 0 and summary["queries_with_alternatives"] == 1
