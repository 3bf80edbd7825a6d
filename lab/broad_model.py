"""The shipped model: all-MiniLM-L6-v2 trained on every labelled public tool-retrieval set.

    python -m lab.broad_model        # rebuilds toolsearch/models/toolsearch-minilm-l6

The bundled all-MiniLM-L6-v2 (:data:`BASE_MODEL`) is trained with :data:`RECIPE` on the **dev**
requests of the eleven datasets of :data:`SOURCES`: the bundled mcp-workbench and the public
sets of ``../shared/datasets`` (MIT, Apache-2.0 and CC BY-SA 4.0; the model card written into
its folder lists them). No source dominates: :func:`training_queries` keeps at most
:data:`PER_TOOL` requests per gold tool set and :data:`PER_SOURCE` request/tool pairs per
source, so SGD's 35,000 requests over 88 intents count no more than BFCL's 1,287 functions.
Each pair meets one mined hard negative, taken from the gold tool's own server or API where one
qualifies (siblings: the verbs a request must be told apart by). Test splits are never read.

The shipped model is :func:`combined_candidate`: the three-dataset model's own training
requests whole — the 1,000-request dev samples of mcp-workbench, MetaTool and BFCL — plus the
eight other sources at the cap (about 80 minutes on two cores). Two alternatives are measured
beside it: :func:`broad_candidate` caps every source alike, and :func:`soup_candidate` averages
the combined model's weights with the three-dataset model's (a uniform model soup,
:func:`average`). Why the combined model ships: lab/retrieval.md, "Training on broad public
data". Leave-one-out evidence trains the same way without one group of :data:`FOLDS`
(:func:`candidate_fold_model`, which also stands in for the shipped model on the dev split of
a dataset it trained on), or on a smaller budget (:func:`fold_model`: :data:`FOLD_PER_SOURCE`,
one pass). Models are cached under ``$TOOLSEARCH_CACHE_DIR/fine_tuned`` by a key of the recipe,
base model and training requests. Needs the ``embedding`` extra (PyTorch) and the public
datasets.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import sys
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import fasteners

from lab import tuned_models
from lab.member_runs import DATASETS, load_sample
from lab.tuned_models import LIMIT, base_path, stored_fidelity
from toolsearch.backends.embedding import DEFAULT_FIELDS, DEFAULT_MAX_WORDS, default_cache_dir
from toolsearch.backends.encoders import BASE_MODEL, SHIPPED_MODEL_PATH, model_fingerprint
from toolsearch.backends.fine_tuning import (
    Recipe,
    fine_tune,
    load_trainable,
    recipe_pairs,
    save_model,
)
from toolsearch.dataset import Dataset, Query

#: Every labelled source, with its licence (recorded in the model card).
SOURCES: dict[str, str] = {
    "mcp-workbench": "project's own (bundled)",
    "metatool": "MIT",
    "bfcl": "Apache-2.0",
    "sgd": "CC BY-SA 4.0",
    "seal-tools": "Apache-2.0",
    "apibench": "Apache-2.0",
    "gorilla-apizoo": "Apache-2.0",
    "nestful": "Apache-2.0",
    "restbench": "MIT",
    "toolalpaca-eval": "Apache-2.0",
    "api-bank": "Apache-2.0",
}
#: Groups of similar sources; leave-one-out folds leave one group out at a time.
FOLDS: dict[str, tuple[str, ...]] = {
    "mcp": ("mcp-workbench",),
    "plugins-and-models": ("metatool", "apibench"),
    "generated-functions": ("bfcl", "seal-tools", "nestful"),
    "assistant-dialogues": ("sgd", "api-bank"),
    "rest-endpoints": ("gorilla-apizoo", "restbench", "toolalpaca-eval"),
}
#: Query styles left out of training: SGD follow-ups need the dialogue before them.
UNTRAINED_STYLES = frozenset({"followup"})
#: Requests kept per gold tool set, and request/tool pairs per source.
PER_TOOL = 6
PER_SOURCE = 700
FOLD_PER_SOURCE = 150
#: The recipe: the library's, with sibling-first hard negatives.
RECIPE = Recipe(sibling_negatives=True)
FOLD_RECIPE = replace(RECIPE, epochs=1)


def training_queries(name: str, per_tool: int, per_source: int) -> tuple[Dataset, list[Query]]:
    """Dataset ``name`` and the dev requests trained on: in hash order (the benchmarks'
    sample order), a request is kept while one of its gold tools has fewer than ``per_tool``
    kept requests, until ``per_source`` pairs are kept."""
    sample = load_sample(name, "dev", None)
    dataset, seen, pairs = sample.dataset, dict[str, int](), 0
    kept: list[Query] = []
    for query in sorted(sample.queries, key=lambda q: hashlib.sha256(q.id.encode()).digest()):
        gold = [n for n, grade in dataset.qrels.get(query.id, {}).items() if grade > 0]
        if not gold or query.style in UNTRAINED_STYLES:
            continue
        if min(seen.get(n, 0) for n in gold) >= per_tool:
            continue
        for tool in gold:
            seen[tool] = seen.get(tool, 0) + 1
        kept.append(query)
        pairs += len(gold)
        if pairs >= per_source:
            break
    return dataset, kept


def source_queries(name: str, per_source: int, full: Sequence[str]) -> tuple[Dataset, list[Query]]:
    """The dev requests trained on from ``name``: the shipped model's whole dev sample
    (:data:`tuned_models.LIMIT` requests) for a source in ``full``, else
    :func:`training_queries`' capped sample."""
    if name in full:
        sample = load_sample(name, "dev", LIMIT)
        return sample.dataset, list(sample.queries)
    return training_queries(name, PER_TOOL, per_source)


