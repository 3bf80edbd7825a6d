""" "No tool fits", calibrated per catalogue: a small classifier against one cosine threshold.

    python -m lab.abstention --out lab/results/abstention.json

Records come from :mod:`lab.abstention_runs` (the default hybrid, abstention off, on every
dataset: unseen dev requests, test requests, other datasets' requests and the shipped probes).
Features are :func:`lab.abstention_features.features`, each catalogue's probe reference the
median best cosine (and BM25 per word) of the probes searched in it.

Protocol: the classifier (logistic regression, scikit-learn here, numpy at search time) learns
from dev requests the shipped model never trained on — every dataset's requests as "a tool
fits", mcp-workbench's dev negatives and other datasets' requests searched in each catalogue as
"none fits" — and its threshold is the highest that costs at most :data:`MAX_DEV_COST` recall@5
on every dev set with at least :data:`MIN_DEV_POSITIVES` requests. Test splits are reported:
per dataset, recall@5 lost and the share of out-of-catalogue requests still offered a tool
(mcp-workbench: its negatives). Leave-one-dataset-out: the classifier and its threshold chosen
without the dataset (its requests, its catalogue, its negatives), scored on its test split.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from lab.abstention_features import (
    FEATURES,
    Catalogue,
    Classifier,
    Probes,
    catalogue_of,
    features,
    per_word,
    probe_requests,
    request_words,
)
from lab.abstention_runs import DATASETS, dataset_records
from lab.script import table_script
from toolsearch.backend import Hit
from toolsearch.query import parse_query

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "lab" / "results" / "abstention.json"
#: The recall@5 the threshold may cost on any dev set, and the sets it is read on.
MAX_DEV_COST = 0.01
MIN_DEV_POSITIVES = 100
#: The targets (test splits): mcp-workbench negatives offered a tool, recall@5 lost.
MAX_FALSE_POSITIVE_RATE = 0.30
MAX_RECALL_LOST = 0.02
#: Today's rule: one cosine threshold, and the grid of its curve.
COSINE_THRESHOLD = 0.23
COSINE_GRID = tuple(round(0.10 + 0.01 * i, 2) for i in range(36))
#: The embedding member and the stemmed bm25 member of the default hybrid.
EMBEDDING, LEXICAL = "embedding", "bm25"


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


@dataclass
class Part:
    """Feature rows of one part of a dataset's records."""

    x: np.ndarray  # (n, len(FEATURES))
    positive: np.ndarray  # bool: the request has gold tools
    recall: np.ndarray  # the default's recall@5 (0 where no gold)
    source: list[str]  # the dataset a request comes from


def _hits(record: Mapping[str, Any], member: str) -> list[Hit]:
    return [Hit(n, s) for n, s in record["hits"].get(member, [])]


def probes_of(records: Sequence[Mapping[str, Any]]) -> Probes:
    """The probe scores, as the index measures them."""
    cosines, lexical = [], []
    for record in records:
        cos, lex = _hits(record, EMBEDDING), _hits(record, LEXICAL)
        cosines.append(cos[0].score if cos else 0.0)
        words = request_words(parse_query(record["text"]))
        lexical.append(per_word(lex[0].score if lex else 0.0, words))
    return Probes(cosines, lexical)


def part(records: Sequence[Mapping[str, Any]], catalogue: Catalogue, name: str) -> Part:
    rows = []
    for record in records:
        found = features(
            parse_query(record["text"]),
            _hits(record, EMBEDDING),
            _hits(record, LEXICAL),
            catalogue,
        )
        rows.append([found[f] for f in FEATURES])
    positive = np.array(["recall@5" in r for r in records], dtype=bool)
    recall = np.array([r.get("recall@5", 0.0) for r in records], dtype=float)
    source = [r["id"].split(":")[0] if ":" in r["id"] else name for r in records]
    return Part(np.array(rows, dtype=float).reshape(-1, len(FEATURES)), positive, recall, source)


def load(name: str) -> dict[str, Part]:
    found = dataset_records(name, probe_requests())
    reference = probes_of(found["probes"]).reference()
    catalogue = catalogue_of(list(found["dataset"].tools), reference)
    log(f"{name}: probe reference {reference}")
    return {key: part(found[key], catalogue, name) for key in ("dev", "test", "cross")}


