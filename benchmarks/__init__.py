"""The speed benchmarks, the tables of docs/results.md and their regeneration (not shipped).

Run from the repository root as modules, e.g. ``python -m benchmarks.bench_keyword``; see
docs/benchmark.md.
"""
