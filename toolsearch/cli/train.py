"""``toolsearch train``: fit a query adapter to a catalogue's labelled queries
(docs/query-adapter.md), or with ``--full`` fine-tune the whole embedding model on them and, with
``--metadata``, on pairs made from catalogues' tool descriptions (lab/retrieval.md)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

from toolsearch.cli._scope import positive_int
from toolsearch.errors import ConfigError

__all__ = ["register", "run"]

_DESCRIPTION = (
    "Train a query adapter for the embedding backend (and the embedding member of hybrid) from "
    "a dataset folder's labelled queries: a small learned map applied to query vectors only, "
    "so no tool is encoded again. It helps the catalogue it was trained on; it does not help "
    "another one. The embedding options of the config file (model, fields, max_words) are "
    "used, so the adapter fits the vectors that backend will search. Use it with "
    "query_adapter = FILE in [backends.embedding]: the embedding backend and the default "
    "hybrid's embedding member use it (the member then runs in float32, the vectors the "
    "adapter fits); measure it with "
    "'toolsearch bench --split test --backend embedding --option "
    "embedding.query_adapter=FILE'. With --full the whole embedding model is fine-tuned "
    "instead (minutes on a CPU): it helps catalogues it was not trained on too, and --out is "
    "the folder of the new model, used with model = DIR. --metadata adds pairs made from a "
    "catalogue's tool descriptions, so a catalogue with no labelled queries can train it too."
)


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "train",
        help="train a query adapter (or, with --full, the model) on labelled queries",
        description=_DESCRIPTION,
    )
    parser.add_argument(
        "dataset",
        nargs="*",
        metavar="DIR",
        help="dataset folder(s), or known dataset names; several train one adapter together",
    )
    parser.add_argument("--out", required=True, metavar="FILE", help="adapter file to write")
    parser.add_argument(
        "--split",
        choices=("dev", "all"),
        default="dev",
        help="which labelled queries train it: the dev half (default; keeps the test half for "
        "'toolsearch bench --split test') or all",
    )
    parser.add_argument(
        "--steps", type=positive_int, default=None, help="adapter optimiser steps (300)"
    )
    parser.add_argument("--seed", type=int, default=42, help="random seed (42)")
    parser.add_argument("--force", action="store_true", help="overwrite FILE if it exists")
    parser.add_argument(
        "--full",
        action="store_true",
        help="fine-tune the whole embedding model instead; --out is then a folder for it",
    )
    parser.add_argument(
        "--epochs",
        type=positive_int,
        default=None,
        help="passes over the queries with --full (default: the recipe's, Recipe.epochs)",
    )
    parser.add_argument(
        "--metadata",
        action="append",
        default=[],
        metavar="DIR",
        help="with --full, also train on the tool metadata of this catalogue (a folder, a tools "
        "file or a known name): each tool asked for by its description's first sentence; no "
        "labelled queries needed; repeatable",
    )
    parser.add_argument(
        "--no-hard-negatives",
        dest="hard_negatives",
        action="store_false",
        help="with --full, train on in-batch negatives only (default: each query also meets "
        "one mined hard negative)",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from toolsearch.backends.query_adapter import TrainingSettings, train_on_datasets
    from toolsearch.bench.runner import resolve_dataset, split_queries
    from toolsearch.config import load_settings
    from toolsearch.dataset import load_dataset
    from toolsearch.registry import load_backend

    out = Path(args.out)
    if out.exists() and not args.force:
        raise ConfigError(f"{out} exists; pass --force to overwrite it")
    if args.full and args.steps is not None:
        raise ConfigError("--steps sets adapter training; with --full, --epochs sets the passes")
    if not args.full and (args.epochs is not None or not args.hard_negatives):
        raise ConfigError(
            "--epochs and --no-hard-negatives apply to --full only; an adapter trains for --steps"
        )
    if args.full and out.exists() and not out.is_dir():
        raise ConfigError(f"{out} is a file; --full writes a model folder")
    if args.metadata and not args.full:
        raise ConfigError("--metadata applies to --full only; an adapter needs labelled queries")
    if not args.dataset and not args.metadata:
        raise ConfigError("name a dataset with labelled queries (or, with --full, --metadata DIR)")
    datasets = [load_dataset(resolve_dataset(spec)) for spec in args.dataset]
    options = dict(load_settings().options_for("embedding"))
    options.pop("query_adapter", None)  # an adapter is trained on the plain query vectors
    backend = load_backend("embedding", **options)
    labelled = [(d, split_queries(d.queries, args.split)) for d in datasets]
    if args.full:
        _quiet_model_libraries()
        metadata = _metadata_sets(args.metadata)
        return _fine_tune(args, out, backend, (labelled, metadata), str(options.get("model") or ""))
    settings = TrainingSettings(steps=args.steps or 300, seed=args.seed)
    adapter = train_on_datasets(backend, labelled, settings)
    adapter.save(out)
    info = adapter.info
    print(
        f"query adapter for {adapter.encoder}: {info['queries']} labelled queries of "
        f"{', '.join(repr(d.name) for d in datasets)} ({args.split}), {info['tools']} tools, loss "
        f"{info['loss_first']} -> {info['loss_last']}; written to {out}"
    )
    print(f'use it with query_adapter = "{out}" in [backends.embedding] of toolsearch.toml')
    print(
        f"measure it: toolsearch bench --dataset {args.dataset[0]} --split test "
        f"--backend embedding --option embedding.query_adapter={out}"
    )
    return 0


def _metadata_sets(folders: list[str]) -> list[Any]:
    """``--metadata``: each catalogue's tools asked for by their descriptions (no queries)."""
    from toolsearch.backends.fine_tuning import description_queries
    from toolsearch.bench.runner import resolve_dataset
    from toolsearch.catalog import load_catalog

    sets = []
    for folder in folders:
        path = Path(folder).expanduser()
        tools = load_catalog(path if path.is_file() else resolve_dataset(folder))
        found = description_queries(folder, tools)
        if not found.queries:
            raise ConfigError(
                f"--metadata {folder}: no tool has a description sentence of four words or more "
                "to train on"
            )
        sets.append((found, found.queries))
    return sets