# --------------------------------------------------------------------------- rules

Data = Mapping[str, Mapping[str, Part]]
#: A request's score under a rule (higher: a tool fits); refused below the rule's threshold.
Scorer = Callable[[Part], np.ndarray]


@dataclass(frozen=True)
class Rule:
    """One way to decide "no tool fits": ``fit(data, names)`` learns a scorer from ``names``'
    dev records (or needs none), whose threshold is then chosen on them from ``grid``."""

    name: str
    what: str
    fit: Callable[[Data, Sequence[str]], Scorer]
    grid: tuple[float, ...]


def column(feature: str) -> Callable[[Data, Sequence[str]], Scorer]:
    """A rule that reads one feature as it is (nothing learnt)."""
    index = FEATURES.index(feature)

    def fit(data: Data, names: Sequence[str]) -> Scorer:
        return lambda p: np.asarray(p.x[:, index])

    return fit


def floored(feature: str, floor: float) -> Callable[[Data, Sequence[str]], Scorer]:
    """A rule that reads ``feature`` for requests whose best cosine reaches ``floor`` (today's
    threshold) and refuses the others whatever its threshold: it can only refuse more."""
    index, cosine = FEATURES.index(feature), FEATURES.index("cosine")

    def fit(data: Data, names: Sequence[str]) -> Scorer:
        return lambda p: np.where(p.x[:, cosine] >= floor, p.x[:, index], -np.inf)

    return fit


@dataclass(frozen=True)
class Logistic:
    """A learnt :class:`Classifier` as a scorer: its probability that a tool fits."""

    classifier: Classifier

    def __call__(self, p: Part) -> np.ndarray:
        return probabilities(self.classifier, p.x)


def logistic(chosen: Sequence[str], *, by_recall: bool = False) -> Callable[..., Scorer]:
    """A rule learning a logistic regression over the features ``chosen``; ``by_recall``
    weighs each request with gold tools by the default's recall@5 on it (refusing one the
    default misses costs nothing)."""

    def fit(data: Data, names: Sequence[str]) -> Scorer:
        return Logistic(train(data, names, chosen, by_recall=by_recall))

    return fit


