"""How many passes over the training pairs: one against two, leave-one-dataset-out, at two seeds.

    python -m lab.training_passes --out lab/results/training_passes.json

The default model's recipe (``toolsearch.backends.fine_tuning.Recipe``) made one pass over
about 3,500 pairs: 109 optimiser steps. Sentence-transformers' examples and most published
retrieval fine-tunings make one to four, and with so few steps a second pass was the first
thing to ask about; this comparison is why the recipe now makes two. Each fold model of
``tuned_models.py`` (trained on the dev splits of two datasets) is trained with each of
:data:`PASSES` passes, nothing else changed (the learning rate
warms up and decays over all the steps, as in one pass), at each seed of
``tuned_models.SEEDS``, and both are scored on the dataset they never saw: its **dev** split,
where a choice would be made, and its **test** split, as the `embedding` ranking (cosine,
``fine_tune.ranked``) and as the default hybrid with the fold model as its embedding member
(float32, no abstention, ``fine_tune.hybrid_ranked``), overall and per query style;
mcp-workbench also inside :data:`LARGE_TOOLS` tools (``distractors.py``), the hybrid only.
Paired two-sided t-tests (ranx, p < 0.05) compare the two on the same queries.

The rule, fixed before the run: the recipe would take two passes only if, at every seed, the
default hybrid's mean left-out dev ndcg@10 rose with no significant loss on any left-out dev
split, and the test splits then agreed. A fold model takes 8-12 minutes a pass on two cores;
all are cached like ``fine_tune.py``'s. Needs the ``embedding`` extra (PyTorch) and the public
datasets (``../shared/datasets``).
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from lab.distractors import samples as distractor_samples
from lab.fine_tune import LIMIT, by_style, cells, hybrid_ranked, ranked, training_script
from lab.member_runs import DATASETS, Sample, load_sample
from lab.tuned_models import RECIPE, SEEDS, fold_model
from toolsearch.backends.fine_tuning import load_trainable

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "lab" / "results" / "training_passes.json"
#: The passes compared: one and two (fixed, so a change of the recipe's passes leaves this
#: comparison as it was measured).
PASSES = (1, 2)
#: The catalogue size of the large-catalogue rows (as the ablation's).
LARGE_TOOLS = 10_000
#: The names :func:`fine_tune.scored` gives the runs it compares: fewer passes, then more.
RUN_NAMES = ("base", "tuned")
#: Query styles shown in the table beside all queries.
STYLES = ("hard", "task")


def fold_paths(left: str, limit: int, seed: int) -> dict[int, Path]:
    """The fold model trained without ``left`` at ``seed`` and each of :data:`PASSES`."""
    return {p: fold_model(left, limit, replace(RECIPE, epochs=p, seed=seed)) for p in PASSES}


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
    """Both passes' fold models at every seed of :data:`tuned_models.SEEDS` on each left-out
    dataset (training them unless cached), and the rule applied at each seed."""
    seeds: dict[str, Any] = {}
    for seed in SEEDS:
        folds = {left: measure_fold(left, limit, seed) for left in DATASETS}
        seeds[str(seed)] = {"folds": folds, "decision": decision(folds)}
    return {
        "benchmark": "training_passes",
        "passes": list(PASSES),
        "recipe": RECIPE.describe(),
        "limit": limit,
        "seeds": seeds,
        "decision": across_seeds(seeds),
    }


def measure_fold(left: str, limit: int, seed: int) -> dict[str, Any]:
    """Both passes' fold models trained without ``left`` at ``seed``, scored on ``left``'s dev
    and test splits (mcp-workbench's also inside :data:`LARGE_TOOLS` tools)."""
    paths = fold_paths(left, limit, seed)
    fold = {
        "training": {str(p): _training(path) for p, path in paths.items()},
        **{
            s: compared(load_sample(left, s, limit), paths, limit, dense=True)
            for s in ("dev", "test")
        },
    }
    if left == "mcp-workbench":
        for split in ("dev", "test"):
            _, big = distractor_samples(limit, LARGE_TOOLS, split)
            fold[f"{split}+{LARGE_TOOLS}"] = compared(big, paths, limit, dense=False)
    return fold


def _training(path: Path) -> dict[str, Any]:
    record = json.loads((path / "toolsearch-training.json").read_text(encoding="utf-8"))
    return {k: record[k] for k in ("pairs", "steps", "seconds", "first_loss", "last_loss")}


def decision(folds: dict[str, Any]) -> dict[str, Any]:
    """The rule of the module docstring applied to the default hybrid's left-out scores at one
    seed: its dev part (``more_passes``), then whether the test splits agree (a mean that does
    not fall and no significant loss)."""
    dev_means, dev_losses = _means_and_losses(folds, "dev")
    test_means, test_losses = _means_and_losses(folds, "test")
    return {
        "dev_mean_ndcg@10": dev_means,
        "dev_significant_losses": dev_losses,
        "more_passes": _more(dev_means) > 0 and not dev_losses,
        "test_mean_ndcg@10": test_means,
        "test_significant_losses": test_losses,
        "test_agrees": _more(test_means) >= 0 and not test_losses,
    }


def _means_and_losses(folds: dict[str, Any], split: str) -> tuple[dict[str, float], list[str]]:
    """The hybrid's mean left-out ndcg@10 on ``split`` per number of passes, and the datasets
    where more passes lose significantly."""
    got = {left: fold[split]["hybrid"]["all"] for left, fold in folds.items()}
    means = {
        str(passes): round(sum(one[name]["ndcg@10"] for one in got.values()) / len(got), 4)
        for passes, name in zip(PASSES, RUN_NAMES, strict=True)
    }
    losses = [
        left
        for left, one in got.items()
        if one["significant"]["ndcg@10"] and one["tuned"]["ndcg@10"] < one["base"]["ndcg@10"]
    ]
    return means, losses


def _more(means: dict[str, float]) -> float:
    """How much more passes add to a mean (``means`` in :data:`PASSES` order)."""
    fewer, more = means.values()
    return more - fewer


def across_seeds(seeds: dict[str, Any]) -> dict[str, Any]:
    """The rule at every seed: more passes only if each seed's fold models meet its dev part
    and their test splits agree."""
    meeting = [
        seed
        for seed, got in seeds.items()
        if got["decision"]["more_passes"] and got["decision"]["test_agrees"]
    ]
    return {"seeds_meeting": meeting, "more_passes": len(meeting) == len(seeds)}


def markdown(data: dict[str, Any]) -> str:
    """The README table: per seed, left-out dataset, split and ranking, one pass → two."""
    first, second = data["passes"]
    lines = [
        f"| seed | dataset left out | split | ranking | queries | ndcg@10 {first} → {second} "
        "passes | recall@5 | hit@1 |",
        "|---|---|---|---|---|---:|---:|---:|",
    ]
    for seed, got in data["seeds"].items():
        lines += _seed_rows(seed, got["folds"])
    lines += [
        "",
        "`*`: the two differ, ranx paired two-sided t-test, p < 0.05, no correction; `hybrid`: "
        "the default hybrid with the fold model as its embedding member (float32, no "
        f"abstention); `dev+{LARGE_TOOLS}`: the split inside {LARGE_TOOLS:,} tools. "
        + " ".join(_seed_verdict(seed, got["decision"]) for seed, got in data["seeds"].items())
        + f" Two passes {'meet' if data['decision']['more_passes'] else 'do not meet'} the "
        "rule at every seed (dev mean up, no significant dev loss, test mean not down, no "
        "significant test loss).",
    ]
    return "\n".join(lines)


def _seed_rows(seed: str, folds: dict[str, Any]) -> list[str]:
    """One seed's table rows: per left-out dataset, split, ranking and query style."""
    rows = []
    for left, fold in folds.items():
        for split, rankings in fold.items():
            if split == "training":
                continue
            for ranking, parts in rankings.items():
                for part in ("all", *STYLES):
                    if part not in parts:
                        continue
                    name = ranking if part == "all" else f"{ranking} `{part}`"
                    got = parts[part]
                    rows.append(
                        f"| {seed} | {left} | {split} | {name} | {got['queries']} | "
                        + " | ".join(cells(got))
                        + " |"
                    )
    return rows


def _seed_verdict(seed: str, chosen: dict[str, Any]) -> str:
    """One seed's mean left-out ndcg@10 of the default hybrid per split, and its losses."""
    parts = []
    for split in ("dev", "test"):
        (fewer, low), (more, high) = chosen[f"{split}_mean_ndcg@10"].items()
        losses = ", ".join(chosen[f"{split}_significant_losses"]) or "none"
        parts.append(
            f"{split} {low:.4f} ({fewer} pass) against {high:.4f} ({more}), significant "
            f"losses: {losses}"
        )
    return f"Seed {seed}, mean left-out ndcg@10 of the default hybrid: {'; '.join(parts)}."


def main(argv: list[str] | None = None) -> int:
    return training_script(argv, __doc__ or "", OUT, measure, markdown)


if __name__ == "__main__":
    raise SystemExit(main())
