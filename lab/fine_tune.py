"""Fine-tuning the bundled MiniLM on labelled tool requests, measured leave-one-dataset-out.

    python -m lab.fine_tune --out lab/results/fine_tune.json

For each dataset of :data:`member_runs.DATASETS` left out in turn, a copy of the shipped
all-MiniLM-L6-v2 is trained on the **dev** splits of the two others and scored, as the
``embedding`` backend ranks (cosine between the query and the tool's embedded text,
``tool_text`` with the backend's default fields and word cap), on the **test** split of all
three: the left-out one is the leave-one-dataset-out score (a catalogue and phrasing the model
never saw), the other two are in-domain (their dev queries were trained on). Each score is
compared with the untrained model on the same queries by ranx's paired t-test (p < 0.05).
The default hybrid is scored the same way on the left-out dataset, once with the untrained
model as its embedding member and once with the fold's model. The fold models are those of
``tuned_models.py`` (cached; stored in float16 like the shipped model).

Training is the field's standard recipe for retrieval fine-tuning, not tuned:
sentence-transformers' MultipleNegativesRankingLoss written out (each request against every
tool text of its batch, cosine x 20, cross-entropy; no tool twice in a batch), batches of 32
pairs, AdamW at 2e-5 with 10 % linear warm-up then linear decay, two passes
(``training_passes.py``), texts cut at 128 word pieces, seed 42, two CPU threads; and one
mined hard negative per pair
(NV-Retriever's positive-aware mining at its published 95 % margin,
:func:`toolsearch.backends.fine_tuning.mine_hard_negatives`), kept because it lifted the
left-out datasets' dev splits with one pass and still lifts their mean with two
(lab/retrieval.md). A pass over about 2,300 pairs takes
six to ten minutes on two cores. Needs the ``embedding`` extra (PyTorch) and the public
datasets (``../shared/datasets``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from lab.member_runs import DATASETS, DEPTH, MemberSpec, Sample, load_sample, member_hits
from lab.script import table_script
from lab.tuned_models import RECIPE, SEEDS, base_path, fold_model
from toolsearch.backends.embedding import DEFAULT_FIELDS, DEFAULT_MAX_WORDS
from toolsearch.backends.encoders import BASE_MODEL, SHIPPED_MODEL_PATH
from toolsearch.backends.fine_tuning import load_trainable
from toolsearch.backends.tool_text import tool_text
from toolsearch.bench.metrics import parse_metrics, per_query_scores
from toolsearch.bench.significance import compare_backends
from toolsearch.tool import Tool

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "lab" / "results" / "fine_tune.json"
METRICS = ("ndcg@10", "recall@5", "hit@1")
LIMIT = 1000


def embedded_text(tool: Tool) -> str:
    """What the ``embedding`` backend embeds for ``tool`` by default."""
    return str(tool_text(tool, DEFAULT_FIELDS, DEFAULT_MAX_WORDS))


def ranked(model: Any, sample: Sample) -> dict[str, list[str]]:
    """``{query id: tool names}``, the best :data:`DEPTH` by cosine, for the labelled queries."""
    import numpy as np

    tools = list(sample.dataset.tools)
    queries = [q for q in sample.queries if sample.is_positive(q)]
    encode = {"batch_size": 64, "normalize_embeddings": True, "convert_to_numpy": True}
    tool_vectors = model.encode([embedded_text(t) for t in tools], **encode)
    query_vectors = model.encode([q.text for q in queries], **encode)
    scores = query_vectors @ tool_vectors.T
    order = np.argsort(-scores, axis=1, kind="stable")[:, :DEPTH]
    return {q.id: [tools[j].name for j in row] for q, row in zip(queries, order, strict=True)}


def scored(sample: Sample, runs: dict[str, dict[str, list[str]]]) -> dict[str, Any]:
    """Means of both runs and the paired test of each metric (tuned against base)."""
    metrics = parse_metrics(METRICS)
    qrels = sample.qrels
    means = {}
    for name, run in runs.items():
        per_query = per_query_scores(qrels, run, metrics, groups=sample.groups)
        means[name] = {m: round(sum(per_query[m].values()) / len(qrels), 4) for m in METRICS}
    tests = compare_backends(
        qrels, runs, metrics, depth=DEPTH, groups=sample.groups, correction="none"
    )
    return {
        **means,
        "p": {t.metric: round(t.p_value, 6) for t in tests.pairs},
        "significant": {t.metric: t.significant for t in tests.pairs},
        "queries": len(qrels),
    }


def hybrid_ranked(sample: Sample, model: str, limit: int) -> dict[str, list[str]]:
    """The default hybrid's ranking with ``model`` as its embedding member, run in float32 so
    that only the model differs (no abstention, so rankings are compared), for the labelled
    queries."""
    member = {"model": model, "precision": "fp32"}
    options = {"member_options": {"embedding": member}, "min_member_score": {}}
    spec = MemberSpec("hybrid-" + Path(model).name, "hybrid", options)
    hits = member_hits(sample, spec, limit=limit)
    return {q.id: [n for n, _ in hits[q.id]] for q in sample.queries if sample.is_positive(q)}


def shipped_default(sample: Sample, limit: int) -> dict[str, Any]:
    """The default hybrid with the untrained and with the shipped model, on ``sample`` (its
    dev half was trained on), overall and per query style."""
    runs = {
        "base": hybrid_ranked(sample, BASE_MODEL, limit),
        "tuned": hybrid_ranked(sample, str(SHIPPED_MODEL_PATH), limit),
    }
    return by_style(sample, runs)


def by_style(sample: Sample, runs: dict[str, dict[str, list[str]]]) -> dict[str, Any]:
    """:func:`scored` over all of ``sample``'s labelled queries (``all``) and per query style."""
    out = {"all": scored(sample, runs)}
    for style in sorted({q.style for q in sample.queries if q.style and sample.is_positive(q)}):
        part = replace(sample, queries=tuple(q for q in sample.queries if q.style == style))
        out[style] = scored(part, {n: {q: r[q] for q in part.qrels} for n, r in runs.items()})
    return out


