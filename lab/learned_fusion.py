"""Learned rankers over the default's member features, against the default's fusion.

    python -m lab.learned_fusion --out lab/results/learned_fusion.json

Each query's candidates are the tools one of the default's members (embedding, stemmed and
unstemmed bm25) ranks in its top :data:`CANDIDATES`. A candidate's features are what the hybrid
already knows: each member's normalised score (the default's normalisations) and reciprocal rank,
the embedding similarity and its gap to the query's best, the name-match (Dice) and whole-name
features, and the default's own fused score. Two rankers score them: a linear pairwise model
(logistic regression on the feature differences of relevant/non-relevant pairs of one query,
RankNet's linear form) and LightGBM's LambdaMART. Every ranker, the default's convex fusion
included, ranks the whole request with one search (multi-step search applies to any of them
alike).

Protocol (``lab/retrieval.md``): trained on **dev** splits only; reported on **test**
splits, in-domain (trained on all three dev sets) and leave-one-dataset-out (trained on the
other two datasets' dev splits), with ranx paired t-tests against the default's fusion. Member
runs come from the ablation's cache (:mod:`member_runs`).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from lab.ablation import (
    SPLITS,
    Data,
    Variant,
    fused_hits,
    load_data,
    one_search_variant,
    rank,
    scores,
    significance,
)
from lab.member_runs import DATASETS, DEPTH, default_runs_dir
from toolsearch.backend import Hit
from toolsearch.backends.hybrid import (
    DEFAULT_MEMBERS,
    DEFAULT_NAME_WEIGHT,
    DEFAULT_SERVER_BONUS,
    DEFAULT_SERVER_SUPPORT,
)
from toolsearch.fusion import (
    name_coverage,
    names_server,
    names_whole_name,
    normalise,
    query_words,
)
from toolsearch.query import parse_query

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "lab" / "results" / "learned_fusion.json"
#: Hits of each member that become candidates.
CANDIDATES = 30
#: Negatives paired with each relevant tool of a training query (the highest-ranked ones).
PAIRS_PER_POSITIVE = 20
SEED = 0
#: The default's members: a learned ranker over them runs with what the hybrid already computes.
FEATURE_MEMBERS: tuple[str, ...] = ("embedding", "bm25_stem", "bm25")


def default_fused() -> Variant:
    """The hybrid's default fusion with one search per request, replayed by the ablation."""
    variant = one_search_variant(DEFAULT_MEMBERS["embedding"], DEFAULT_NAME_WEIGHT)
    fuser = replace(
        variant.fuser, server_bonus=DEFAULT_SERVER_BONUS, server_support=DEFAULT_SERVER_SUPPORT
    )
    return replace(variant, fuser=fuser)


FEATURES: tuple[str, ...] = (
    *(f"{m}_norm" for m in FEATURE_MEMBERS),
    *(f"{m}_rr" for m in FEATURE_MEMBERS),
    "cosine",
    "cosine_gap",
    "name_dice",
    "whole_name",
    "server_named",
    "default",
)


def query_features(
    data: Data, qid: str, text: str, fused: Mapping[str, float]
) -> tuple[list[str], Any]:
    """The candidates of one query and their feature matrix (rows in candidate order)."""
    hits = {m: data.hits[m][qid] for m in FEATURE_MEMBERS}
    candidates: list[str] = []
    seen: set[str] = set()
    for found in hits.values():
        for name, _ in found[:CANDIDATES]:
            if name not in seen:
                seen.add(name)
                candidates.append(name)
    norms = {
        m: normalise([Hit(n, s) for n, s in found], "minmax" if m == "embedding" else "max")
        for m, found in hits.items()
    }
    ranks = {m: {n: i for i, (n, _) in enumerate(found)} for m, found in hits.items()}
    cosine = dict(hits["embedding"])
    best = hits["embedding"][0][1] if hits["embedding"] else 0.0
    words = query_words(parse_query(text))
    rows = []
    for name in candidates:
        words_of = data.names.get(name)
        row = [norms[m].get(name, 0.0) for m in FEATURE_MEMBERS]
        row += [1 / (1 + ranks[m][name]) if name in ranks[m] else 0.0 for m in FEATURE_MEMBERS]
        sim = cosine.get(name, min(cosine.values()) if cosine else 0.0)
        row += [sim, best - sim]
        row += [
            name_coverage(words, words_of.words) if words_of else 0.0,
            float(words_of is not None and names_whole_name(words, words_of.own, 2)),
            float(words_of is not None and names_server(words, words_of)),
            fused.get(name, 0.0),
        ]
        rows.append(row)
    return candidates, np.asarray(rows, dtype=np.float64).reshape(len(candidates), len(FEATURES))


