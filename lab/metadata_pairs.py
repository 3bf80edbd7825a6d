"""Pairs from tool metadata: does training on MCP tool descriptions help the model on an MCP
catalogue it never saw, and should the shipped model be trained with them?

    python -m lab.metadata_pairs --out lab/results/metadata_pairs.json

First table: three models, none of which saw an mcp-workbench request:

- **fold**: the fold model that never saw mcp-workbench (MetaTool's and BFCL's dev requests,
  ``tuned_models.py``);
- **fold + public MCP descriptions**: the same training plus the description pairs
  (:func:`toolsearch.backends.fine_tuning.description_queries`) of the public Docker and GitHub
  MCP catalogues (``../shared/datasets``; mcp-workbench's own tools are not used, so its
  catalogue stays unseen);
- **fold + own descriptions**: the fold model trained one more pass on mcp-workbench's own
  description pairs (its tools, no queries): what ``toolsearch train --full --metadata DIR``
  does for a catalogue without labelled queries.

Each is scored as the ``embedding`` member alone and inside the default hybrid (replayed over
cached member rankings, as ``ablation.py`` does) on mcp-workbench's dev and test splits, with
ranx's paired t-test against the fold model (p < 0.05).

Second table, the adoption test for the public descriptions on every dataset: each fold model
against the same fold trained with them (dev and test of the dataset left out), and the shipped
recipe without and with them at two seeds (test splits, in-domain). Third table: the shipped
recipe at the two seeds, nothing else changed, which shows how far retraining alone moves a
score. Every model here is trained by :data:`RECIPE`, the shipped recipe as it was when this
was measured: one pass (the shipped recipe has made two since, ``training_passes.py``); the
default hybrid is scored with that recipe's weights, :data:`MEASURED_WEIGHTS`. The
models are cached under ``$TOOLSEARCH_CACHE_DIR/fine_tuned``; training them all takes about an
hour and a half on two cores.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from lab import ablation, tuned_models
from lab.member_runs import DATASETS, MemberSpec, load_sample
from lab.tuned_models import (
    LIMIT,
    PUBLIC_MCP,
    SEEDS,
    base_path,
    cached_model,
    described,
    fold_model,
)
from toolsearch.backend import Hit
from toolsearch.backends.embedding import DEFAULT_FIELDS, DEFAULT_MAX_WORDS, default_cache_dir
from toolsearch.backends.encoders import model_fingerprint
from toolsearch.backends.fine_tuning import (
    Recipe,
    fine_tune,
    load_trainable,
    recipe_pairs,
    save_model,
)
from toolsearch.dataset import Dataset, Query

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "lab" / "results" / "metadata_pairs.json"
TARGET = "mcp-workbench"
FOLD = "fold"
PUBLIC_MODEL = "fold + public MCP descriptions"
OWN_MODEL = "fold + own descriptions"
GROUPS = ("all", "keywords", "request", "hard", "task")
#: The two trainings compared on every dataset.
WITHOUT, WITH = "without", "with public MCP descriptions"
METRICS = ("ndcg@10", "recall@5", "hit@1")
#: The recipe of every model here: the shipped one with one pass, as when this was measured.
RECIPE = replace(tuned_models.RECIPE, epochs=1)
#: The default's embedding and name weights when this was measured (the one-pass models'
#: choice; the two-pass models chose .7 and .1, ``ablation.py``).
MEASURED_WEIGHTS = (0.65, 0.2)


def _train(folder: Path, start: Path, labelled: list[tuple[Dataset, tuple[Query, ...]]]) -> Path:
    """``start`` trained by the recipe on ``labelled`` into ``folder`` (unless cached)."""
    if (folder / "toolsearch-training.json").is_file():
        return folder
    model = load_trainable(start, RECIPE)
    pairs = recipe_pairs(model, labelled, DEFAULT_FIELDS, DEFAULT_MAX_WORDS, RECIPE)
    info = fine_tune(model, pairs, RECIPE)
    record = {"start": start.name, "sets": [d.name for d, _ in labelled], **info}
    save_model(model, folder, record)  # writes the record as toolsearch-training.json
    ablation.log(f"metadata_pairs: {folder.name}: {info}")
    return folder


def _folder(label: str, parts: list[Any]) -> Path:
    key = json.dumps([RECIPE.describe(), model_fingerprint(base_path()), parts])
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    return Path(default_cache_dir()) / "fine_tuned" / f"{label}-{digest}"


def models() -> dict[str, Path]:
    """The three models (trained now unless cached)."""
    fold = fold_model(TARGET, LIMIT, RECIPE)
    own = described(TARGET)
    return {
        FOLD: fold,
        PUBLIC_MODEL: fold_model(TARGET, LIMIT, RECIPE, PUBLIC_MCP),
        OWN_MODEL: _train(_folder("own-descriptions", [fold.name, own[0].sha256()]), fold, [own]),
    }


def _members(dataset: str, split: str, model: Path, fold: bool) -> dict[str, MemberSpec]:
    found = ablation.members_for(dataset, split, LIMIT, fold=fold)
    used = {m: s for m, s in found.items() if m == "embedding" or m in ablation.LEXICAL_SHARES}
    options = {**used["embedding"].options, "model": str(model)}
    return used | {"embedding": replace(used["embedding"], options=options)}


def compared(
    dataset: str, split: str, trained: Mapping[str, Path], base: str, cache: Path, fold: bool
) -> dict[str, Any]:
    """Each of the ``trained`` models' scores on ``dataset``'s ``split``, as the embedding member
    alone and inside the default hybrid, with paired tests against ``base``."""
    sample = load_sample(dataset, split, LIMIT)
    variant = ablation.default_at(*MEASURED_WEIGHTS)
    runs: dict[str, dict[str, dict[str, list[Hit]]]] = {"embedding": {}, "default": {}}
    data = None
    for label, path in trained.items():
        data = ablation.sample_data(sample, _members(dataset, split, path, fold), LIMIT, cache)
        hits = data.hits["embedding"]
        runs["embedding"][label] = {q: [Hit(n, s) for n, s in h] for q, h in hits.items()}
        runs["default"][label] = ablation.rank(data, variant)
    assert data is not None
    return {
        ranking: {
            "scores": {m: ablation.scores(data, run) for m, run in by_model.items()},
            "paired_tests": ablation.significance(data, by_model, base),
        }
        for ranking, by_model in runs.items()
    }


def measure(cache: Path) -> dict[str, Any]:
    """Per split: each model's scores (embedding alone, default hybrid) and paired tests."""
    trained = models()
    out: dict[str, Any] = {}
    for split in ("dev", "test"):
        out[split] = compared(TARGET, split, trained, FOLD, cache, fold=True)
        ablation.log(f"{split}: {_summary(out[split])}")
    return out


