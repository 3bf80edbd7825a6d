"""How many passes over the training pairs: the recipe's one against two, leave-one-dataset-out.

    python benchmarks/training_passes.py --out benchmarks/results/training_passes.json

The default model's recipe (``toolsearch.backends.fine_tuning.Recipe``) makes one pass over
about 3,500 pairs: 109 optimiser steps. Sentence-transformers' examples and most published
retrieval fine-tunings make one to four, and with so few steps a second pass is the first
thing to ask about. Each fold model of ``tuned_models.py`` (trained on the dev splits of two
datasets) is trained again with :data:`PASSES` passes, nothing else changed (the learning rate
warms up and decays over all the steps, as in one pass), and both are scored on the dataset
they never saw: its **dev** split, where a choice would be made, and its **test** split, as
the `embedding` ranking (cosine, ``fine_tune.ranked``) and as the default hybrid with the fold
model as its embedding member (float32, no abstention, ``fine_tune.hybrid_ranked``), overall
and per query style; mcp-workbench also inside :data:`LARGE_TOOLS` tools (``distractors.py``),
the hybrid only. Paired two-sided t-tests (ranx, p < 0.05) compare the two on the same queries.

The rule, fixed before the run: the recipe would take two passes only if the default hybrid's
mean left-out dev ndcg@10 rose with no significant loss on any left-out dev split, and the test
splits then agreed. A fold model takes 8-12 minutes a pass on two cores; both are cached like
``fine_tune.py``'s. Needs the ``embedding`` extra (PyTorch) and the public datasets
(``../shared/datasets``).
"""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from distractors import samples as distractor_samples
from fine_tune import LIMIT, by_style, cells, hybrid_ranked, ranked, training_script
from member_runs import DATASETS, Sample, load_sample
from tuned_models import RECIPE, fold_model

from toolsearch.backends.fine_tuning import load_trainable

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "training_passes.json"
#: The passes compared: the recipe's, then one more.
PASSES = (RECIPE.epochs, RECIPE.epochs + 1)
#: The catalogue size of the large-catalogue rows (as the ablation's).
LARGE_TOOLS = 10_000
#: The names :func:`fine_tune.scored` gives the runs it compares: fewer passes, then more.
RUN_NAMES = ("base", "tuned")
#: Query styles shown in the table beside all queries.
STYLES = ("hard", "task")


def fold_paths(left: str, limit: int) -> dict[int, Path]:
    """The fold model trained without ``left`` at each of :data:`PASSES`."""
    return {p: fold_model(left, limit, replace(RECIPE, epochs=p)) for p in PASSES}


def compared(sample: Sample, paths: dict[int, Path], limit: int, *, dense: bool) -> dict[str, Any]:
    """The hybrid's (and with ``dense`` the `embedding` ranking's) scores of both fold models
    on ``sample``: runs named ``base`` (fewer passes) and ``tuned`` (more)."""
    named = dict(zip(RUN_NAMES, (paths[p] for p in PASSES), strict=True))
    hybrid = {name: hybrid_ranked(sample, str(path), limit) for name, path in named.items()}
    out = {"hybrid": by_style(sample, hybrid)}
    if dense:
        dense_runs = {
            name: ranked(load_trainable(path, RECIPE), sample) for name, path in named.items()
        }
        out["embedding"] = by_style(sample, dense_runs)
    return out


def measure(limit: int = LIMIT) -> dict[str, Any]:
    """Both passes' fold models on each left-out dataset (training them unless cached)."""
    folds: dict[str, Any] = {}
    for left in DATASETS:
        paths = fold_paths(left, limit)
        folds[left] = {
            "training": {str(p): _training(path) for p, path in paths.items()},
            **{
                s: compared(load_sample(left, s, limit), paths, limit, dense=True)
                for s in ("dev", "test")
            },
        }
        if left == "mcp-workbench":
            for split in ("dev", "test"):
                _, big = distractor_samples(limit, LARGE_TOOLS, split)
                folds[left][f"{split}+{LARGE_TOOLS}"] = compared(big, paths, limit, dense=False)
    return {
        "benchmark": "training_passes",
        "passes": list(PASSES),
        "recipe": RECIPE.describe(),
        "limit": limit,
        "folds": folds,
        "decision": decision(folds),
    }


def _training(path: Path) -> dict[str, Any]:
    record = json.loads((path / "toolsearch-training.json").read_text(encoding="utf-8"))
    return {k: record[k] for k in ("pairs", "steps", "seconds", "first_loss", "last_loss")}


def decision(folds: dict[str, Any]) -> dict[str, Any]:
    """The rule of the module docstring applied to the default hybrid's left-out dev scores."""
    dev = {left: fold["dev"]["hybrid"]["all"] for left, fold in folds.items()}
    means = {
        name: round(sum(got[name]["ndcg@10"] for got in dev.values()) / len(dev), 4)
        for name in RUN_NAMES
    }
    losses = [
        left
        for left, got in dev.items()
        if got["significant"]["ndcg@10"] and got["tuned"]["ndcg@10"] < got["base"]["ndcg@10"]
    ]
    return {
        "dev_mean_ndcg@10": {str(p): means[n] for p, n in zip(PASSES, RUN_NAMES, strict=True)},
        "dev_significant_losses": losses,
        "more_passes": means["tuned"] > means["base"] and not losses,
    }


def markdown(data: dict[str, Any]) -> str:
    """The README table: per left-out dataset, split and ranking, one pass → two."""
    first, second = data["passes"]
    lines = [
        f"| dataset left out | split | ranking | queries | ndcg@10 {first} → {second} passes "
        "| recall@5 | hit@1 |",
        "|---|---|---|---|---:|---:|---:|",
    ]
    for left, fold in data["folds"].items():
        for split, rankings in fold.items():
            if split == "training":
                continue
            for ranking, parts in rankings.items():
                for part in ("all", *STYLES):
                    if part not in parts:
                        continue
                    name = ranking if part == "all" else f"{ranking} `{part}`"
                    got = parts[part]
                    lines.append(
                        f"| {left} | {split} | {name} | {got['queries']} | "
                        + " | ".join(cells(got))
                        + " |"
                    )
    chosen = data["decision"]
    means = chosen["dev_mean_ndcg@10"]
    lines += [
        "",
        "`*`: the two differ, ranx paired two-sided t-test, p < 0.05, no correction; `hybrid`: "
        "the default hybrid with the fold model as its embedding member (float32, no "
        f"abstention); `dev+{LARGE_TOOLS}`: the split inside {LARGE_TOOLS:,} tools. Mean "
        f"left-out dev ndcg@10 of the default hybrid: {means[str(first)]:.4f} ({first} pass) "
        f"against {means[str(second)]:.4f} ({second}); significant dev losses: "
        f"{', '.join(chosen['dev_significant_losses']) or 'none'}; two passes "
        f"{'meet' if chosen['more_passes'] else 'do not meet'} the rule's dev part.",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    return training_script(argv, __doc__ or "", OUT, measure, markdown)


if __name__ == "__main__":
    raise SystemExit(main())
