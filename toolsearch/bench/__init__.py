"""The benchmark harness: retrieval quality and speed of backends on labeled datasets.

Modules, by concept:

``runner``        every query through the full ToolSearch path, per backend and dataset
``metrics``       recall@k, hit@k, complete@k, mrr@k, ndcg@k (ranx; qrels groups), false positives
``confidence``    bootstrap confidence intervals over queries
``costs``         latency percentiles and request tokens with and without tool search
``significance``  paired tests between backends (ranx ``compare``), Holm/Bonferroni correction
``artefacts``     the results JSON and TREC run files
``report``        tables, the Markdown report and its PNG plots
``scaling``       latency against catalogue size on generated catalogues
``gate``          the regression gate against a saved baseline (overall and per style)
``beir``          BEIR import and export
``progress``      progress reporting (silent in the library, bars or plain lines in the CLI)

The names below are the public surface, imported on first use (importing this package imports
nothing heavy)::

    from toolsearch.bench import BackendSpec, default_metrics, run_benchmark, write_json

    result = run_benchmark(["mcp-workbench"], [BackendSpec.registered("bm25")],
                           default_metrics(), split="test")

The ``toolsearch bench`` and ``toolsearch dataset`` commands are thin shells over these; the
protocol is in ``docs/benchmark.md``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from toolsearch._lazy import lazy_exports

if TYPE_CHECKING:
    from toolsearch.bench.artefacts import load_results, result_to_json, write_json, write_trec
    from toolsearch.bench.beir import export_beir, import_beir
    from toolsearch.bench.confidence import bootstrap_interval
    from toolsearch.bench.errors import BenchError
    from toolsearch.bench.gate import check_regressions
    from toolsearch.bench.metrics import Metric, default_metrics, parse_metrics, per_query_scores
    from toolsearch.bench.report import write_report
    from toolsearch.bench.runner import BackendSpec, BenchResult, run_benchmark
    from toolsearch.bench.scaling import measure_scaling
    from toolsearch.bench.significance import compare_backends

#: Public name → the module that defines it.
_EXPORTS: dict[str, str] = {
    "BackendSpec": "runner",
    "BenchError": "errors",
    "BenchResult": "runner",
    "Metric": "metrics",
    "bootstrap_interval": "confidence",
    "check_regressions": "gate",
    "compare_backends": "significance",
    "default_metrics": "metrics",
    "export_beir": "beir",
    "import_beir": "beir",
    "load_results": "artefacts",
    "measure_scaling": "scaling",
    "parse_metrics": "metrics",
    "per_query_scores": "metrics",
    "result_to_json": "artefacts",
    "run_benchmark": "runner",
    "write_json": "artefacts",
    "write_report": "report",
    "write_trec": "artefacts",
}

__all__ = [
    "BackendSpec",
    "BenchError",
    "BenchResult",
    "Metric",
    "bootstrap_interval",
    "check_regressions",
    "compare_backends",
    "default_metrics",
    "export_beir",
    "import_beir",
    "load_results",
    "measure_scaling",
    "parse_metrics",
    "per_query_scores",
    "result_to_json",
    "run_benchmark",
    "write_json",
    "write_report",
    "write_trec",
]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