def adoption(cache: Path) -> dict[str, Any]:
    """Without and with the public descriptions: each fold on the dataset it left out (dev,
    test), and the shipped recipe at each of :data:`SEEDS` on every test split."""
    out: dict[str, Any] = {}
    for dataset in DATASETS:
        folds = {
            WITHOUT: fold_model(dataset, LIMIT, RECIPE),
            WITH: fold_model(dataset, LIMIT, RECIPE, PUBLIC_MCP),
        }
        for split in ("dev", "test"):
            out[f"fold/{dataset}/{split}"] = compared(dataset, split, folds, WITHOUT, cache, True)
    for seed in SEEDS:
        recipe = replace(RECIPE, seed=seed)
        shipped = {
            WITHOUT: _shipped(recipe),
            WITH: cached_model(DATASETS, "all", LIMIT, recipe, PUBLIC_MCP),
        }
        for dataset in DATASETS:
            found = compared(dataset, "test", shipped, WITHOUT, cache, False)
            out[f"shipped, seed {seed}/{dataset}/test"] = found
    for key, got in out.items():
        ablation.log(f"{key}: {_summary(got)}")
    return out


def retraining(cache: Path) -> dict[str, Any]:
    """The shipped recipe trained at each of :data:`SEEDS`, nothing else changed, on every test
    split: how far a retrained model moves by chance, the yardstick for the rows above."""
    models = {f"seed {seed}": _shipped(replace(RECIPE, seed=seed)) for seed in SEEDS}
    base = f"seed {SEEDS[0]}"
    return {d: compared(d, "test", models, base, cache, False) for d in DATASETS}


