"""``lab.abstention``: what a "no tool fits" rule reads of a request and its catalogue, how its
threshold is chosen on dev, how its test curve is read, and the committed table."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from lab import abstention
from lab.abstention_features import (
    Classifier,
    Probes,
    catalogue_of,
    features,
    probe_requests,
)
from toolsearch.backend import Hit
from toolsearch.dataset import load_dataset
from toolsearch.query import parse_query
from toolsearch.tool import Tool

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "lab" / "results" / "abstention.json"


def _tools() -> list[Tool]:
    return [
        Tool(
            name="mcp__slack__send_message",
            description="Post a message to a Slack channel.",
            input_schema={"type": "object", "properties": {"channel": {"type": "string"}}},
        ),
        Tool(name="mcp__jira__create_issue", description="Create a Jira issue in a project."),
    ]


def test_features_read_the_catalogue_words_names_servers_and_probe_reference() -> None:
    reference = Probes([0.1, 0.2, 0.3, 0.4], [0.5, 1.0, 1.5, 2.0]).reference()
    assert (reference.cosine, reference.bm25_per_word) == (0.3, 1.5)  # the median
    catalogue = catalogue_of(_tools(), reference)
    query = parse_query("send a message to the team on slack about lunch")
    cosines = [Hit("mcp__slack__send_message", 0.62), Hit("mcp__jira__create_issue", 0.2)]
    found = features(query, cosines, [Hit("mcp__slack__send_message", 6.0)], catalogue)
    words = ["send", "messag", "team", "slack", "lunch"]  # stemmed, stop-words dropped
    assert found["cosine"] == 0.62
    assert found["cosine_above_probes"] == pytest.approx(0.62 - 0.3)
    assert found["bm25_per_word"] == pytest.approx(6.0 / len(words))
    assert found["known_words"] == pytest.approx(3 / 5)  # team and lunch are unknown
    assert found["top_tool_words"] == pytest.approx(3 / 5)
    assert found["name_said"] == 1.0  # "send message" is all said
    assert found["server_named"] == 1.0
    unnamed = features(parse_query("post to the channel"), cosines, [], catalogue)
    assert unnamed["server_named"] == 0.0 and unnamed["bm25_per_word"] == 0.0
    nothing = features(parse_query("zzz"), [], [], catalogue)
    assert nothing["cosine"] == 0.0 and nothing["name_said"] == 0.0


def _part(recall: list[float], score: list[float], negatives: int = 0) -> abstention.Part:
    """Requests with gold tools (the default's ``recall``) and ``negatives`` without, each
    request's score in ``score``'s first column."""
    rows = np.zeros((len(recall) + negatives, len(abstention.FEATURES)))
    rows[:, 0] = score
    positive = np.array([True] * len(recall) + [False] * negatives)
    recall_all = np.array(recall + [0.0] * negatives)
    return abstention.Part(rows, positive, recall_all, ["x"] * len(rows))


def test_cost_counts_recall_lost_and_offered_counts_answered_negatives() -> None:
    part = _part([1.0, 0.5, 0.0, 1.0], [0.9, 0.1, 0.1, 0.8, 0.1, 0.9], negatives=2)
    kept = part.x[:, 0] >= 0.5
    assert abstention.cost(part, kept) == pytest.approx(0.5 / 4)  # a missed one costs nothing
    assert abstention.offered(part, kept) == 0.5
    assert abstention.offered(_part([1.0], [0.9]), np.array([True])) is None


def test_the_threshold_is_the_highest_within_the_dev_cost_on_every_large_dev_set() -> None:
    n = abstention.MIN_DEV_POSITIVES
    scores = [0.1, 0.1] + [0.5] * (n - 2)  # two found requests score low
    large = _part([1.0] * n, scores)
    small = _part([1.0] * 3, [0.05, 0.9, 0.9])  # too few requests to hold the choice
    scorer = abstention.column("cosine")({}, [])
    grid = (0.0, 0.05, 0.1, 0.2, 0.6)
    # refusing the low two costs 2/n > .01: the threshold stays at or below their score
    assert abstention.choose_threshold([large, small], scorer, grid) == 0.1
    assert abstention.choose_threshold([small], scorer, grid) == 0.6


def test_the_frontier_reads_the_fewest_answered_within_the_budget() -> None:
    curve = {
        "mcp-workbench": {
            "0.1": {
                "recall@5_lost": 0.0,
                "false_positive_rate": 0.9,
                "out_of_catalogue_offered": 0.8,
            },
            "0.2": {
                "recall@5_lost": 0.01,
                "false_positive_rate": 0.7,
                "out_of_catalogue_offered": 0.5,
            },
            "0.3": {
                "recall@5_lost": 0.03,
                "false_positive_rate": 0.4,
                "out_of_catalogue_offered": 0.2,
            },
        },
        "metatool": {
            "0.1": {
                "recall@5_lost": 0.0,
                "false_positive_rate": None,
                "out_of_catalogue_offered": 0.6,
            },
            "0.2": {
                "recall@5_lost": 0.02,
                "false_positive_rate": None,
                "out_of_catalogue_offered": 0.4,
            },
            "0.3": {
                "recall@5_lost": 0.0,
                "false_positive_rate": None,
                "out_of_catalogue_offered": 0.1,
            },
        },
    }
    point = abstention.frontier({"curve": curve}, 0.01)
    assert point["threshold"] == "0.1"  # 0.2 costs metatool .02, 0.3 costs the workbench .03
    assert point["out_of_catalogue_offered"] == pytest.approx(0.7)
    assert point["workbench_fp_rate"] == 0.9
    assert point["workbench_alone_fp_rate"] == 0.7  # the workbench alone may go to 0.2
    assert abstention.frontier({"curve": curve}, 0.0)["threshold"] == "0.1"


def test_a_shipped_classifier_round_trips_and_reads_its_features_in_order() -> None:
    classifier = Classifier(("cosine", "known_words"), (0.5, 0.5), (0.1, 1.0), (2.0, 0.0), 0.0, 0.3)
    again = Classifier.from_json(json.loads(json.dumps(classifier.to_json())))
    assert again == classifier
    assert again.probability({"cosine": 0.5, "known_words": 0.9}) == pytest.approx(0.5)
    rows = np.zeros((1, len(abstention.FEATURES)))
    rows[0, abstention.FEATURES.index("cosine")] = 0.6
    expected = 1 / (1 + np.exp(-2.0))
    assert abstention.probabilities(classifier, rows)[0] == pytest.approx(expected)


def test_the_probes_are_distinct_and_no_bundled_dataset_request() -> None:
    probes = probe_requests()
    assert len(probes) == len(set(probes)) >= 200
    bundled = load_dataset(ROOT / "datasets" / "mcp-workbench")
    assert not set(probes) & {q.text for q in bundled.queries}


def test_the_committed_table_has_every_rule_dataset_budget_and_curve_point() -> None:
    results = json.loads(RESULTS.read_text(encoding="utf-8"))
    table = abstention.markdown(results)
    datasets, rules = results["sizes"], results["rules"]
    assert set(rules) == {rule.name for rule in abstention.RULES}
    for name in rules:
        assert sum(f"| {name} | {d} |" in table for d in datasets) == len(datasets)
        assert table.count(f"| {name} | ") == len(datasets) + len(abstention.BUDGETS)
    points = len(abstention.CURVE_COSINES) + len(abstention.CURVE_PROBABILITIES)
    assert table.count("| cosine ≥ ") + table.count(f"| {abstention.CANDIDATE} ≥ ") == 2 * points