def _quiet_model_libraries() -> None:
    """No progress bars from transformers or the Hugging Face hub (loading and saving weights):
    the command prints what it did when it is done."""
    import os

    os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"
    try:
        from transformers.utils import logging as transformers_logging
    except ImportError:
        return  # the fine-tuning import names the missing extra
    disable = cast("Callable[[], None]", transformers_logging.disable_progress_bar)
    disable()


def _trained_on(labelled: list[Any], metadata: list[Any], split: str) -> str:
    """What a model was trained on: labelled datasets with their split, description pairs as
    such (they have no split)."""
    parts = [f"{d.name!r} ({split} queries)" for d, _ in labelled]
    parts += [repr(d.name) for d, _ in metadata]  # named "<catalogue> (descriptions)"
    return ", ".join(parts)


def _loss_line(info: dict[str, Any]) -> str:
    """The loss as trained, and whether it can say anything: with fewer steps than two loss
    windows it cannot."""
    from toolsearch.backends.fine_tuning import LOSS_WINDOW

    line = f"loss {info['first_loss']} -> {info['last_loss']} over {info['steps']} steps"
    if info["steps"] < 2 * LOSS_WINDOW:
        line += (
            f" (too few steps for the loss to show progress: fewer than {2 * LOSS_WINDOW}; "
            "more labelled queries or --epochs give more, and bench shows what it changed)"
        )
    return line


def _fine_tune(
    args: argparse.Namespace,
    out: Path,
    backend: Any,
    sets: tuple[list[Any], list[Any]],
    model_ref: str,
) -> int:
    """``--full``: fine-tune the backend's model on the labelled queries and the description
    pairs (``sets``) and save it to ``out``."""
    from toolsearch.backends.encoders import DEFAULT_MODEL, resolve_model_path
    from toolsearch.backends.fine_tuning import (
        Recipe,
        fine_tune,
        load_trainable,
        recipe_pairs,
        save_model,
    )

    model_ref = model_ref or DEFAULT_MODEL
    path = resolve_model_path(model_ref)
    if path is None:
        raise ConfigError(
            f"embedding model {model_ref!r} is not a local folder; fine-tuning needs its files "
            "on disk (toolsearch never downloads models)"
        )
    recipe = Recipe(seed=args.seed, hard_negatives=args.hard_negatives)
    if args.epochs is not None:
        recipe = replace(recipe, epochs=args.epochs)
    labelled, metadata = sets
    model = load_trainable(path, recipe)
    pairs = recipe_pairs(model, labelled + metadata, backend.fields, backend.max_words, recipe)
    info = fine_tune(model, pairs, recipe)
    record = {"base_model": model_ref, "datasets": [d.name for d, _ in labelled + metadata]}
    save_model(model, out, record | {"split": args.split, **info})
    print(
        f"fine-tuned {model_ref} on {info['pairs']} request/tool pairs of "
        f"{_trained_on(labelled, metadata, args.split)} in {info['seconds']} s; written to {out}"
    )
    print(_loss_line(info))
    print(f'use it with model = "{out}" in [backends.embedding] of toolsearch.toml')
    labelled_set = args.dataset[0] if args.dataset else "DIR (a dataset with labelled queries)"
    print(
        f"measure it: toolsearch bench --dataset {labelled_set} --split test "
        f"--backend embedding --option embedding.model={out}"
    )
    return 0