def _shipped(recipe: Recipe) -> Path:
    """The shipped model's training (all three datasets) by ``recipe`` (cached)."""
    return cached_model(DATASETS, "all", LIMIT, recipe)


def _summary(result: Mapping[str, Any]) -> str:
    return "; ".join(
        f"{ranking} {model} {got['all']['ndcg@10']:.4f}"
        for ranking, found in result.items()
        for model, got in found["scores"].items()
    )


def markdown(data: Mapping[str, Any]) -> str:
    """Rows: split x ranking x model; columns: ndcg@10 over all queries, recall@5 per group."""
    lines = ablation.score_columns(("split", "ranking", "model"), GROUPS)
    for split, by_ranking in data["results"].items():
        for ranking, found in by_ranking.items():
            for model, got in found["scores"].items():
                test = found["paired_tests"].get(model, {})
                marks = {m: ablation.significance_mark(test, m) for m in ("ndcg@10", "recall@5")}
                cells = ablation.score_cells(got, GROUPS, marks)
                lines.append(f"| {split} | {ranking} | {model} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "`*`: differs from the fold model (ranx paired t-test, p < 0.05, ndcg@10 and recall@5 on "
        f"all labelled queries). {TARGET}, {data['queries']} queries a split; no model saw its "
        "requests.",
        "",
        *_adoption_lines(data.get("adoption", {})),
        "",
        *_retraining_lines(data.get("retraining", {})),
    ]
    return "\n".join(lines)


def _adoption_lines(adopted: Mapping[str, Any]) -> list[str]:
    """Every dataset: ``without → with`` the public descriptions, per model, split and ranking."""
    lines = [
        "The public MCP descriptions on every dataset: each fold model on the dataset it left "
        "out, and the shipped model's training at two seeds (test, in-domain); every model "
        "trained for one pass:",
        "",
        "| model | dataset | split | ranking | "
        + " | ".join(f"{m} without → with" for m in METRICS)
        + " |",
        "|---|---|---|---|" + "---:|" * len(METRICS),
    ]
    for key, by_ranking in adopted.items():
        model, dataset, split = key.split("/")
        for ranking, found in by_ranking.items():
            lead = f"| {model} | {dataset} | {split} | {ranking} | "
            lines.append(lead + " | ".join(_pair_cells(found, WITHOUT, WITH)) + " |")
    return [
        *lines,
        "",
        "`*`: ranx paired t-test, p < 0.05 (ndcg@10 and recall@5). Fold rows: no model saw the "
        "dataset's requests. Shipped rows: both models trained on the dev half of all three.",
    ]


def _retraining_lines(found: Mapping[str, Any]) -> list[str]:
    """The shipped recipe at two seeds, per dataset and ranking."""
    first, second = (f"seed {seed}" for seed in SEEDS)
    lines = [
        f"The shipped model's training (one pass) retrained with another seed ({first} was the "
        "shipped model before the recipe took two passes), test:",
        "",
        "| dataset | ranking | " + " | ".join(f"{m} {first} → {second}" for m in METRICS) + " |",
        "|---|---|" + "---:|" * len(METRICS),
    ]
    for dataset, by_ranking in found.items():
        for ranking, got in by_ranking.items():
            cells = _pair_cells(got, first, second)
            lines.append(f"| {dataset} | {ranking} | " + " | ".join(cells) + " |")
    return [*lines, "", "`*`: ranx paired t-test, p < 0.05 (ndcg@10 and recall@5)."]


def _pair_cells(found: Mapping[str, Any], before: str, after: str) -> list[str]:
    """``before → after`` per metric over all queries, ``*`` where the paired test says so."""
    got, test = found["scores"], found["paired_tests"].get(after, {})
    return [
        f"{got[before]['all'][m]:.3f} → {got[after]['all'][m]:.3f}"
        + ablation.significance_mark(test, m)
        for m in METRICS
    ]


def main(argv: list[str] | None = None) -> int:
    return ablation.replay_script(
        argv,
        __doc__,
        OUT,
        lambda cache: {
            "queries": LIMIT,
            "results": measure(cache),
            "adoption": adoption(cache),
            "retraining": retraining(cache),
        },
        markdown,
    )


if __name__ == "__main__":
    raise SystemExit(main())
