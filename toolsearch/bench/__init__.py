"""The benchmark harness: retrieval quality and speed of backends on labeled datasets.

The common names are importable from here (``from toolsearch.bench import run_benchmark``),
each imported on first use. Modules, by concept:

``runner``        every query through the full ToolSearch path, per backend and dataset
``metrics``       recall@k, hit@k, complete@k, mrr@k, ndcg@k (ranx), false positives
``costs``         latency percentiles and request tokens with and without tool search
``significance``  paired tests between backends (ranx ``compare``)
``artefacts``     the results JSON and TREC run files
``report``        tables, the Markdown report and its PNG plots
``scaling``       latency against catalogue size on generated catalogues
``gate``          the regression gate against a saved baseline
``beir``          BEIR import and export
``progress``      progress reporting (silent in the library, rich bars in the CLI)

The ``toolsearch bench`` and ``toolsearch dataset`` commands are thin shells over these.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from toolsearch._lazy import lazy_exports

if TYPE_CHECKING:
    from toolsearch.bench.artefacts import load_results, write_json, write_trec
    from toolsearch.bench.beir import export_beir, import_beir
    from toolsearch.bench.errors import BenchError
    from toolsearch.bench.gate import check_regressions
    from toolsearch.bench.report import write_report
    from toolsearch.bench.runner import BackendSpec, BenchResult, run_benchmark
    from toolsearch.bench.scaling import measure_scaling
    from toolsearch.bench.significance import compare_backends

__all__ = [
    "BackendSpec",
    "BenchError",
    "BenchResult",
    "check_regressions",
    "compare_backends",
    "export_beir",
    "import_beir",
    "load_results",
    "measure_scaling",
    "run_benchmark",
    "write_json",
    "write_report",
    "write_trec",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "BackendSpec": "runner",
        "BenchResult": "runner",
        "run_benchmark": "runner",
        "check_regressions": "gate",
        "load_results": "artefacts",
        "write_json": "artefacts",
        "write_trec": "artefacts",
        "write_report": "report",
        "export_beir": "beir",
        "import_beir": "beir",
        "measure_scaling": "scaling",
        "compare_backends": "significance",
        "BenchError": "errors",
    },
)
