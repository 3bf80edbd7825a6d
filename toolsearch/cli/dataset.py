"""``toolsearch dataset``: check a dataset folder and move datasets to and from BEIR."""

from __future__ import annotations

import argparse
from collections import Counter
from typing import Any

__all__ = ["dataset_summary", "register"]


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "dataset",
        help="validate a dataset folder; import from or export to BEIR",
        description="Datasets are folders of tools.jsonl, queries.jsonl and qrels.tsv. "
        "'validate' loads one and checks every reference; 'import-beir' and 'export-beir' "
        "convert between that layout and BEIR's (corpus.jsonl, queries.jsonl, qrels/<split>.tsv).",
    )
    commands = parser.add_subparsers(dest="dataset_command", metavar="ACTION", required=True)

    validate = commands.add_parser("validate", help="load a dataset and summarise it")
    validate.add_argument(
        "dir", metavar="DIR", help="dataset folder, or an installed dataset's name (a path wins)"
    )
    validate.add_argument("--json", action="store_true", help="print one JSON object")
    validate.set_defaults(func=run_validate)

    _add_beir_command(
        commands,
        "import-beir",
        "convert a BEIR folder into a dataset folder",
        run_import,
        src="BEIR folder",
        dst="dataset folder to write",
        split="qrels split to import",
    )
    _add_beir_command(
        commands,
        "export-beir",
        "write a dataset folder in BEIR's layout",
        run_export,
        src="dataset folder",
        dst="BEIR folder to write",
        split="qrels split to write",
    )


def _add_beir_command(
    commands: Any, name: str, summary: str, func: Any, *, src: str, dst: str, split: str
) -> None:
    """``import-beir`` / ``export-beir``: the same arguments, read the other way round."""
    command = commands.add_parser(name, help=summary)
    command.add_argument("src", metavar="SRC", help=src)
    command.add_argument("dst", metavar="DST", help=dst)
    command.add_argument("--split", default="test", help=f"{split} (default: test)")
    command.add_argument("--force", action="store_true", help="overwrite existing files in DST")
    command.set_defaults(func=func)


def dataset_summary(dataset: Any) -> dict[str, Any]:
    """Counts that show whether a dataset is what it should be (a multi-tool query needs more
    than one group of tools; see ``docs/benchmark.md``)."""
    from toolsearch.splits import split_of

    groups = dataset.query_groups
    relevant = {tool for gold in dataset.qrels.values() for tool in gold}
    styles = Counter(q.style for q in dataset.queries if q.style)
    halves = Counter(split_of(q.id) for q in dataset.queries)
    return {
        "name": dataset.name,
        "path": str(dataset.path) if dataset.path is not None else None,
        "sha256": dataset.sha256(),
        "tools": len(dataset.tools),
        "servers": len({t.server for t in dataset.tools if t.server}),
        "queries": len(dataset.queries),
        "positive_queries": len(dataset.positives),
        "negative_queries": len(dataset.negatives),
        "multi_tool_queries": sum(1 for g in groups.values() if len(g) > 1),
        "queries_with_alternatives": sum(
            1 for g in groups.values() if any(len(group) > 1 for group in g)
        ),
        "judgements": sum(len(gold) for gold in dataset.qrels.values()),
        "dev_queries": halves["dev"],
        "test_queries": halves["test"],
        "tools_never_relevant": len(dataset.tools) - len(relevant),
        "styles": dict(styles),
    }


def run_validate(args: argparse.Namespace) -> int:
    from rich.table import Table

    from toolsearch.cli._output import console, print_json
    from toolsearch.dataset import load_dataset

    summary = dataset_summary(load_dataset(args.dir))
    if args.json:
        print_json(summary)
        return 0
    table = Table(title=f"dataset {summary['name']}: valid", show_header=False)
    table.add_column("what")
    table.add_column("value", justify="right")
    for key, value in summary.items():
        if key in ("name", "styles"):
            continue
        table.add_row(key.replace("_", " "), f"{value:,}" if isinstance(value, int) else str(value))
    for style, count in summary["styles"].items():
        table.add_row(f"style {style}", f"{count:,}")
    console().print(table)
    return 0


def run_import(args: argparse.Namespace) -> int:
    from toolsearch.bench.beir import import_beir
    from toolsearch.cli._output import console

    done = import_beir(args.src, args.dst, split=args.split, force=args.force)
    console().print(f"imported {done.summary()} → {args.dst}", markup=False)
    return 0


def run_export(args: argparse.Namespace) -> int:
    from toolsearch.bench.beir import export_beir
    from toolsearch.cli._output import console
    from toolsearch.dataset import load_dataset

    dataset = load_dataset(args.src)
    folder = export_beir(dataset, args.dst, split=args.split, force=args.force)
    console().print(
        f"exported {dataset.name}: {len(dataset.tools)} documents, {len(dataset.queries)} "
        f"queries, qrels/{args.split}.tsv → {folder}",
        markup=False,
    )
    return 0
