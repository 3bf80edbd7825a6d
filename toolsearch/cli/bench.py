"""``toolsearch bench``: compare backends on labeled datasets; the project's main job.

With no arguments every installed backend runs on every bundled dataset and the results are
printed as tables (backends whose extra is missing are listed with the pip line that installs
them). Options add datasets (folders, bundled names, or names of the public sets beside the
checkout), pick backends and metrics, sample queries, write artefacts (JSON, TREC runs, a
Markdown report with plots) and gate on a saved baseline (exit status 1 on a regression).
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import time
from typing import Any

from toolsearch.bench.errors import BenchError

__all__ = ["register", "run"]


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "bench",
        help="benchmark backends on labeled datasets (the project's main job)",
        description="Run every query of each dataset through ToolSearch (all tools deferred, "
        "run depth 100) with each backend as the ranker, and report retrieval quality "
        "(recall@k, hit@k, complete@k, mrr@10, ndcg@10, false positives on negative queries), "
        "latency, index time, memory and request tokens, with paired significance tests. "
        "With no arguments: every installed backend on the bundled dataset(s).",
    )
    add = parser.add_argument
    add(
        "--dataset",
        action="extend",
        nargs="+",
        metavar="DIR",
        help="dataset folder, bundled dataset name, or public set name such as 'metatool' "
        "(repeatable; default: the bundled datasets)",
    )
    add(
        "--backend",
        action="extend",
        nargs="+",
        metavar="NAME",
        help="backend(s) to run, also comma-separated (default: every installed backend)",
    )
    add(
        "--k",
        default="1,3,5,10",
        metavar="LIST",
        help="cutoffs for recall/hit/complete@k (default 1,3,5,10)",
    )
    add(
        "--metrics",
        metavar="LIST",
        help="metrics to compute instead of the default set, e.g. recall@5,ndcg@10,"
        "false_positive_rate",
    )
    add(
        "--limit",
        type=int,
        metavar="N",
        help="run a deterministic sample of N queries per dataset (the N with the smallest "
        "SHA-256 of their id, in file order)",
    )
    add("--json-out", metavar="FILE", help="write the results as one JSON file")
    add("--run-dir", metavar="DIR", help="write TREC run files <dataset>.<backend>.trec")
    add(
        "--report",
        metavar="DIR",
        help="write report.md with tables and PNG plots (recall@k curves, latency against "
        "catalogue size)",
    )
    add(
        "--scale-sizes",
        default="1000,10000,100000",
        metavar="LIST",
        help="catalogue sizes for the report's latency curve (default 1000,10000,100000)",
    )
    add(
        "--scale-budget",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="skip a size a backend is projected to need longer than this for (default 60)",
    )
    add(
        "--scale-queries",
        type=int,
        default=50,
        metavar="N",
        help="queries per size on the latency curve (default 50)",
    )
    add("--baseline", metavar="FILE", help="results JSON to gate against (see --max-drop)")
    add(
        "--max-drop",
        type=float,
        metavar="X",
        help="largest allowed drop of any quality metric against --baseline (default 0.01)",
    )
    add(
        "--stat-test",
        choices=("student", "fisher"),
        default="student",
        help="paired significance test between backends (default: student)",
    )
    add(
        "--sig-metrics",
        metavar="LIST",
        help="metrics to test for significance (default: recall@5, ndcg@10, mrr@10)",
    )
    add("--max-p", type=float, default=0.05, help="significance threshold (default 0.05)")
    add(
        "--option",
        action="append",
        default=[],
        metavar="BACKEND.KEY=VALUE",
        help="a backend constructor option (VALUE read as JSON, else as text), e.g. "
        "embedding.threads=1; repeatable; overrides the config file",
    )
    add("--quiet", action="store_true", help="no progress bars")
    parser.set_defaults(func=run)


def _split(values: list[str] | None) -> list[str]:
    return [part.strip() for value in values or [] for part in value.split(",") if part.strip()]


def _parse_options(items: list[str]) -> dict[str, dict[str, Any]]:
    """``["embedding.threads=1"]`` → ``{"embedding": {"threads": 1}}``."""
    import json

    options: dict[str, dict[str, Any]] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        backend, dot, name = key.strip().partition(".")
        if not sep or not dot or not backend or not name:
            raise BenchError(f"--option {item!r}: expected BACKEND.KEY=VALUE, e.g. bm25.k1=1.2")
        try:
            value: Any = json.loads(raw)
        except json.JSONDecodeError:
            value = raw
        options.setdefault(backend, {})[name.strip()] = value
    return options


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from toolsearch.bench.metrics import (
        FALSE_POSITIVE_RATE,
        Metric,
        default_metrics,
        parse_k_list,
        parse_metric,
        parse_metrics,
    )
    from toolsearch.bench.progress import NoProgress, RichProgress
    from toolsearch.bench.runner import BackendSpec, installed_backends, run_benchmark
    from toolsearch.cli._output import console
    from toolsearch.config import load_settings

    started = time.perf_counter()
    out = console()
    if args.max_drop is not None and not args.baseline:
        raise BenchError("--max-drop needs --baseline FILE")
    if args.limit is not None and args.limit < 1:
        raise BenchError(f"--limit must be a positive integer, got {args.limit}")
    if args.metrics:
        metrics = parse_metrics(args.metrics)
    else:
        metrics = [*default_metrics(parse_k_list(args.k)), Metric(FALSE_POSITIVE_RATE)]

    baseline = None
    if args.baseline:
        from toolsearch.bench.artefacts import load_results

        baseline = load_results(args.baseline)
        for entry in baseline["datasets"].values():
            for run_data in entry["backends"].values():
                for name in run_data["metrics"]:
                    try:
                        parse_metric(name)
                    except BenchError as exc:
                        raise BenchError(str(exc), path=args.baseline) from None

    from toolsearch.datasets import bundled_datasets

    datasets: list[Any] = list(args.dataset or [])
    if not datasets:
        datasets = list(bundled_datasets())
        if not datasets:
            raise BenchError("no bundled dataset with queries is installed; pass --dataset DIR")

    err = Console(stderr=True)
    show = not args.quiet and err.is_terminal
    if not show:
        # Model libraries draw their own tqdm bars (e.g. "Loading weights"); quiet means quiet.
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        os.environ.setdefault("TQDM_DISABLE", "1")
    settings = load_settings()
    chosen = _split(args.backend)
    skipped: dict[str, str] = {}
    if chosen:
        names = list(dict.fromkeys(chosen))
    else:
        names, skipped = installed_backends()
        if not names:
            raise BenchError("no backend is installed; see `toolsearch backends`")
    overrides = _parse_options(args.option)
    unknown = sorted(set(overrides) - set(names))
    if unknown:
        raise BenchError(
            f"--option names backend(s) {', '.join(unknown)} that are not being run "
            f"({', '.join(names)})"
        )
    specs = [
        BackendSpec.registered(
            name, {**settings.options_for(name), **overrides.get(name, {})}, progress=show
        )
        for name in names
    ]

    result = run_benchmark(
        datasets,
        specs,
        metrics,
        limit=args.limit,
        significance_test=args.stat_test,
        significance_on=parse_metrics(args.sig_metrics) if args.sig_metrics else None,
        max_p=args.max_p,
        skipped=skipped,
        progress=RichProgress(err) if show else NoProgress(),
    )

    _print_tables(out, result)
    if args.json_out:
        from toolsearch.bench.artefacts import write_json

        out.print(f"results: {write_json(result, args.json_out)}")
    if args.run_dir:
        from toolsearch.bench.artefacts import write_trec

        files = write_trec(result, args.run_dir)
        out.print(f"TREC runs: {len(files)} files in {args.run_dir}")
    if args.report:
        from toolsearch.bench.report import write_report
        from toolsearch.bench.scaling import measure_scaling, parse_sizes

        first = next(iter(result.datasets.values()))
        scaling = measure_scaling(
            first.dataset.tools,
            first.queries,
            specs,
            base_name=first.name,
            sizes=parse_sizes(args.scale_sizes),
            n_queries=args.scale_queries,
            budget_seconds=args.scale_budget,
            progress=RichProgress(err) if show else NoProgress(),
        )
        command = "toolsearch " + " ".join(shlex.quote(a) for a in sys.argv[1:])
        report = write_report(result, args.report, scaling=scaling, command=command)
        out.print(f"report: {report}")

    status = 0
    if baseline is not None:
        from toolsearch.bench.artefacts import result_to_json
        from toolsearch.bench.gate import check_regressions

        gate = check_regressions(
            baseline,
            result_to_json(result),
            0.01 if args.max_drop is None else args.max_drop,
            datasets=list(result.datasets) if args.dataset else None,
            backends=names if chosen else None,
        )
        for line in gate.lines():
            out.print(line, markup=False)
        status = 0 if gate.passed else 1
    out.print(f"done in {time.perf_counter() - started:.1f} s", style="dim")
    return status


def _print_tables(out: Any, result: Any) -> None:
    from rich.table import Table

    from toolsearch.bench.report import dataset_tables

    for name, why in result.skipped.items():
        out.print(f"skipped backend {name}: {why}", markup=False)
    for entry in result.datasets.values():
        for text_table in dataset_tables(entry, result.metrics):
            if text_table.width() > out.width:
                flipped = text_table.transposed()
                if flipped.width() < text_table.width():
                    text_table = flipped
            out.print(text_table.title, style="bold", markup=False)
            table = Table()
            for i, header in enumerate(text_table.headers):
                table.add_column(
                    header,
                    justify="left" if i < text_table.align_left else "right",
                    overflow="fold",
                )
            for row in text_table.rows:
                table.add_row(*row)
            out.print(table)
            if text_table.caption:
                out.print(text_table.caption, style="dim", markup=False)
        if entry.significance_note:
            out.print(f"{entry.name}: significance: {entry.significance_note}", style="dim")
