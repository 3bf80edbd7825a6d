"""The `task` style of mcp-workbench: multi-step briefs, each needing 2-5 real tools.

The rules checked here are the ones the dataset README states under "task": ids ``t-NNNN``,
40-150 words, every gold tool in the catalogue, and one label group per required step (rows of a
query with the same group are alternatives for that step).
"""

from __future__ import annotations

import csv
import json
import re
from collections import defaultdict
from pathlib import Path

import pytest

DATASET = Path(__file__).resolve().parent.parent / "datasets" / "mcp-workbench"
MIN_TASKS = 200
MIN_WORDS, MAX_WORDS = 40, 150
MIN_GROUPS, MAX_GROUPS = 2, 5


def task_queries() -> dict[str, dict[str, object]]:
    """The `task` queries of queries.jsonl by id (a duplicate id fails here, not later)."""
    found: dict[str, dict[str, object]] = {}
    for number, line in enumerate((DATASET / "queries.jsonl").read_text().splitlines(), 1):
        query = json.loads(line)
        if query.get("style") != "task" and not str(query["id"]).startswith("t-"):
            continue
        assert query["id"] not in found, f"queries.jsonl line {number}: duplicate id {query['id']}"
        found[str(query["id"])] = query
    return found


def task_groups() -> dict[str, dict[str, set[str]]]:
    """Gold tools of each ``t-`` query, grouped by step.

    Reads task_qrels.tsv while it exists beside qrels.tsv, else the ``t-`` rows of qrels.tsv.
    Without a group column every row is its own step.
    """
    path = DATASET / "task_qrels.tsv"
    if not path.exists():
        path = DATASET / "qrels.tsv"
    groups: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    with path.open(newline="") as handle:
        for row in csv.DictReader(handle, delimiter="\t"):
            query_id = row["query-id"]
            if not query_id.startswith("t-"):
                continue
            assert row["score"] == "1", f"{path.name}: {query_id} has score {row['score']}"
            group = row.get("group") or row["tool-name"]
            groups[query_id][group].add(row["tool-name"])
    return groups


@pytest.fixture(scope="module")
def queries() -> dict[str, dict[str, object]]:
    return task_queries()


@pytest.fixture(scope="module")
def groups() -> dict[str, dict[str, set[str]]]:
    return task_groups()


def test_enough_tasks_with_well_formed_ids(queries: dict[str, dict[str, object]]) -> None:
    assert len(queries) >= MIN_TASKS
    for query_id, query in queries.items():
        assert re.fullmatch(r"t-\d{4}", query_id), query_id
        assert query["style"] == "task", query_id
        assert set(query) == {"id", "text", "style"}, f"{query_id}: extra fields {set(query)}"


def test_word_counts(queries: dict[str, dict[str, object]]) -> None:
    wrong = {
        query_id: len(str(query["text"]).split())
        for query_id, query in queries.items()
        if not MIN_WORDS <= len(str(query["text"]).split()) <= MAX_WORDS
    }
    assert not wrong, f"outside {MIN_WORDS}-{MAX_WORDS} words: {wrong}"


def test_texts_are_distinct(queries: dict[str, dict[str, object]]) -> None:
    normalised = [" ".join(str(q["text"]).lower().split()) for q in queries.values()]
    assert len(set(normalised)) == len(normalised)


def test_every_task_has_two_to_five_steps(
    queries: dict[str, dict[str, object]], groups: dict[str, dict[str, set[str]]]
) -> None:
    assert set(groups) == set(queries), "task queries and labelled queries differ"
    wrong = {q: len(g) for q, g in groups.items() if not MIN_GROUPS <= len(g) <= MAX_GROUPS}
    assert not wrong, f"steps outside {MIN_GROUPS}-{MAX_GROUPS}: {wrong}"


def test_gold_tools_exist_and_are_not_repeated(groups: dict[str, dict[str, set[str]]]) -> None:
    catalogue = {
        json.loads(line)["name"]
        for line in (DATASET / "tools.jsonl").read_text().splitlines()
        if line.strip()
    }
    for query_id, steps in groups.items():
        tools = [tool for step in steps.values() for tool in step]
        assert set(tools) <= catalogue, f"{query_id}: unknown {set(tools) - catalogue}"
        assert len(tools) == len(set(tools)), f"{query_id}: a tool is in two steps"