def train(
    sources: Sequence[str], out: Path, per_source: int, recipe: Recipe, full: Sequence[str] = ()
) -> dict[str, Any]:
    """Train the base model on the sampled dev requests of ``sources``; save it to ``out``."""
    labelled = [source_queries(name, per_source, full) for name in sources]
    model = load_trainable(base_path(), recipe)
    miner = _RememberingEncoder(model)  # every model mines with the base model's vectors
    pairs = recipe_pairs(miner, labelled, DEFAULT_FIELDS, DEFAULT_MAX_WORDS, recipe)
    miner.save()
    info = fine_tune(model, pairs, recipe)
    record = {
        "base_model": BASE_MODEL,
        "datasets": list(sources),
        "split": "dev",
        "per_tool": PER_TOOL,
        "per_source": per_source,
        "full_samples": [name for name in sources if name in full],
        "requests": {d.name: len(q) for d, q in labelled},
        "licences": {name: SOURCES[name] for name in sources},
        **info,
    }
    if out.exists():
        shutil.rmtree(out)
    save_model(model, out, record)
    record["stored_cosine_min"] = stored_fidelity(model, out)
    (out / "toolsearch-training.json").write_text(json.dumps(record, indent=2) + "\n")
    print(f"broad_model: {out.name}: {info}", file=sys.stderr, flush=True)
    return record


class _RememberingEncoder:
    """The base model's ``encode`` for mining, remembering each text's vector on disk (under
    the cache, by the base model's fingerprint): every fold mines with the same model over
    mostly the same catalogues, and encoding 12,000 tool texts takes minutes on two cores."""

    def __init__(self, model: Any) -> None:
        import numpy as np

        self.model = model
        name = f"mining-{model_fingerprint(base_path())[:16]}.npz"
        self.file = Path(default_cache_dir()) / "fine_tuned" / name
        self.known: dict[str, Any] = {}
        if self.file.is_file():
            with np.load(self.file, allow_pickle=False) as stored:
                self.known = dict(zip(stored["texts"].tolist(), stored["vectors"], strict=True))
        self.added = False

    def encode(self, texts: list[str], **options: Any) -> Any:
        import numpy as np

        missing = [t for t in dict.fromkeys(texts) if t not in self.known]
        if missing:
            self.known.update(zip(missing, self.model.encode(missing, **options), strict=True))
            self.added = True
        return np.stack([self.known[t] for t in texts])

    def save(self) -> None:
        import numpy as np

        if self.added:
            self.file.parent.mkdir(parents=True, exist_ok=True)
            texts = list(self.known)
            vectors = np.stack([self.known[t] for t in texts])
            temporary = self.file.with_suffix(".tmp.npz")
            np.savez(temporary, texts=np.array(texts), vectors=vectors)
            temporary.replace(self.file)


def cached_model(
    sources: Sequence[str], label: str, per_source: int, recipe: Recipe, full: Sequence[str] = ()
) -> Path:
    """The model :func:`train` makes from ``sources``, from the cache (trained now if missing)."""
    requests = [[q.id for q in source_queries(s, per_source, full)[1]] for s in sources]
    parts = [recipe.describe(), model_fingerprint(base_path()), list(sources), requests]
    return _made_once(label, parts, lambda folder: train(sources, folder, per_source, recipe, full))


