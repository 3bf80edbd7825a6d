"""What a query adapter (``toolsearch train``) does for the catalogue it was trained on, and
for one it has never seen.

    python -m lab.query_adapter --out lab/results/query_adapter.json

For each dataset of :data:`member_runs.DATASETS`, three adapters' worth of rankings on its
**test** split (at most ``--limit`` queries, the hash-ordered sample of the other quality
benchmarks):

* ``base``: no adapter;
* ``in-domain``: an adapter trained on the same dataset's **dev** split (what a team with
  labelled queries of its own catalogue gets);
* ``LODO``: an adapter trained on the two other datasets' dev splits (what a catalogue the
  adapter has never seen gets).

The model is the bundled all-MiniLM-L6-v2 as published (``BASE_MODEL``, not the fine-tuned
default). Each runs through the ``embedding`` backend and through ``hybrid`` with the adapter on its
embedding member (abstention off in both hybrid runs, as it is for any hybrid given member
options: the adapter moves the similarities the threshold was calibrated on). Metrics:
recall@5, hit@1, ndcg@10 over the labelled queries (ranx), and ranx's paired t-test of each
adapter against ``base`` (Holm-corrected, p < 0.05). Adapters are written under ``--work``
named by their content hash, so the cached rankings of :mod:`member_runs` never outlive the
adapter they were made with. See ``docs/query-adapter.md``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from lab.member_runs import DATASETS, DEPTH, MemberSpec, Sample, default_runs_dir, load_sample
from lab.member_runs import member_hits as cached_member_hits
from toolsearch.backends.embedding import EmbeddingBackend, default_cache_dir
from toolsearch.backends.encoders import BASE_MODEL
from toolsearch.backends.query_adapter import TrainingSettings, train_on_datasets
from toolsearch.bench.metrics import parse_metrics, per_query_scores
from toolsearch.bench.significance import compare_backends

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "lab" / "results" / "query_adapter.json"
METRICS = ("recall@5", "hit@1", "ndcg@10")
ADAPTERS = ("base", "in-domain", "LODO")
BACKENDS = ("embedding", "hybrid")


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def train(names: list[str], samples: Mapping[str, Sample], work: Path, seed: int) -> Path:
    """An adapter trained on the dev samples of ``names``, saved under its content hash."""
    backend = EmbeddingBackend(model=BASE_MODEL, progress=None)
    labelled = [(samples[name].dataset, samples[name].queries) for name in names]
    started = time.perf_counter()
    adapter = train_on_datasets(backend, labelled, TrainingSettings(seed=seed))
    log(f"  adapter on {'+'.join(names)}: {time.perf_counter() - started:.0f} s, {adapter.info}")
    work.mkdir(parents=True, exist_ok=True)
    draft = Path(adapter.save(work / "draft.npz"))
    digest = hashlib.sha256(draft.read_bytes()).hexdigest()[:12]
    return draft.replace(work / f"{'+'.join(names)}.{digest}.npz")


def spec(backend: str, adapter: Path | None) -> MemberSpec:
    """The backend to run, with ``adapter`` on its embedding (member)."""
    extra: dict[str, Any] = {"model": BASE_MODEL}
    if adapter is not None:
        extra["query_adapter"] = str(adapter)
    if backend == "embedding":
        return MemberSpec("embedding", "embedding", extra)
    members = {"embedding": extra | {"precision": "fp32"}}  # as measured: float32 vectors
    return MemberSpec("hybrid", "hybrid", {"member_options": members, "min_member_score": {}})


def evaluate(sample: Sample, ranked: Mapping[str, Mapping[str, list[str]]]) -> dict[str, Any]:
    """Means per variant and the paired tests of each adapter against ``base``."""
    qrels = sample.qrels
    metrics = parse_metrics(METRICS)
    means = {}
    for variant, run in ranked.items():
        per_query = per_query_scores(qrels, run, metrics, groups=sample.groups)
        means[variant] = {
            m: round(sum(per_query[m][q] for q in qrels) / len(qrels), 4) for m in METRICS
        }
    tests = compare_backends(qrels, ranked, metrics, depth=DEPTH, groups=sample.groups)
    against_base = [p for p in tests.pairs if p.a == "base"]
    return {
        "queries": len(qrels),
        "means": means,
        "significance": {
            "test": tests.describe(),
            "pairs": [
                {
                    "adapter": p.b,
                    "metric": p.metric,
                    "delta": round(p.delta, 4),
                    "p_adjusted": p.p_adjusted,
                    "significant": p.significant,
                }
                for p in against_base
            ],
        },
    }


def run(limit: int, train_limit: int, work: Path, cache: Path, seed: int) -> dict[str, Any]:
    dev = {name: load_sample(name, "dev", train_limit) for name in DATASETS}
    adapters: dict[str, dict[str, Path | None]] = {}
    for name in DATASETS:
        others = [d for d in DATASETS if d != name]
        adapters[name] = {
            "base": None,
            "in-domain": train([name], dev, work, seed),
            "LODO": train(others, dev, work, seed),
        }
    results: dict[str, Any] = {}
    for name in DATASETS:
        test = load_sample(name, "test", limit)
        results[name] = {}
        for backend in BACKENDS:
            ranked = {
                variant: {
                    qid: [tool for tool, _ in hits]
                    for qid, hits in cached_member_hits(
                        test, spec(backend, adapter), limit=limit, cache=cache
                    ).items()
                }
                for variant, adapter in adapters[name].items()
            }
            results[name][backend] = evaluate(test, ranked)
            log(f"{name} {backend}: {results[name][backend]['means']}")
    return {
        "protocol": {
            "test_limit": limit,
            "train_limit": train_limit,
            "settings": vars(TrainingSettings(seed=seed)),
            "adapters": {
                name: {v: (p.name if p else None) for v, p in by.items()}
                for name, by in adapters.items()
            },
        },
        "results": results,
    }


def _cell(result: Mapping[str, Any], variant: str, metric: str) -> str:
    value = result["means"][variant][metric]
    if variant == "base":
        return f"{value:.3f}"
    (pair,) = [
        p
        for p in result["significance"]["pairs"]
        if p["adapter"] == variant and p["metric"] == metric
    ]
    return f"{value:.3f}{'*' if pair['significant'] else ''}"


def markdown(data: Mapping[str, Any]) -> str:
    """The README table: each dataset and backend, base / in-domain / LODO."""
    head = "| dataset (test) | backend | adapter | " + " | ".join(METRICS) + " |"
    lines = [head, "|---|---|---|" + "---:|" * len(METRICS)]
    for name, by_backend in data["results"].items():
        for backend, result in by_backend.items():
            for variant in ADAPTERS:
                cells = " | ".join(_cell(result, variant, m) for m in METRICS)
                lines.append(f"| {name} | {backend} | {variant} | {cells} |")
    lines.append("")
    lines.append(
        "`*`: differs from `base` on that metric, ranx paired t-test, Holm-corrected, p < 0.05. "
        f"Test splits, at most {data['protocol']['test_limit']} queries; adapters trained on "
        f"dev splits (at most {data['protocol']['train_limit']} queries each)."
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--limit", type=int, default=1000, help="test queries per dataset")
    parser.add_argument("--train-limit", type=int, default=2000, help="dev queries per dataset")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--work", type=Path, default=default_cache_dir() / "query_adapters")
    parser.add_argument("--cache", type=Path, default=default_runs_dir())
    args = parser.parse_args(argv)
    data = run(args.limit, args.train_limit, args.work, args.cache, args.seed)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    print(markdown(data))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
