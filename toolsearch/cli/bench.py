"""``toolsearch bench``: compare backends on labeled datasets; the project's main job.

With no arguments every installed backend runs on every bundled dataset and the results are
printed as tables (backends whose extra is missing are listed with the pip line that installs
them). Options pick the split (dev, test or all queries), add datasets (folders, bundled
names, or names of the public sets beside the checkout), pick backends and metrics, sample
queries, write artefacts (JSON, TREC runs, a Markdown report with plots) and gate on a saved
baseline (exit status 1 on a regression). See ``docs/benchmark.md``.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from toolsearch.bench.errors import BenchError

__all__ = ["register", "run"]

#: The gate's allowance when ``--baseline`` is given without ``--max-drop``.
_DEFAULT_MAX_DROP = 0.01

_DESCRIPTION = (
    "Run every query of each dataset through ToolSearch (all tools deferred, run depth 100) "
    "with each backend as the ranker, and report retrieval quality (recall@k, hit@k, "
    "complete@k, mrr@10, ndcg@10 with 95% bootstrap intervals, false positives on negative "
    "queries), latency, index time, memory and request tokens, with paired significance tests "
    "(Holm-corrected). With no arguments: every installed backend on the bundled dataset(s), "
    "all queries."
)


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "bench",
        help="benchmark backends on labeled datasets (the project's main job)",
        description=_DESCRIPTION,
    )
    _add_selection(parser)
    _add_outputs(parser)
    _add_significance(parser)
    _add_gate(parser)
    parser.add_argument(
        "--quiet",
        action="store_true",
        help="no progress (bars on a terminal, plain lines on stderr otherwise)",
    )
    parser.set_defaults(func=run)


def _add_selection(parser: argparse.ArgumentParser) -> None:
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
        "--split",
        choices=("dev", "test", "all"),
        default="all",
        help="which queries to score: the dev half (for tuning), the test half (what the "
        "README publishes) or all (default); halves are fixed by a hash of the query id",
    )
    add(
        "--backend",
        action="extend",
        nargs="+",
        metavar="NAME",
        help="backend(s) to run, also comma-separated (default: every installed backend)",
    )
    add("--k", default="1,3,5,10", metavar="LIST", help="cutoffs for recall/hit/complete@k")
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
    add(
        "--option",
        action="append",
        default=[],
        metavar="BACKEND.KEY=VALUE",
        help="a backend constructor option (VALUE read as JSON, else as text), e.g. "
        "embedding.threads=1; repeatable; overrides the config file, and reaches the hybrid's "
        "member of that name as the config file's [backends.NAME] does",
    )


def _add_outputs(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
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
        help="the report's latency curve skips a size projected or measured to need longer "
        "than this (default 60)",
    )
    add(
        "--scale-queries",
        type=int,
        default=50,
        metavar="N",
        help="queries per size on the latency curve (default 50)",
    )


def _add_significance(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add(
        "--stat-test",
        choices=("student", "fisher"),
        default="student",
        help="paired significance test between backends (default: student)",
    )
    add(
        "--correction",
        choices=("holm", "bonferroni", "none"),
        default="holm",
        help="multiple-comparison correction over each metric's backend pairs (default: holm)",
    )
    add(
        "--sig-metrics",
        metavar="LIST",
        help="metrics to test for significance (default: recall@5, ndcg@10, mrr@10)",
    )
    add("--max-p", type=float, default=0.05, help="significance threshold (default 0.05)")


def _add_gate(parser: argparse.ArgumentParser) -> None:
    from toolsearch.bench.gate import MIN_STYLE_QUERIES

    add = parser.add_argument
    add("--baseline", metavar="FILE", help="results JSON to gate against (see --max-drop)")
    add(
        "--max-drop",
        type=float,
        metavar="X",
        help="largest allowed drop of any quality metric against --baseline "
        f"(default {_DEFAULT_MAX_DROP:g})",
    )
    add(
        "--style-max-drop",
        type=float,
        metavar="X",
        help="largest allowed drop of a per-style metric (default: --max-drop)",
    )
    add(
        "--min-style-queries",
        type=int,
        default=MIN_STYLE_QUERIES,
        metavar="N",
        help="gate a style's metrics only when it has at least N queries of the kind measured "
        f"(default {MIN_STYLE_QUERIES})",
    )


# --------------------------------------------------------------------------- run


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


def _metrics(args: argparse.Namespace) -> list[Any]:
    from toolsearch.bench.metrics import (
        FALSE_POSITIVE_RATE,
        Metric,
        default_metrics,
        parse_k_list,
        parse_metrics,
    )

    if args.metrics:
        return parse_metrics(args.metrics)
    return [*default_metrics(parse_k_list(args.k)), Metric(FALSE_POSITIVE_RATE)]


def _load_baseline(path: str | None) -> dict[str, Any] | None:
    """The baseline results, with every metric name checked (errors name the file)."""
    if not path:
        return None
    from toolsearch.bench.artefacts import load_results
    from toolsearch.bench.metrics import parse_metric

    baseline = load_results(path)
    for entry in baseline["datasets"].values():
        for run_data in entry["backends"].values():
            for name in [*run_data["metrics"], *_style_metric_names(run_data)]:
                try:
                    parse_metric(name)
                except BenchError as exc:
                    raise BenchError(str(exc), path=path) from None
    return baseline


def _style_metric_names(run_data: dict[str, Any]) -> list[str]:
    by_style = run_data.get("by_style", {})
    if not isinstance(by_style, dict):
        return []
    return [name for values in by_style.values() if isinstance(values, dict) for name in values]


def _writable_folder(folder: Path, what: str) -> None:
    """Create ``folder`` and prove a file can be written there, before the long run."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".toolsearch-write-check-"):
            pass
    except OSError as exc:
        raise BenchError(
            f"{what}: cannot write here: {exc.strerror or exc} (checked before running)",
            path=folder,
        ) from exc