def _made_once(label: str, parts: Any, make: Callable[[Path], Any]) -> Path:
    """The cached model folder keyed by ``label`` and a hash of ``parts``, made by ``make``
    if missing: one process makes it, another asking meanwhile waits and reads it."""
    key = hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:16]
    folder = Path(default_cache_dir()) / "fine_tuned" / f"{label}-{key}"
    folder.parent.mkdir(parents=True, exist_ok=True)
    with fasteners.InterProcessLock(str(folder) + ".lock"):
        if not (folder / "toolsearch-training.json").is_file():
            make(folder)
    return folder


def broad_candidate() -> Path:
    """The model trained on every source at one budget for all (:data:`PER_SOURCE`)."""
    return cached_model(tuple(SOURCES), "broad", PER_SOURCE, RECIPE)


def combined_candidate() -> Path:
    """The shipped model: the three-dataset model's training requests unchanged (the whole
    dev samples of :data:`member_runs.DATASETS`) plus the other eight sources at
    :data:`PER_SOURCE`."""
    return cached_model(tuple(SOURCES), "combined", PER_SOURCE, RECIPE, full=DATASETS)


def soup_candidate() -> Path:
    """The uniform average of the three-dataset model
    (``tuned_models``' recipe on the shipped samples) and :func:`combined_candidate`."""
    return averaged_model((tuned_models.shipped_recipe_model(), combined_candidate()), "soup")


def fold_soup(fold: str) -> Path:
    """The soup made the same way without fold ``fold``'s sources: :func:`narrow_fold_model`
    averaged with :func:`fold_model`."""
    return averaged_model((narrow_fold_model(fold), fold_model(fold)), f"soup-without-{fold}")


def candidate_fold_soup(fold: str) -> Path:
    """The soup candidate's recipe without fold ``fold``'s sources at the candidate's budget:
    :func:`narrow_fold_model` averaged with :func:`candidate_fold_model`. Against
    :func:`fold_soup` it tells whether a fold's loss comes from the small fold budget."""
    parts = (narrow_fold_model(fold), candidate_fold_model(fold))
    return averaged_model(parts, f"combined-soup-without-{fold}")


def narrow_fold_model(fold: str) -> Path:
    """The three-dataset model trained without the fold's bundled dataset (each fold holds at
    most one; the shipped recipe's model where it holds none)."""
    bundled = [name for name in DATASETS if name in FOLDS[fold]]
    return tuned_models.fold_model(bundled[0]) if bundled else tuned_models.shipped_recipe_model()


def averaged_model(parts: Sequence[Path], label: str) -> Path:
    """The uniform weight average of the models at ``parts`` (all fine-tuned from
    :data:`BASE_MODEL`), from the cache (made now if missing)."""
    return _made_once(
        label, [model_fingerprint(p) for p in parts], lambda folder: average(parts, folder)
    )


def average(parts: Sequence[Path], out: Path) -> dict[str, Any]:
    """Save the uniform average of the weights of the models at ``parts`` to ``out`` (a model
    soup, Wortsman et al. 2022: models fine-tuned from one base average into one that keeps
    much of each one's gains). Weights are averaged in float32; integer buffers are kept."""
    import torch

    models = [load_trainable(path, RECIPE) for path in parts]
    states = [model.state_dict() for model in models]
    merged = {
        name: torch.stack([s[name].float() for s in states]).mean(0).to(tensor.dtype)
        if tensor.is_floating_point()
        else tensor
        for name, tensor in states[0].items()
    }
    models[0].load_state_dict(merged)
    ingredients = [
        json.loads((path / "toolsearch-training.json").read_text(encoding="utf-8"))
        for path in parts
    ]
    record = {
        "base_model": BASE_MODEL,
        "soup": [
            {"folder": path.name, **got} for path, got in zip(parts, ingredients, strict=True)
        ],
    }
    if out.exists():
        shutil.rmtree(out)
    save_model(models[0], out, record)
    record["stored_cosine_min"] = stored_fidelity(models[0], out)
    (out / "toolsearch-training.json").write_text(json.dumps(record, indent=2) + "\n")
    return record


def fold_model(fold: str) -> Path:
    """The model trained without fold ``fold``'s sources, at the fold budget."""
    kept = tuple(s for s in SOURCES if s not in FOLDS[fold])
    return cached_model(kept, f"broad-without-{fold}", FOLD_PER_SOURCE, FOLD_RECIPE)