def featurise(data: Data) -> dict[str, tuple[list[str], Any]]:
    """``{query id: (candidates, features)}`` for every query of ``data``."""
    variant = default_fused()
    out = {}
    for query in data.sample.queries:
        whole = {m: data.hits[m][query.id] for m in variant.fuser.weights}
        fused = {h.name: h.score for h in fused_hits(variant, query.text, whole, data.names)}
        out[query.id] = query_features(data, query.id, query.text, fused)
    return out


Features = dict[str, tuple[list[str], Any]]
Training = Sequence[tuple[Data, Features]]


def training_pairs(datasets: Training) -> tuple[Any, Any]:
    """Feature differences (relevant - non-relevant, and the reverse) with labels 1 / 0; each
    relevant tool is paired with the :data:`PAIRS_PER_POSITIVE` best-fused non-relevant ones."""
    diffs = []
    by_default = FEATURES.index("default")
    for data, feats in datasets:
        qrels = data.sample.qrels
        for qid, (candidates, x) in feats.items():
            relevant = qrels.get(qid, {})
            pos = [i for i, n in enumerate(candidates) if relevant.get(n, 0) > 0]
            neg = [i for i, n in enumerate(candidates) if relevant.get(n, 0) <= 0]
            neg.sort(key=lambda i: -x[i, by_default])
            diffs += [x[p] - x[n] for p in pos for n in neg[:PAIRS_PER_POSITIVE]]
    d = np.asarray(diffs)
    return np.vstack([d, -d]), np.concatenate([np.ones(len(d)), np.zeros(len(d))])


def train_linear(datasets: Training) -> Any:
    """Weights of the pairwise logistic model (features standardised for the fit)."""
    from sklearn.linear_model import LogisticRegression

    x, y = training_pairs(datasets)
    scale = x.std(axis=0) + 1e-9
    model = LogisticRegression(C=1.0, fit_intercept=False, max_iter=2000, random_state=SEED)
    model.fit(x / scale, y)
    weights = model.coef_[0] / scale
    return lambda features: features @ weights


def train_lambdamart(datasets: Training) -> Any:
    """LightGBM's LambdaMART (lambdarank objective, its usual settings, not tuned) on the graded
    labels of every positive training query."""
    import lightgbm

    rows, labels, groups = [], [], []
    for data, feats in datasets:
        qrels = data.sample.qrels
        for qid, (candidates, x) in feats.items():
            relevant = qrels.get(qid, {})
            if relevant and candidates:
                rows.append(x)
                labels += [max(0, relevant.get(n, 0)) for n in candidates]
                groups.append(len(candidates))
    model = lightgbm.LGBMRanker(
        objective="lambdarank",
        n_estimators=300,
        learning_rate=0.05,
        num_leaves=15,
        min_child_samples=50,
        subsample=0.8,
        subsample_freq=1,
        colsample_bytree=0.8,
        random_state=SEED,
        verbose=-1,
        n_jobs=1,
    )
    model.fit(np.vstack(rows), np.asarray(labels), group=groups)
    return model.booster_.predict


#: The learned rankers compared: each trains on dev samples and returns a scoring function.
MODELS: Mapping[str, Callable[[Training], Callable[[Any], Any]]] = {
    "pairwise logistic": train_linear,
    "LambdaMART": train_lambdamart,
}


def learned_rank(feats: Features, score: Callable[[Any], Any]) -> dict[str, list[Hit]]:
    out = {}
    for qid, (candidates, x) in feats.items():
        values = score(x) if candidates else np.zeros(0)
        order = np.argsort(-values, kind="stable")[:DEPTH]
        out[qid] = [Hit(candidates[i], float(values[i])) for i in order]
    return out