def training_set(
    data: Data, names: Sequence[str], columns: Sequence[int], *, by_recall: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows, labels and weights from the dev records of ``names``: in each dataset its
    requests with gold tools weigh 1 in all, its negatives (mcp-workbench's) 1, and the
    requests of the other datasets among ``names`` searched in its catalogue 1."""
    xs, ys, ws = [], [], []
    for name in names:
        dev, cross = data[name]["dev"], data[name]["cross"]
        chosen = np.array([s in names for s in cross.source], dtype=bool)
        weight = dev.recall[dev.positive] if by_recall else np.ones(int(dev.positive.sum()))
        for rows, label, w in (
            (dev.x[dev.positive], 1.0, weight),
            (dev.x[~dev.positive], 0.0, np.ones(int((~dev.positive).sum()))),
            (cross.x[chosen], 0.0, np.ones(int(chosen.sum()))),
        ):
            if w.sum() > 0:
                xs.append(rows[:, columns])
                ys.append(np.full(len(rows), label))
                ws.append(w / w.sum())
    return np.vstack(xs), np.concatenate(ys), np.concatenate(ws)


def train(
    data: Data, names: Sequence[str], chosen: Sequence[str], *, by_recall: bool
) -> Classifier:
    """A logistic regression over ``chosen`` learnt from ``names``' dev records (threshold
    left at 0: the rule's threshold is chosen beside it)."""
    from sklearn.linear_model import LogisticRegression

    columns = [FEATURES.index(f) for f in chosen]
    x, y, w = training_set(data, names, columns, by_recall=by_recall)
    mean, scale = x.mean(axis=0), x.std(axis=0)
    scale[scale == 0] = 1.0
    model = LogisticRegression(C=1.0, max_iter=1000)
    model.fit((x - mean) / scale, y, sample_weight=w * len(y) / w.sum())
    return Classifier(
        tuple(chosen),
        tuple(float(v) for v in mean),
        tuple(float(v) for v in scale),
        tuple(float(v) for v in model.coef_[0]),
        float(model.intercept_[0]),
        0.0,
    )


def probabilities(classifier: Classifier, rows: np.ndarray) -> np.ndarray:
    """The classifier's "a tool fits" probability for each row of ``rows`` (all FEATURES)."""
    columns = [FEATURES.index(f) for f in classifier.names]
    x = (rows[:, columns] - np.array(classifier.mean)) / np.array(classifier.scale)
    z = x @ np.array(classifier.weights) + classifier.bias
    return np.asarray(1.0 / (1.0 + np.exp(-z)))


UNCALIBRATED = (
    "cosine",
    "bm25_per_word",
    "known_words",
    "top_tool_words",
    "name_said",
    "server_named",
)
PROBABILITIES = tuple(round(0.01 * i, 2) for i in range(100))
RULES: tuple[Rule, ...] = (
    Rule("cosine", "today's rule: the best cosine", column("cosine"), COSINE_GRID),
    Rule(
        "cosine above probes",
        "the best cosine minus the catalogue's probe median",
        column("cosine_above_probes"),
        tuple(round(-0.2 + 0.01 * i, 2) for i in range(46)),
    ),
    Rule(
        "cosine above probes, floored",
        f"the same, and never answering below today's cosine threshold ({COSINE_THRESHOLD})",
        floored("cosine_above_probes", COSINE_THRESHOLD),
        tuple(round(-0.2 + 0.01 * i, 2) for i in range(46)),
    ),
    Rule(
        "logistic",
        "logistic regression without the probe reference",
        logistic(UNCALIBRATED),
        PROBABILITIES,
    ),
    Rule(
        "logistic with probes",
        "logistic regression over every feature",
        logistic(FEATURES),
        PROBABILITIES,
    ),
    Rule(
        "logistic with probes, by recall",
        "the same, requests with gold tools weighed by the default's recall@5",
        logistic(FEATURES, by_recall=True),
        PROBABILITIES,
    ),
)
#: The rule whose curve the tables draw beside today's, and whose classifier would ship.
CANDIDATE = "logistic with probes"


def cost(p: Part, kept: np.ndarray) -> float:
    """recall@5 lost over ``p``'s requests with gold tools when only ``kept`` are answered."""
    if not p.positive.any():
        return 0.0
    return float(p.recall[p.positive & ~kept].sum() / p.positive.sum())


def offered(p: Part, kept: np.ndarray) -> float | None:
    """The share of ``p``'s requests without gold tools that are still answered."""
    negative = ~p.positive
    return float(kept[negative].mean()) if negative.any() else None


def choose_threshold(dev: Sequence[Part], scorer: Scorer, grid: Sequence[float]) -> float:
    """The highest threshold of ``grid`` whose recall@5 cost is at most :data:`MAX_DEV_COST`
    on every dev set with :data:`MIN_DEV_POSITIVES` requests with gold tools or more."""
    scored = [(p, scorer(p)) for p in dev if p.positive.sum() >= MIN_DEV_POSITIVES]
    best = grid[0]
    for threshold in grid:
        if any(cost(p, score >= threshold) > MAX_DEV_COST for p, score in scored):
            break
        best = threshold
    return best


# --------------------------------------------------------------------------- measuring


def effect(p: Part, kept: np.ndarray) -> dict[str, Any]:
    """recall@5 lost, and the share of requests without gold tools still answered."""
    found = offered(p, kept)
    return {
        "recall@5_lost": round(cost(p, kept), 4),
        "false_positive_rate": None if found is None else round(found, 4),
    }


def applied(data: Data, held: str, scorer: Scorer, threshold: float) -> dict[str, Any]:
    """``held``'s test effect, and the share of other datasets' requests searched in its
    catalogue that are still answered."""
    test, cross = data[held]["test"], data[held]["cross"]
    crossed = scorer(cross) >= threshold
    return effect(test, scorer(test) >= threshold) | {
        "out_of_catalogue_offered": round(float(crossed.mean()), 4) if len(crossed) else None
    }


def run_rule(data: Data, rule: Rule) -> dict[str, Any]:
    """``rule`` chosen on every dev set and scored on every test split (its curve over its
    grid too), then chosen without each dataset and scored on it (leave-one-dataset-out)."""
    names = list(data)
    scorer = rule.fit(data, names)
    threshold = choose_threshold([data[n]["dev"] for n in names], scorer, rule.grid)
    out: dict[str, Any] = {
        "what": rule.what,
        "threshold": threshold,
        "test": {n: applied(data, n, scorer, threshold) for n in names},
        "curve": {n: {str(t): applied(data, n, scorer, t) for t in rule.grid} for n in names},
        "lodo": {},
    }
    if isinstance(scorer, Logistic):
        out["classifier"] = replace(scorer.classifier, threshold=threshold).to_json()
    for held in names:
        others = [n for n in names if n != held]
        left = rule.fit(data, others)
        chosen = choose_threshold([data[n]["dev"] for n in others], left, rule.grid)
        out["lodo"][held] = {"threshold": chosen} | applied(data, held, left, chosen)
    log(f"{rule.name}: threshold {threshold}, test {out['test']}, lodo {out['lodo']}")
    return out


#: Recall@5 budgets of the frontier: the most any test split may lose.
BUDGETS = (0.005, 0.01, 0.02)


def frontier(rule: Mapping[str, Any], budget: float) -> dict[str, Any]:
    """A reading of ``rule``'s test curve (not a choice: thresholds are chosen on dev): of its
    thresholds losing at most ``budget`` recall@5 on every test split, the one answering the
    fewest out-of-catalogue requests on average over the catalogues; with mcp-workbench's
    false-positive rate there, and the lowest that rate gets while mcp-workbench alone loses
    at most ``budget``."""
    curve = rule["curve"]
    names = list(curve)
    points = list(curve[names[0]])
    within = [t for t in points if max(curve[n][t]["recall@5_lost"] for n in names) <= budget]
    answered = {
        t: float(np.mean([curve[n][t]["out_of_catalogue_offered"] for n in names])) for t in within
    }
    best = min(within, key=lambda t: answered[t]) if within else None
    wb = curve.get("mcp-workbench", {})
    alone = [
        wb[t]["false_positive_rate"] for t in points if t in wb and wb[t]["recall@5_lost"] <= budget
    ]
    return {
        "threshold": best,
        "out_of_catalogue_offered": None if best is None else round(answered[best], 4),
        "workbench_fp_rate": None if best is None or not wb else wb[best]["false_positive_rate"],
        "workbench_alone_fp_rate": min(alone) if alone else None,
    }


def sizes(data: Data) -> dict[str, Any]:
    return {
        name: {
            "dev_positive": int(parts["dev"].positive.sum()),
            "dev_negative": int((~parts["dev"].positive).sum()),
            "cross": len(parts["cross"].source),
            "test_positive": int(parts["test"].positive.sum()),
            "test_negative": int((~parts["test"].positive).sum()),
        }
        for name, parts in data.items()
    }


def measure(datasets: str) -> dict[str, Any]:
    chosen = [name.strip() for name in datasets.split(",") if name.strip()]
    unknown = sorted(set(chosen) - set(DATASETS))
    if unknown:
        raise SystemExit(f"unknown datasets {unknown}; known: {', '.join(DATASETS)}")
    data = {name: load(name) for name in chosen}
    rules = {rule.name: run_rule(data, rule) for rule in RULES}
    return {
        "benchmark": "abstention",
        "protocol": {
            "features": list(FEATURES),
            "max_dev_cost": MAX_DEV_COST,
            "min_dev_positives": MIN_DEV_POSITIVES,
            "cosine_threshold": COSINE_THRESHOLD,
            "targets": {
                "max_false_positive_rate": MAX_FALSE_POSITIVE_RATE,
                "max_recall_lost": MAX_RECALL_LOST,
            },
        },
        "sizes": sizes(data),
        "rules": rules,
        "frontier": {
            name: {str(b): frontier(rule, b) for b in BUDGETS} for name, rule in rules.items()
        },
    }


# --------------------------------------------------------------------------- tables

SHORT = {"mcp-workbench": "workbench", "toolalpaca-eval": "toolalpaca", "gorilla-apizoo": "apizoo"}
#: Cosine thresholds and probabilities the curve table shows (every grid point is in the JSON).
CURVE_COSINES = tuple(round(0.15 + 0.03 * i, 2) for i in range(10))
CURVE_PROBABILITIES = tuple(round(0.05 * i, 2) for i in range(1, 10))


def _cell(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def markdown(results: Mapping[str, Any]) -> str:
    """Every rule at its dev-chosen threshold and left out, then the trade-off curves."""
    return "\n\n".join(
        (rules_markdown(results), frontier_markdown(results), curve_markdown(results))
    )


def frontier_markdown(results: Mapping[str, Any]) -> str:
    """Per rule and budget, the best its test curve reaches (:func:`frontier`)."""
    lines = [
        "| rule | recall@5 lost on every test split ≤ | threshold | out-of-catalogue requests "
        "answered (mean) | workbench FP rate there | workbench FP rate, workbench alone ≤ "
        "budget |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, budgets in results["frontier"].items():
        for budget, point in budgets.items():
            cells = [
                point["threshold"] or "-",
                _cell(point["out_of_catalogue_offered"]),
                _cell(point["workbench_fp_rate"]),
                _cell(point["workbench_alone_fp_rate"]),
            ]
            lines.append(f"| {name} | {budget} | " + " | ".join(map(str, cells)) + " |")
    return "\n".join(lines)


def rules_markdown(results: Mapping[str, Any]) -> str:
    """One row per rule and dataset: the threshold, recall@5 lost, mcp-workbench's
    false-positive rate and the other datasets' requests still answered, chosen on all dev
    sets and chosen without the dataset."""
    lines = [
        "| rule | dataset | threshold | recall@5 lost | FP rate | other datasets' requests "
        "answered | left out: threshold | recall@5 lost | FP rate | others answered |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, rule in results["rules"].items():
        for dataset in results["sizes"]:
            mine, left = rule["test"][dataset], rule["lodo"][dataset]
            cells = [
                f"{rule['threshold']}",
                _cell(mine["recall@5_lost"]),
                _cell(mine["false_positive_rate"]),
                _cell(mine["out_of_catalogue_offered"]),
                f"{left['threshold']}",
                _cell(left["recall@5_lost"]),
                _cell(left["false_positive_rate"]),
                _cell(left["out_of_catalogue_offered"]),
            ]
            lines.append(f"| {name} | {dataset} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def curve_markdown(results: Mapping[str, Any]) -> str:
    """The trade-off curves on the test splits, at each threshold of today's cosine and of
    the candidate: mcp-workbench's false-positive rate and every dataset's recall@5 lost, then
    the out-of-catalogue requests each catalogue still answers."""
    names = list(results["sizes"])
    short = [SHORT.get(n, n) for n in names]
    tables = (
        (["workbench FP rate", *(f"{n} lost" for n in short)], _lost_cells),
        ([f"{n} others answered" for n in short], _answered_cells),
    )
    out = []
    for columns, cells in tables:
        header = ["rule", *columns]
        lines = ["| " + " | ".join(header) + " |", "|---|" + "---:|" * (len(header) - 1)]
        for label, curve, points in _curves(results):
            for point in map(str, points):
                row = cells(curve, point, names)
                lines.append(f"| {label} {point} | " + " | ".join(row) + " |")
        out.append("\n".join(lines))
    return "\n\n".join(out)


def _curves(results: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any], Sequence[float]]]:
    rules = results["rules"]
    return [
        ("cosine ≥", rules["cosine"]["curve"], CURVE_COSINES),
        (f"{CANDIDATE} ≥", rules[CANDIDATE]["curve"], CURVE_PROBABILITIES),
    ]


def _lost_cells(curve: Mapping[str, Any], point: str, names: Sequence[str]) -> list[str]:
    wb = curve["mcp-workbench"][point]["false_positive_rate"] if "mcp-workbench" in curve else None
    return [_cell(wb), *(_cell(curve[n][point]["recall@5_lost"]) for n in names)]


def _answered_cells(curve: Mapping[str, Any], point: str, names: Sequence[str]) -> list[str]:
    return [_cell(curve[n][point]["out_of_catalogue_offered"]) for n in names]


def main(argv: Sequence[str] | None = None) -> int:
    return table_script(
        argv,
        __doc__ or "",
        OUT,
        ("--datasets", {"default": ",".join(DATASETS), "help": "comma-separated (all)"}),
        measure,
        markdown,
    )


if __name__ == "__main__":
    raise SystemExit(main())