def candidate_fold_model(fold: str) -> Path:
    """:func:`combined_candidate`'s recipe and budget without fold ``fold``'s sources."""
    kept = tuple(s for s in SOURCES if s not in FOLDS[fold])
    return cached_model(kept, f"combined-without-{fold}", PER_SOURCE, RECIPE, full=DATASETS)


def fold_of(name: str) -> str:
    """The fold that leaves dataset ``name`` out."""
    for fold, names in FOLDS.items():
        if name in names:
            return fold
    raise ValueError(f"dataset {name!r} is in no fold; known: {', '.join(SOURCES)}")


def main(argv: list[str] | None = None) -> int:
    """Install the shipped model (:func:`combined_candidate`, from the cache or trained now,
    about 80 minutes on two cores) into the package with its model card, and print its
    training record.

    It takes no options; ``--help`` says what it does instead of starting to train."""
    argparse.ArgumentParser(description=(main.__doc__ or "").split("\n\n")[0]).parse_args(argv)
    install(combined_candidate(), SHIPPED_MODEL_PATH)
    print((SHIPPED_MODEL_PATH / "toolsearch-training.json").read_text(encoding="utf-8"))
    return 0


def install(made: Path, target: Path) -> None:
    """Copy the model at ``made`` to ``target`` (replacing what is there), with its card."""
    record = json.loads((made / "toolsearch-training.json").read_text(encoding="utf-8"))
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(made, target, ignore=shutil.ignore_patterns("README.md"))
    (target / "README.md").write_text(card(record), encoding="utf-8")


def card(record: dict[str, Any]) -> str:
    """The model card: what the model is, what it was trained on and under which licences.
    A soup's card describes both of its trainings; the broad one lists the datasets."""
    if "soup" not in record:
        what = (
            "fine-tuned for tool retrieval on broad public data: the default model of "
            "toolsearch's `embedding` backend"
        )
        return _card_text(what, _training(record), record)
    narrow, broad = record["soup"]
    what = (
        "for tool retrieval: the uniform average of the weights (a model soup) of two models "
        "fine-tuned from it on **dev** requests only"
    )
    training = (
        f"The first ({narrow['folder']}) is `lab.tuned_models`' recipe on the dev samples of "
        f"{', '.join(narrow['datasets'])} ({narrow['pairs']} request/tool pairs, "
        f"{narrow['recipe']['epochs']} passes, seed {narrow['recipe']['seed']}). The second "
        f"({broad['folder']}): {_training(broad)}"
    )
    return _card_text(what, training, broad)


def _training(record: dict[str, Any]) -> str:
    whole = record.get("full_samples") or []
    kept = (
        f", except {', '.join(whole)}, whose whole dev samples (the three-dataset model's "
        "training requests) are kept"
        if whole
        else ""
    )
    return (
        f"trained on {record['pairs']} request/tool pairs from the **dev** requests of "
        f"{len(record['requests'])} public tool-retrieval datasets (at most "
        f"{record['per_tool']} requests per gold tool and {record['per_source']} pairs per "
        f"dataset{kept}), {record['recipe']['epochs']} passes, seed "
        f"{record['recipe']['seed']}; in-batch negatives plus one mined hard negative per pair, "
        "taken from the gold tool's own server or API where one qualifies."
    )


def _card_text(what: str, training: str, broad: dict[str, Any]) -> str:
    rows = "\n".join(
        f"| {name} | {count} | {broad['licences'][name]} |"
        for name, count in broad["requests"].items()
    )
    return (
        "# toolsearch-minilm-l6\n\n"
        f"all-MiniLM-L6-v2 {what}. Weights stored in float16, loaded as float32.\n\n"
        f"{training[0].upper()}{training[1:]}\n\n"
        "| dataset | requests | licence |\n|---|---|---|\n"
        f"{rows}\n\n"
        "The datasets are those of `../shared/datasets` (sources and conversion notes in its "
        "README). SGD is CC BY-SA 4.0: weights trained on it are shared under the same terms.\n"
        "Rebuild: `python -m lab.broad_model` (the shipped model; the soup with "
        "`lab.broad_model.soup_candidate()`); how it was chosen and measured: lab/retrieval.md, "
        '"Training on broad public data", and docs/results.md (tables `broad_lodo`, '
        "`siblings` and `fold_budget`).\n\n"
        "Licence: Apache-2.0 (all-MiniLM-L6-v2), with the CC BY-SA 4.0 terms of SGD.\n"
    )


if __name__ == "__main__":
    raise SystemExit(main())