def measure(limit: int = LIMIT) -> dict[str, Any]:
    test = {d: load_sample(d, "test", limit) for d in DATASETS}
    base = load_trainable(base_path(), RECIPE)
    base_runs = {d: ranked(base, test[d]) for d in DATASETS}
    folds = {}
    fold_models: dict[str, Any] = {}
    left_out_runs: dict[str, dict[str, list[str]]] = {}
    for left in DATASETS:
        path = fold_model(left, limit)
        model = fold_models[left] = load_trainable(path, RECIPE)
        training = json.loads((path / "toolsearch-training.json").read_text(encoding="utf-8"))
        hybrid = {
            "base": hybrid_ranked(test[left], BASE_MODEL, limit),
            "tuned": hybrid_ranked(test[left], str(path), limit),
        }
        tuned_runs = {d: ranked(model, test[d]) for d in DATASETS}
        folds[left] = {
            "trained_on": training["datasets"],
            "training": training,
            "test": {
                d: scored(test[d], {"base": base_runs[d], "tuned": tuned_runs[d]}) for d in DATASETS
            },
            "hybrid_left_out": scored(test[left], hybrid),
        }
        left_out_runs[left] = tuned_runs[left]
    shipped = {d: shipped_default(test[d], limit) for d in DATASETS}
    return {
        "benchmark": "fine_tune",
        "model": BASE_MODEL,
        "shipped": shipped,
        "recipe": RECIPE.describe(),
        "limit": limit,
        "folds": folds,
        "hard_negatives": hard_negatives_effect(limit, test, fold_models, left_out_runs),
        "seeds": seed_spread(limit, test, base_runs, folds),
    }


def seed_spread(
    limit: int,
    test: dict[str, Sample],
    base_runs: dict[str, dict[str, list[str]]],
    folds: dict[str, Any],
) -> dict[str, dict[str, Any]]:
    """Each fold's left-out test scores at every seed of :data:`tuned_models.SEEDS`, the
    `embedding` ranking and the default hybrid with the fold's model: whether the left-out
    gains hold when only the training seed changes (the first seed's are ``folds``')."""
    out: dict[str, dict[str, Any]] = {}
    for left in DATASETS:
        first = {"embedding": folds[left]["test"][left], "hybrid": folds[left]["hybrid_left_out"]}
        out[left] = {str(SEEDS[0]): first}
        for seed in SEEDS[1:]:
            recipe = replace(RECIPE, seed=seed)
            path = fold_model(left, limit, recipe)
            runs = {
                "base": base_runs[left],
                "tuned": ranked(load_trainable(path, recipe), test[left]),
            }
            hybrid = {
                "base": hybrid_ranked(test[left], BASE_MODEL, limit),
                "tuned": hybrid_ranked(test[left], str(path), limit),
            }
            out[left][str(seed)] = {
                "embedding": scored(test[left], runs),
                "hybrid": scored(test[left], hybrid),
            }
    return out


def hard_negatives_effect(
    limit: int,
    test: dict[str, Sample],
    mined: dict[str, Any],
    mined_test_runs: dict[str, dict[str, list[str]]],
) -> dict[str, dict[str, Any]]:
    """The recipe without and with mined hard negatives: each fold's model (``mined``, the
    default recipe's, whose left-out test rankings are ``mined_test_runs``), on the left-out
    dataset's dev split (where the choice was made: no fold model saw it) and test split."""
    plain = replace(RECIPE, hard_negatives=False)
    out: dict[str, dict[str, Any]] = {}
    for left in DATASETS:
        without = load_trainable(fold_model(left, limit, plain), plain)
        dev = load_sample(left, "dev", limit)
        out[left] = {
            "dev": scored(dev, {"base": ranked(without, dev), "tuned": ranked(mined[left], dev)}),
            "test": scored(
                test[left], {"base": ranked(without, test[left]), "tuned": mined_test_runs[left]}
            ),
        }
    return out


