"""The shipped model against the one it replaced, inside the default hybrid.

    python -m lab.default_model --out lab/results/default_model.json [--fold mcp ...]

``lab/broad_lodo.py`` and ``lab/fold_budget.py`` score models alone (the ``embedding``
backend's float32 ranking). What a user gets is the default hybrid, whose embedding member
runs the shipped model in int8 beside the lexical members. Here the default's fusion exactly
as it ships (``ablation.shipped_variant``, replayed over cached member runs) ranks with each
model as its embedding member, and nothing else changed, on two kinds of test split:

* **in-domain**: the three bundled datasets, with the shipped model (``broad_model``'s
  combined recipe) and the model shipped before it (``broad_lodo.previous_model``); both
  trained on those datasets' dev splits;
* **unseen**: each dataset of each fold trained at the shipped model's budget
  (``fold_budget.FOLDS``: all five), with the shipped recipe trained without the fold
  (``broad_model.candidate_fold_model``) and the previous recipe that never saw the dataset
  (``fold_budget.unseen_model``): neither saw it, as neither has seen a user's catalogue.

ranx paired t-tests against the previous model, p < 0.05, no correction
(``broad_lodo.scored``); at most 1,000 queries a split.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from lab import broad_model
from lab.ablation import MEMBERS, rank, sample_data, shipped_variant
from lab.broad_lodo import LIMIT, METRICS, previous_model, scored
from lab.fold_budget import fold_script, unseen_model
from lab.member_runs import DATASETS, MemberSpec, Sample, default_runs_dir, load_sample
from toolsearch.backends.encoders import SHIPPED_MODEL_PATH

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "lab" / "results" / "default_model.json"
PREVIOUS = "previous"
SHIPPED = "shipped"


def hybrid_runs(sample: Sample, models: Mapping[str, Path]) -> dict[str, dict[str, list[str]]]:
    """``{label: {query id: tool names}}``: the shipped default's ranking of ``sample`` with
    each model of ``models`` as its embedding member."""
    variant = shipped_variant()
    out = {}
    for label, path in models.items():
        embedding = {**MEMBERS["embedding"].options, "model": str(path)}
        members = {m: spec for m, spec in MEMBERS.items() if m in variant.fuser.weights}
        members["embedding"] = MemberSpec("embedding", "embedding", embedding)
        data = sample_data(sample, members, LIMIT, default_runs_dir())
        out[label] = {qid: [h.name for h in hits] for qid, hits in rank(data, variant).items()}
    return out


def in_domain() -> dict[str, Any]:
    models = {PREVIOUS: previous_model(), SHIPPED: SHIPPED_MODEL_PATH}
    rows = {}
    for name in DATASETS:
        sample = load_sample(name, "test", LIMIT)
        rows[name] = scored(sample, hybrid_runs(sample, models), PREVIOUS)
    return rows


def unseen(folds: tuple[str, ...]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for fold in folds:
        shipped_recipe = broad_model.candidate_fold_model(fold)
        rows = {}
        for name in broad_model.FOLDS[fold]:
            sample = load_sample(name, "test", LIMIT)
            models = {PREVIOUS: unseen_model(name), SHIPPED: shipped_recipe}
            rows[name] = scored(sample, hybrid_runs(sample, models), PREVIOUS)
        out[fold] = rows
    return out


def measure(folds: tuple[str, ...]) -> dict[str, Any]:
    return {
        "benchmark": "default_model",
        "limit": LIMIT,
        "in_domain": in_domain(),
        "unseen": unseen(folds),
    }


def _cells(result: Mapping[str, Any]) -> str:
    cells = []
    for metric in METRICS:
        values = []
        for label in (PREVIOUS, SHIPPED):
            test = result["versus"].get(label, {}).get(metric)
            mark = "*" if test and test["significant"] else ""
            values.append(f"{result['means'][label][metric]:.3f}{mark}")
        cells.append(" / ".join(values))
    return " | ".join(cells)


def markdown(data: Mapping[str, Any]) -> str:
    """One row per test split: each metric with the previous model, then the shipped one."""
    lines = [
        "| models | dataset (test) | queries | ndcg@10 previous / shipped | recall@5 | hit@1 |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for name, result in data["in_domain"].items():
        lines.append(f"| in-domain | {name} | {result['queries']} | {_cells(result)} |")
    for fold, rows in data["unseen"].items():
        for name, result in rows.items():
            label = f"unseen (fold {fold})"
            lines.append(f"| {label} | {name} | {result['queries']} | {_cells(result)} |")
    lines += [
        "",
        "The default hybrid as it ships, its embedding member (int8) running each model. "
        "In-domain: the shipped model and the model shipped before it, both trained on the "
        "dataset's dev split. Unseen: the shipped recipe trained without the fold, and the "
        "previous recipe trained without the dataset (the previous model itself for a dataset "
        "it never saw). `*`: differs from previous (ranx paired t-test, p < 0.05).",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    return fold_script(argv, __doc__ or "", OUT, measure, markdown)


if __name__ == "__main__":
    raise SystemExit(main())
