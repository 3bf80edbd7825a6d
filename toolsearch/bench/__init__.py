"""The benchmark harness: retrieval quality and speed of backends on labeled datasets.

Modules, by concept (import them directly; nothing heavy is imported here):

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

__all__: list[str] = []