def markdown(data: dict[str, Any]) -> str:
    """The README table: per left-out dataset, its test scores and the in-domain ones."""
    lines = [
        "| trained on (dev) | scored on (test) | kind | ndcg@10 base → tuned | recall@5 | hit@1 |",
        "|---|---|---|---:|---:|---:|",
    ]
    for left, fold in data["folds"].items():
        for dataset, got in fold["test"].items():
            kind = "left out" if dataset == left else "in-domain"
            lines.append(
                f"| {' + '.join(fold['trained_on'])} | {dataset} | {kind} | "
                + " | ".join(cells(got))
                + " |"
            )
    lines += [
        "",
        f"The `embedding` backend's ranking (cosine), at most {data['limit']} test queries per "
        "dataset; `*`: tuned differs from base, ranx paired two-sided t-test, p < 0.05, no "
        "correction. In-domain rows: that dataset's dev queries were trained on.",
        "",
        "The default hybrid with the fold's model as its embedding member (float32), on the "
        "left-out dataset (test, rankings without abstention):",
        "",
        "| dataset left out | ndcg@10 base → tuned | recall@5 | hit@1 |",
        "|---|---:|---:|---:|",
    ]
    for left, fold in data["folds"].items():
        lines.append(f"| {left} | " + " | ".join(cells(fold["hybrid_left_out"])) + " |")
    lines += [
        "",
        "The default hybrid with the shipped model (trained on the dev half of all three; "
        "float32), test splits, rankings without abstention:",
        "",
        "| scored on (test) | queries | ndcg@10 base → shipped | recall@5 | hit@1 |",
        "|---|---:|---:|---:|---:|",
    ]
    for dataset, parts in data.get("shipped", {}).items():
        for part, got in parts.items():
            name = dataset if part == "all" else f"{dataset} `{part}`"
            lines.append(f"| {name} | {got['queries']} | " + " | ".join(cells(got)) + " |")
    lines += _hard_negatives_lines(data.get("hard_negatives", {}))
    return "\n".join(lines + _seed_lines(data.get("seeds", {})))


def _seed_lines(spread: dict[str, dict[str, Any]]) -> list[str]:
    """The table of each fold's left-out test scores at every training seed."""
    if not spread:
        return []
    lines = [
        "",
        "Each fold's model trained again at a second seed, nothing else changed, on the "
        "dataset it never saw (test; `*` against the untrained model, as above):",
        "",
        "| dataset left out | seed | `embedding` ndcg@10 base → tuned | recall@5 | hit@1 "
        "| default hybrid ndcg@10 base → tuned | recall@5 | hit@1 |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for left, seeds in spread.items():
        for seed, got in seeds.items():
            row = cells(got["embedding"]) + cells(got["hybrid"])
            lines.append(f"| {left} | {seed} | " + " | ".join(row) + " |")
    return lines


def _hard_negatives_lines(effect: dict[str, dict[str, Any]]) -> list[str]:
    """The table of the recipe with and without mined hard negatives (fold models)."""
    if not effect:
        return []
    lines = [
        "",
        "One mined hard negative per pair against in-batch negatives only: each fold's model "
        "trained both ways, scored on the dataset it never saw (the `embedding` ranking; the "
        "recipe was chosen on the dev rows):",
        "",
        "| dataset left out | split | ndcg@10 in-batch → mined | recall@5 | hit@1 |",
        "|---|---|---:|---:|---:|",
    ]
    for left, splits in effect.items():
        for split, got in splits.items():
            lines.append(f"| {left} | {split} | " + " | ".join(cells(got)) + " |")
    return lines


def cells(got: dict[str, Any]) -> list[str]:
    """``base → tuned`` per metric, ``*`` when significant."""
    out = []
    for metric in METRICS:
        star = "*" if got["significant"].get(metric) else ""
        out.append(f"{got['base'][metric]:.3f} → {got['tuned'][metric]:.3f}{star}")
    return out


def training_script(
    argv: list[str] | None,
    doc: str,
    out: Path,
    measure: Callable[[int], dict[str, Any]],
    render: Callable[[dict[str, Any]], str],
) -> int:
    """The command line of a script that trains and scores models (``--limit``, ``--out``):
    ``measure(limit)`` written as JSON to ``--out``, then ``render``-ed."""
    limit = ("--limit", {"type": int, "default": LIMIT, "help": "queries per split (1000)"})
    return table_script(argv, doc, out, limit, measure, render)


def main(argv: list[str] | None = None) -> int:
    return training_script(argv, __doc__ or "", OUT, measure, markdown)


if __name__ == "__main__":
    raise SystemExit(main())