def _check_outputs(args: argparse.Namespace) -> None:
    """Fail fast on an output that could not be written at the end of the run."""
    if args.json_out:
        target = Path(args.json_out)
        if target.is_dir():
            raise BenchError("--json-out: is a folder, expected a file name", path=target)
        _writable_folder(target.parent, "--json-out")
    if args.run_dir:
        _writable_folder(Path(args.run_dir), "--run-dir")
    if args.report:
        _writable_folder(Path(args.report), "--report")


#: What every run imports for its metrics; ``--report`` adds matplotlib for the plots.
BENCH_MODULES = ("ranx", "numpy")


def _check_args(args: argparse.Namespace) -> None:
    from toolsearch.extras import require_extra

    plots = ("matplotlib",) if args.report else ()
    require_extra("toolsearch bench", "bench", (*BENCH_MODULES, *plots))
    if args.max_drop is not None and not args.baseline:
        raise BenchError("--max-drop needs --baseline FILE")
    if args.style_max_drop is not None and not args.baseline:
        raise BenchError("--style-max-drop needs --baseline FILE")
    if args.limit is not None and args.limit < 1:
        raise BenchError(f"--limit must be a positive integer, got {args.limit}")
    _check_settings(args)


def _check_settings(args: argparse.Namespace) -> None:
    """Every number the run uses only at its end (significance, latency curve, gate), checked
    before the run, so a typo does not cost the whole run."""
    from toolsearch.bench.gate import check_gate_settings
    from toolsearch.bench.metrics import parse_metrics
    from toolsearch.bench.scaling import check_scaling_settings, parse_sizes
    from toolsearch.bench.significance import check_max_p, check_testable

    check_max_p(args.max_p)
    if args.sig_metrics:
        check_testable(parse_metrics(args.sig_metrics))
    parse_sizes(args.scale_sizes)
    check_scaling_settings(args.scale_queries, args.scale_budget)
    check_gate_settings(
        _DEFAULT_MAX_DROP if args.max_drop is None else args.max_drop,
        args.style_max_drop,
        args.min_style_queries,
    )


def _datasets(args: argparse.Namespace) -> list[Any]:
    from toolsearch.datasets import bundled_datasets

    datasets: list[Any] = list(args.dataset or [])
    if not datasets:
        datasets = list(bundled_datasets())
        if not datasets:
            raise BenchError("no bundled dataset with queries is installed; pass --dataset DIR")
    return datasets


