"""The three-dataset models: the previously shipped default's recipe and its LODO folds.

    python -m lab.tuned_models        # makes (or finds) the three-dataset model; prints its folder

The three-dataset model is the bundled all-MiniLM-L6-v2 (:data:`BASE_MODEL`) trained with
:class:`toolsearch.backends.fine_tuning.Recipe` on the **dev** samples of the three datasets of
:data:`member_runs.DATASETS` (at most :data:`LIMIT` queries each, the samples every quality
benchmark uses). It was the shipped model until the broad model (``lab/broad_model.py``, which
installs the shipped one) replaced it; the experiments that built on it still measure it.
Any model here can also be trained with the description pairs of catalogues without labelled
requests (``catalogues``; :data:`PUBLIC_MCP`, measured by ``metadata_pairs.py``).
A fold model is the same training without one dataset: the leave-one-dataset-out table of
``fine_tune.py`` and the "previous unseen" columns of ``broad_lodo.py`` use them. They are
cached under ``$TOOLSEARCH_CACHE_DIR/fine_tuned``, keyed by the recipe, the base model and the
training samples, as is the model trained on all three datasets. Needs the ``embedding``
extra (PyTorch) and the public datasets (``../shared/datasets``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lab.member_runs import DATASETS, load_sample
from toolsearch.backends.embedding import DEFAULT_FIELDS, DEFAULT_MAX_WORDS, default_cache_dir
from toolsearch.backends.encoders import (
    BASE_MODEL,
    model_fingerprint,
    resolve_model_path,
)
from toolsearch.backends.fine_tuning import (
    Recipe,
    description_queries,
    fine_tune,
    load_trainable,
    recipe_pairs,
    save_model,
)
from toolsearch.bench.runner import resolve_dataset
from toolsearch.catalog import load_catalog
from toolsearch.dataset import Dataset, Query

#: The training recipe: the library's defaults, fixed before measuring.
RECIPE = Recipe()
#: Dev queries per dataset, as in every quality benchmark.
LIMIT = 1000
#: Training seeds where a result is read across trainings: the first is the recipe's (the
#: shipped model's); retraining at the second shows how far a seed alone moves a score.
SEEDS = (RECIPE.seed, RECIPE.seed + 1)
#: Public MCP catalogues whose description pairs (no benchmark's requests in them) may be added
#: to a model's training (lab/retrieval.md, "Pairs from tool metadata").
PUBLIC_MCP: tuple[str, ...] = ("mcp-docker-catalog", "mcp-github-catalog")
#: Texts on which the stored (float16) model is compared with the trained (float32) one.
PROBES = (
    "create a github pull request",
    "send an email to my manager about tomorrow's meeting",
    "what will the weather be in Paris on Friday",
    "list the open issues of a repository and label the stale ones",
)


def base_path() -> Path:
    path = resolve_model_path(BASE_MODEL)
    assert path is not None  # the shipped base model always resolves (or raises)
    return Path(path)


def described(name: str) -> tuple[Dataset, tuple[Query, ...]]:
    """The description pairs of the public catalogue ``name``, as a labelled set."""
    made = description_queries(name, load_catalog(resolve_dataset(name)))
    return made, tuple(made.queries)


def _key(
    datasets: Sequence[str], limit: int, recipe: Recipe, catalogues: Sequence[str] = ()
) -> str:
    samples = [load_sample(d, "dev", limit).key(limit) for d in datasets]
    parts = [recipe.describe(), model_fingerprint(base_path()), list(datasets), samples]
    if catalogues:
        parts.append([described(name)[0].sha256() for name in catalogues])
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:16]


def train(
    datasets: Sequence[str],
    out: Path,
    limit: int = LIMIT,
    recipe: Recipe = RECIPE,
    catalogues: Sequence[str] = (),
) -> dict[str, Any]:
    """Train the base model on the dev samples of ``datasets`` and the description pairs of
    ``catalogues``, and save it to ``out``."""
    samples = [load_sample(d, "dev", limit) for d in datasets]
    model = load_trainable(base_path(), recipe)
    labelled = [(s.dataset, s.queries) for s in samples] + [described(c) for c in catalogues]
    pairs = recipe_pairs(model, labelled, DEFAULT_FIELDS, DEFAULT_MAX_WORDS, recipe)
    info = fine_tune(model, pairs, recipe)
    record = {
        "base_model": BASE_MODEL,
        "datasets": list(datasets),
        "split": "dev",
        "limit": limit,
        "samples": {s.dataset.name: s.key(limit) for s in samples},
        **({"described": list(catalogues)} if catalogues else {}),
        **info,
    }
    if out.exists():
        shutil.rmtree(out)
    save_model(model, out, record)
    record["stored_cosine_min"] = stored_fidelity(model, out)
    (out / "toolsearch-training.json").write_text(json.dumps(record, indent=2) + "\n")
    print(f"tuned_models: {out.name}: {info}", file=sys.stderr, flush=True)
    return record


def stored_fidelity(trained: Any, folder: Path) -> float:
    """The lowest cosine between the trained model's probe vectors and the stored model's."""
    stored = load_trainable(folder, RECIPE)
    encode = {"normalize_embeddings": True, "convert_to_numpy": True}
    before, after = trained.encode(list(PROBES), **encode), stored.encode(list(PROBES), **encode)
    return round(float((before * after).sum(axis=1).min()), 6)


def fold_model(
    left_out: str,
    limit: int = LIMIT,
    recipe: Recipe = RECIPE,
    catalogues: Sequence[str] = (),
) -> Path:
    """The model trained by ``recipe`` without ``left_out``'s requests (and with
    ``catalogues``' description pairs), trained now unless cached."""
    others = [d for d in DATASETS if d != left_out]
    return cached_model(others, f"without-{left_out}", limit, recipe, catalogues)


def cached_model(
    datasets: Sequence[str],
    label: str,
    limit: int = LIMIT,
    recipe: Recipe = RECIPE,
    catalogues: Sequence[str] = (),
) -> Path:
    """The model :func:`train` makes from ``datasets`` and ``catalogues``, from the cache under
    ``label`` and a key of its training data (trained now if missing)."""
    key = _key(datasets, limit, recipe, catalogues)
    folder = Path(default_cache_dir()) / "fine_tuned" / f"{label}-{key}"
    if not (folder / "toolsearch-training.json").is_file():
        train(datasets, folder, limit, recipe, catalogues)
    return folder


def shipped_recipe_model() -> Path:
    """The model the recipe trains on all three datasets, shipped until the broad model (from
    the cache, else trained now)."""
    return cached_model(DATASETS, "all")


def main(argv: list[str] | None = None) -> int:
    """Make the three-dataset model (or find it in the cache, where ``metadata_pairs.py`` also
    looks for it) and print its folder.

    It takes no options; ``--help`` says what it does instead of starting to train."""
    argparse.ArgumentParser(description=(main.__doc__ or "").split("\n\n")[0]).parse_args(argv)
    print(shipped_recipe_model())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
