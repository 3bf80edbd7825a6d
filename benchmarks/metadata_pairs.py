"""Pairs from tool metadata: does training on MCP tool descriptions help the model on an MCP
catalogue it never saw?

    python benchmarks/metadata_pairs.py --out benchmarks/results/metadata_pairs.json

Three models, none of which saw an mcp-workbench request:

- **fold**: the fold model that never saw mcp-workbench (MetaTool's and BFCL's dev requests,
  ``tuned_models.py``), the model the ablation chooses mcp-workbench's settings with;
- **fold + public MCP descriptions**: the same training plus the description pairs
  (:func:`toolsearch.backends.fine_tuning.description_queries`) of the public Docker and GitHub
  MCP catalogues (``../shared/datasets``; mcp-workbench's own tools are not used, so its
  catalogue stays unseen);
- **fold + own descriptions**: the fold model trained one more pass on mcp-workbench's own
  description pairs (its tools, no queries): what ``toolsearch train --full --metadata DIR``
  does for a catalogue without labelled queries.

Each is scored as the ``embedding`` member alone and inside the default hybrid (replayed over
cached member rankings, as ``ablation.py`` does) on mcp-workbench's dev and test splits, with
ranx's paired t-test against the fold model (p < 0.05). The models are cached under
``$TOOLSEARCH_CACHE_DIR/fine_tuned``; training takes about 25 minutes on two cores.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import ablation
from member_runs import MemberSpec, load_sample
from tuned_models import LIMIT, RECIPE, base_path, fold_model

from toolsearch.backend import Hit
from toolsearch.backends.embedding import DEFAULT_FIELDS, DEFAULT_MAX_WORDS, default_cache_dir
from toolsearch.backends.encoders import model_fingerprint
from toolsearch.backends.fine_tuning import (
    description_queries,
    fine_tune,
    load_trainable,
    recipe_pairs,
    save_model,
)
from toolsearch.bench.runner import resolve_dataset
from toolsearch.catalog import load_catalog
from toolsearch.dataset import Dataset, Query

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "metadata_pairs.json"
TARGET = "mcp-workbench"
#: Labelled training sets of the fold model (everything but the target).
FOLD_SETS = ("metatool", "bfcl")
#: Public MCP catalogues whose descriptions are added.
PUBLIC = ("mcp-docker-catalog", "mcp-github-catalog")
FOLD = "fold"
PUBLIC_MODEL = "fold + public MCP descriptions"
OWN_MODEL = "fold + own descriptions"
GROUPS = ("all", "keywords", "request", "hard", "task")


def _described(name: str) -> tuple[Dataset, tuple[Query, ...]]:
    made = description_queries(name, load_catalog(resolve_dataset(name)))
    return made, tuple(made.queries)


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
    return default_cache_dir() / "fine_tuned" / f"{label}-{digest}"


def models() -> dict[str, Path]:
    """The three models (trained now unless cached)."""
    fold = fold_model(TARGET, LIMIT)
    samples = [load_sample(d, "dev", LIMIT) for d in FOLD_SETS]
    labelled = [(s.dataset, s.queries) for s in samples]
    public = [_described(name) for name in PUBLIC]
    public_parts = [s.key(LIMIT) for s in samples] + [d.sha256() for d, _ in public]
    own = _described(TARGET)
    return {
        FOLD: fold,
        PUBLIC_MODEL: _train(
            _folder("public-descriptions", public_parts), base_path(), [*labelled, *public]
        ),
        OWN_MODEL: _train(_folder("own-descriptions", [fold.name, own[0].sha256()]), fold, [own]),
    }


def _members(split: str, model: Path) -> dict[str, MemberSpec]:
    found = ablation.members_for(TARGET, split, LIMIT, fold=True)
    used = {m: s for m, s in found.items() if m == "embedding" or m in ablation.LEXICAL_SHARES}
    options = {**used["embedding"].options, "model": str(model)}
    return used | {"embedding": replace(used["embedding"], options=options)}


def measure(cache: Path) -> dict[str, Any]:
    """Per split: each model's scores (embedding alone, default hybrid) and paired tests."""
    trained = models()
    variant = ablation.shipped_variant()
    out: dict[str, Any] = {}
    for split in ("dev", "test"):
        sample = load_sample(TARGET, split, LIMIT)
        runs: dict[str, dict[str, dict[str, list[Hit]]]] = {"embedding": {}, "default": {}}
        data = None
        for label, path in trained.items():
            data = ablation.sample_data(sample, _members(split, path), LIMIT, cache)
            hits = data.hits["embedding"]
            runs["embedding"][label] = {q: [Hit(n, s) for n, s in h] for q, h in hits.items()}
            runs["default"][label] = ablation.rank(data, variant)
        assert data is not None
        out[split] = {
            ranking: {
                "scores": {m: ablation.scores(data, run) for m, run in by_model.items()},
                "against_fold": ablation.significance(data, by_model, FOLD),
            }
            for ranking, by_model in runs.items()
        }
        ablation.log(f"{split}: {_summary(out[split])}")
    return out


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
                test = found["against_fold"].get(model, {})
                marks = {m: ablation.significance_mark(test, m) for m in ("ndcg@10", "recall@5")}
                cells = ablation.score_cells(got, GROUPS, marks)
                lines.append(f"| {split} | {ranking} | {model} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "`*`: differs from the fold model (ranx paired t-test, p < 0.05, ndcg@10 and recall@5 on "
        f"all labelled queries). {TARGET}, {data['queries']} queries a split; no model saw its "
        "requests.",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    return ablation.replay_script(
        argv,
        __doc__,
        OUT,
        lambda cache: {"queries": LIMIT, "results": measure(cache)},
        markdown,
    )


if __name__ == "__main__":
    raise SystemExit(main())