def _specs(args: argparse.Namespace, show_bars: bool) -> tuple[list[Any], dict[str, str]]:
    """The backends to run (with config-file and ``--option`` options) and those skipped."""
    from toolsearch.bench.runner import BackendSpec, installed_backends
    from toolsearch.config import load_settings

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
    # an option for a backend reaches the hybrid's member of that name too, as the config
    # file's [backends.<name>] does (docs/configuration.md)
    settings = settings.with_backend_options(overrides, "--option")
    used = set(names).union(*(settings.member_names(name) for name in names))
    unknown = sorted(set(overrides) - used)
    if unknown:
        raise BenchError(
            f"--option names backend(s) {', '.join(unknown)} that are not being run "
            f"({', '.join(names)}) or members of a hybrid that is"
        )
    specs = [
        BackendSpec.registered(name, settings.build_options(name), progress=show_bars)
        for name in names
    ]
    return specs, skipped


def _progress(args: argparse.Namespace) -> tuple[Any, bool]:
    """Rich bars on a terminal, plain lines on a non-terminal stderr, nothing with --quiet;
    and whether bars are drawn."""
    from rich.console import Console

    from toolsearch.bench.progress import LineProgress, NoProgress, RichProgress

    err = Console(stderr=True)
    bars = not args.quiet and err.is_terminal
    if not bars:
        # Model libraries draw their own tqdm bars (e.g. "Loading weights"); keep logs plain.
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        os.environ.setdefault("TQDM_DISABLE", "1")
    if args.quiet:
        return NoProgress(), False
    return (RichProgress(err), True) if bars else (LineProgress(sys.stderr), False)


def run(args: argparse.Namespace) -> int:
    from toolsearch.bench.metrics import parse_metrics
    from toolsearch.bench.runner import run_benchmark
    from toolsearch.cli._output import console

    started = time.perf_counter()
    out = console()
    _check_args(args)
    metrics = _metrics(args)
    baseline = _load_baseline(args.baseline)
    datasets = _datasets(args)
    _check_outputs(args)
    progress, bars = _progress(args)
    specs, skipped = _specs(args, bars)
    result = run_benchmark(
        datasets,
        specs,
        metrics,
        limit=args.limit,
        split=args.split,
        significance_test=args.stat_test,
        significance_on=parse_metrics(args.sig_metrics) if args.sig_metrics else None,
        max_p=args.max_p,
        correction=args.correction,
        skipped=skipped,
        progress=progress,
    )
    _print_tables(out, result)
    _write_outputs(args, out, result, specs, progress)
    status = 0 if baseline is None else _gate(args, out, result, baseline, specs)
    out.print(f"done in {time.perf_counter() - started:.1f} s", style="dim")
    return status


def _write_outputs(
    args: argparse.Namespace, out: Any, result: Any, specs: list[Any], progress: Any
) -> None:
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
            progress=progress,
        )
        command = "toolsearch " + " ".join(shlex.quote(a) for a in sys.argv[1:])
        report = write_report(result, args.report, scaling=scaling, command=command)
        out.print(f"report: {report}")


def _gate(
    args: argparse.Namespace, out: Any, result: Any, baseline: dict[str, Any], specs: list[Any]
) -> int:
    from toolsearch.bench.artefacts import result_to_json
    from toolsearch.bench.gate import check_regressions

    gate = check_regressions(
        baseline,
        result_to_json(result),
        _DEFAULT_MAX_DROP if args.max_drop is None else args.max_drop,
        style_max_drop=args.style_max_drop,
        min_style_queries=args.min_style_queries,
        datasets=list(result.datasets) if args.dataset else None,
        backends=[spec.name for spec in specs] if args.backend else None,
    )
    for line in gate.lines():
        out.print(line, markup=False)
    return 0 if gate.passed else 1


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
            for note in text_table.notes:
                out.print(f"- {note}", style="dim", markup=False)
        if entry.significance_note:
            out.print(f"{entry.name}: significance: {entry.significance_note}", style="dim")
