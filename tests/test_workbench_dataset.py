"""The labelling rules of datasets/mcp-workbench (its README), checked over the files."""

from __future__ import annotations

import importlib.util
import sys
from collections import defaultdict
from pathlib import Path
from types import ModuleType

import pytest

from toolsearch.dataset import Dataset, load_dataset
from toolsearch.errors import CatalogError
from toolsearch.textnorm import (
    content_words,
    near_duplicates,
    normalised_text,
    shared_words,
    tool_words,
)
from toolsearch.tool import Tool

WORKBENCH = Path(__file__).resolve().parent.parent / "datasets" / "mcp-workbench"
STYLES = {"keywords", "request", "hard", "task", "negative"}
#: Two queries with the same labels whose content words overlap this much (Jaccard) ask for
#: the same thing; the README states the same figure.
NEAR_DUPLICATE = 0.7


@pytest.fixture(scope="module")
def workbench() -> Dataset:
    return load_dataset(WORKBENCH)


def test_content_words_stem_and_drop_function_words() -> None:
    assert content_words("Refunds were refunded, please!") == {"refund"}
    assert content_words("Send the 2 emails to my team") == {"send", "email", "team"}
    assert content_words("we're on the GitHub PR") == {"github", "git", "hub", "pr"}
    assert content_words("") == frozenset()


def test_tool_words_cover_server_name_and_description() -> None:
    tool = Tool(name="mcp__gcal__query_free_busy", description="Return busy intervals.")
    assert tool_words(tool) == {"gcal", "queri", "free", "busi", "return", "interval"}
    assert shared_words("when is Ana busy?", [tool]) == {"busi"}
    assert shared_words("is Ana around on Friday?", [tool]) == frozenset()


def test_near_duplicates_finds_alike_texts_only() -> None:
    texts = ["order a large pepperoni pizza", "order a large pepperoni pizza now", "hi"]
    assert [(i, j) for i, j, _ in near_duplicates(texts, 0.7)] == [(0, 1)]


def test_every_style_is_known_and_matches_the_labels(workbench: Dataset) -> None:
    for query in workbench.queries:
        assert query.style in STYLES, query.id
        labelled = bool(workbench.qrels.get(query.id))
        assert labelled == (query.style != "negative"), query.id


def test_n_tools_is_never_typed(workbench: Dataset) -> None:
    typed = [q.id for q in workbench.queries if "n_tools" in q.metadata]
    assert typed == []


def test_every_positive_has_non_empty_groups_covering_its_gold(workbench: Dataset) -> None:
    for query in workbench.positives:
        groups = workbench.groups(query.id)
        assert groups and all(groups), query.id
        grouped = [tool for group in groups for tool in group]
        assert sorted(grouped) == sorted(workbench.qrels[query.id]), query.id


def test_hard_queries_share_no_content_word_with_their_gold_tools(workbench: Dataset) -> None:
    tools = {tool.name: tool for tool in workbench.tools}
    overlapping = {}
    for query in workbench.queries:
        if query.style == "hard":
            gold = [tools[name] for name in workbench.qrels[query.id]]
            shared = shared_words(query.text, gold)
            if shared:
                overlapping[query.id] = sorted(shared)
    assert overlapping == {}


def test_no_two_queries_have_the_same_normalised_text(workbench: Dataset) -> None:
    seen: dict[str, str] = {}
    repeated = []
    for query in workbench.queries:
        text = normalised_text(query.text)
        if text in seen:
            repeated.append((seen[text], query.id))
        seen.setdefault(text, query.id)
    assert repeated == []


def test_no_near_duplicates_among_queries_with_the_same_labels(workbench: Dataset) -> None:
    by_labels: dict[frozenset[str], list[tuple[str, str]]] = defaultdict(list)
    for query in workbench.queries:
        if query.style != "keywords":
            labels = frozenset(workbench.qrels.get(query.id, {}))
            by_labels[labels].append((query.id, query.text))
    alike = []
    for queries in by_labels.values():
        for i, j, overlap in near_duplicates([text for _, text in queries], NEAR_DUPLICATE):
            alike.append((queries[i][0], queries[j][0], round(overlap, 2)))
    assert alike == []


def _relabel_script() -> ModuleType:
    name = "mcp_workbench_relabel"
    spec = importlib.util.spec_from_file_location(name, WORKBENCH / "relabel.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses resolve the script's annotations through it
    spec.loader.exec_module(module)
    return module


def test_files_and_readme_counts_are_what_relabel_writes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The files are in canonical form and both READMEs quote the counts of the files as they
    are (after editing queries, run ``python datasets/mcp-workbench/relabel.py``)."""
    exit_code = _relabel_script().main(["--check"])
    report = capsys.readouterr().out
    assert exit_code == 0, report


def test_relabel_reads_a_zero_score_row_as_irrelevant_like_the_loader() -> None:
    relabel = _relabel_script()
    row = relabel.Judgement
    qrels = [row("q1", "mcp__a__x", 1, "1"), row("q1", "mcp__a__y", 0, "2"), row("q2", "t", 0, "1")]
    queries = [{"id": "q1", "text": "x"}, {"id": "q2", "text": "y", "style": "negative"}]
    assert relabel.gold_tools(qrels) == {"q1": ["mcp__a__x"]}
    figures = relabel.counts(queries, qrels)
    assert (figures["positives"], figures["multi_group"]) == (1, 0)


def test_relabel_names_the_line_of_a_broken_query(tmp_path: Path) -> None:
    broken = tmp_path / "queries.jsonl"
    broken.write_text('{"id": "q1", "text": "x"}\n{oops\n', encoding="utf-8")
    with pytest.raises(CatalogError, match=r"queries\.jsonl, line 2"):
        _relabel_script().read_queries(broken)