def evaluate(
    data: Data, feats: Features, score: Callable[[Any], Any], default: Mapping[str, list[Hit]]
) -> dict[str, Any]:
    """Test scores of a learned ranker beside ``default`` (the default fusion's run)."""
    runs = {"default": default, "learned": learned_rank(feats, score)}
    return {
        "default": scores(data, runs["default"]),
        "learned": scores(data, runs["learned"]),
        "significance": significance(data, runs, "default")["learned"],
    }


def run(limit: int, cache: Path) -> dict[str, Any]:
    """Every model, in-domain and leave-one-dataset-out, on every dataset's test split."""
    data = {(d, s): load_data(d, s, limit, cache) for d in DATASETS for s in SPLITS}
    feats = {key: featurise(item) for key, item in data.items()}
    dev = {d: (data[d, "dev"], feats[d, "dev"]) for d in DATASETS}
    defaults = {d: rank(data[d, "test"], default_fused()) for d in DATASETS}
    results: dict[str, Any] = {
        "benchmark": "learned_fusion",
        "protocol": {
            "limit": limit,
            "candidates_per_member": CANDIDATES,
            "trained_on": "dev splits",
            "reported": "test splits",
            "significance": "ranx paired two-sided t-test vs the default, p < 0.05",
        },
        "features": list(FEATURES),
        "models": {},
    }
    for label, fit in MODELS.items():
        everything = fit(list(dev.values()))
        results["models"][label] = {"in-domain": {}, "lodo": {}}
        for held in DATASETS:
            test = data[held, "test"], feats[held, "test"]
            left_out = fit([dev[d] for d in DATASETS if d != held])
            model = results["models"][label]
            model["in-domain"][held] = evaluate(*test, everything, defaults[held])
            model["lodo"][held] = evaluate(*test, left_out, defaults[held])
    return results


#: README columns: (dataset, group, metric).
COLUMNS = (
    ("mcp-workbench", "all", "recall@5"),
    ("mcp-workbench", "keywords", "hit@1"),
    ("mcp-workbench", "task", "recall@5"),
    ("metatool", "all", "ndcg@10"),
    ("bfcl", "all", "ndcg@10"),
)


def _cell(result: Mapping[str, Any], group: str, metric: str, who: str) -> str:
    value = f"{result[who][group][metric]:.3f}"
    test = result["significance"].get(metric) if group == "all" else None
    return value + ("*" if who == "learned" and test and test["significant"] else "")


def markdown(results: Mapping[str, Any]) -> str:
    """The README table: test scores of the default and of each learned ranker, trained on
    all three dev sets (in-domain) and on the two others (LODO); ``*`` marks a significant
    difference from the default (recall@5 and ndcg@10 of whole datasets)."""
    head = " | ".join(f"{d} {g} {m}" for d, g, m in COLUMNS)
    lines = [f"| ranker | trained on | {head} |", "|---|---|" + "---:|" * len(COLUMNS)]
    first = next(iter(results["models"].values()))["in-domain"]
    cells = [_cell(first[d], g, m, "default") for d, g, m in COLUMNS]
    lines.append(
        "| the default's convex fusion | dev, chosen by grid | " + " | ".join(cells) + " |"
    )
    for label, model in results["models"].items():
        for part, what in (("in-domain", "all three dev sets"), ("lodo", "the two others")):
            cells = [_cell(model[part][d], g, m, "learned") for d, g, m in COLUMNS]
            lines.append(f"| {label} | {what} | " + " | ".join(cells) + " |")
    limit = results["protocol"]["limit"]
    lines += [
        "",
        f"Test splits, at most {limit} queries; `*`: differs from the default (recall@5 and "
        "ndcg@10 of whole datasets), ranx paired two-sided t-test, p < 0.05.",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--limit", type=int, default=1000, help="queries per split (1000)")
    parser.add_argument("--cache", type=Path, default=None, help="member-run cache folder")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    results = run(args.limit, args.cache or default_runs_dir())
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(markdown(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
