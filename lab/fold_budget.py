"""Does a fold soup lose on the datasets it never saw because of the small fold budget?

    python -m lab.fold_budget --out lab/results/fold_budget.json [--fold mcp ...]

``lab/broad_lodo.py`` scores each fold's soup with a broad half trained at the fold budget
(``broad_model.FOLD_PER_SOURCE`` pairs a source, one pass), far below the soup candidate's
(``broad_model.PER_SOURCE``, two passes, the three bundled samples whole). On mcp-workbench
that fold soup trails the shipped recipe trained without mcp-workbench. Here each fold of
``broad_model.FOLDS`` (:data:`FOLDS`: all five, so every dataset is left out once) is trained
at the candidate's budget — the shipped model's combined recipe
(:func:`broad_model.candidate_fold_model`, 40 to 80 minutes on two cores) and its soup
(:func:`broad_model.candidate_fold_soup`) — and
scored on the test split of each dataset it left out, against the untuned all-MiniLM-L6-v2,
the previous shipped model's recipe trained without the dataset (``previous unseen``), that
recipe trained without the fold's bundled dataset (``previous fold``: ``previous unseen`` of
Seal-Tools and NESTFUL learnt from BFCL, a dataset of their own fold, which the candidate fold
never saw; the three-dataset model itself for a fold without a bundled dataset) and the
fold-budget soup — the ``embedding`` backend's float32 ranking, ranx paired
t-tests against ``previous unseen``, p < 0.05, no correction (``broad_lodo.scored``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from lab import broad_model, tuned_models
from lab.broad_lodo import LIMIT, METRICS, UNSEEN, model_runs, scored
from lab.member_runs import DATASETS, load_sample
from lab.script import table_script
from lab.tuned_models import base_path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "lab" / "results" / "fold_budget.json"
#: The folds trained at the candidate's budget when none is named: every one.
FOLDS = tuple(broad_model.FOLDS)
#: The models of each row, after base and previous unseen.
MODELS = ("previous fold", "fold soup", "candidate fold", "candidate fold soup")


def unseen_model(name: str) -> Path:
    """A model of the previous shipped recipe that never saw ``name``: its fold model for a
    bundled dataset, else the three-dataset model itself (trained on the bundled three only)."""
    if name in DATASETS:
        return tuned_models.fold_model(name)
    return tuned_models.shipped_recipe_model()


def measure(folds: tuple[str, ...]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for fold in folds:
        models = {
            "previous fold": broad_model.narrow_fold_model(fold),
            "fold soup": broad_model.fold_soup(fold),
            "candidate fold": broad_model.candidate_fold_model(fold),
            "candidate fold soup": broad_model.candidate_fold_soup(fold),
        }
        rows = {}
        for name in broad_model.FOLDS[fold]:
            sample = load_sample(name, "test", LIMIT)
            paths = {"base": base_path(), UNSEEN: unseen_model(name), **models}
            runs = {label: model_runs(path, {name: sample})[name] for label, path in paths.items()}
            rows[name] = scored(sample, runs, UNSEEN)
        out[fold] = rows
    return {"benchmark": "fold_budget", "limit": LIMIT, "folds": out}


def markdown(data: dict[str, Any]) -> str:
    """One row per fold and left-out dataset: each metric for every model."""
    header = " / ".join(("base", UNSEEN, *MODELS))
    lines = [
        f"| fold left out | dataset (test) | queries | ndcg@10 {header} | recall@5 | hit@1 |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for fold, rows in data["folds"].items():
        for name, result in rows.items():
            cells = []
            for metric in METRICS:
                values = []
                for label in ("base", UNSEEN, *MODELS):
                    test = result["versus"].get(label, {}).get(metric)
                    mark = "*" if test and test["significant"] else ""
                    values.append(f"{result['means'][label][metric]:.3f}{mark}")
                cells.append(" / ".join(values))
            lines.append(f"| {fold} | {name} | {result['queries']} | {' | '.join(cells)} |")
    lines += [
        "",
        "The `embedding` backend's float32 ranking; no model in a row saw its dataset. "
        "`previous unseen`: the previous shipped model's recipe (three datasets) trained "
        "without the dataset, or that model itself where it never saw it; `previous fold`: "
        "that recipe trained without the fold's bundled dataset (the three-dataset model itself "
        "in a fold without one), so that, like the candidate fold, it never saw the fold's "
        "other datasets either; `fold soup`: "
        "`lab.broad_lodo`'s, its broad half at the fold budget; `candidate fold`: the shipped "
        "model's recipe (combined) trained without the fold at its budget; `candidate fold "
        "soup`: that model averaged with `previous unseen`. `*`: differs from `previous "
        "unseen` (ranx paired t-test, p < 0.05).",
    ]
    return "\n".join(lines)


def fold_script(
    argv: list[str] | None,
    doc: str,
    out: Path,
    measure: Callable[[tuple[str, ...]], dict[str, Any]],
    render: Callable[[dict[str, Any]], str],
) -> int:
    """The command line of a script that scores fold models (``--fold``, ``--out``):
    ``measure(folds)`` written as JSON to ``--out``, then ``render``-ed. Without ``--fold``,
    :data:`FOLDS`."""
    fold = ("--fold", {"action": "append", "choices": sorted(broad_model.FOLDS)})
    return table_script(argv, doc, out, fold, lambda folds: measure(tuple(folds or FOLDS)), render)


def main(argv: list[str] | None = None) -> int:
    return fold_script(argv, __doc__ or "", OUT, measure, markdown)


if __name__ == "__main__":
    raise SystemExit(main())
