"""Choose, by measurement, the embedding backend's text fields, the hybrid backend's default
members, weights and RRF ``k``, and the default-backend preference order.

    python benchmarks/tune_hybrid.py                 # writes benchmarks/results/tune_hybrid.json
    python benchmarks/tune_hybrid.py --queries 200   # a quicker, smaller sample

Protocol (fixed and deterministic):

* Public dev sets ``metatool`` and ``bfcl`` from ``../shared/datasets`` (or
  ``$TOOLSEARCH_SHARED_DATASETS``): positive query ids are sorted, shuffled with
  ``random.Random(0)`` and split into a **dev** sample (the first ``--queries``, default 1000)
  and a **test** sample (the next ``--queries``). Each bundled dataset with qrels
  (``datasets/*``, e.g. ``mcp-workbench``) is shuffled the same way and halved into dev and
  test. Every choice is made on the dev samples only; the test samples are reported, never used
  to choose.
* Every tool of a dataset is indexed in pool order (this measures ranking, so the deferral
  rule is not applied) and every query is run through the backend's ``search`` with the query
  parser the engine uses; the engine's ``+required`` filter, identical for every backend, is
  not applied. Metrics are ranx's ``ndcg@10`` and ``recall@5`` over queries with a gold tool;
  runs are handed to ranx with rank-derived scores so ties are evaluated in the order returned.
* Objective: the mean over the dev samples of ``ndcg@10``. Configurations within ``--tolerance``
  (0.002) of the best are treated as equal and the simplest wins: fewer members, then weights
  closer to equal, then ``k`` closer to 60.
* Steps: (1) embedding text fields (the fewest fields within the tolerance of the best);
  (2) single backends; (3) fusions of every subset of two or more installed backends
  (embedding with the fields of step 1) over a grid of weights (0.25, 0.5, 1, 2 per member,
  proportional duplicates dropped) and ``k`` (1, 2, 3, 5, 10, 20, 60), each member contributing
  its best ``--depth`` (50) hits exactly as :class:`HybridBackend` does; (4) the default-backend
  preference: installed backends and the chosen hybrid by dev score, ``keyword`` always last
  (it needs no extra). The script checks that the real ``HybridBackend`` with the chosen
  settings returns exactly the fused rankings it evaluated.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import math
import os
import platform
import random
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toolsearch import __version__
from toolsearch.backends.embedding import DEFAULT_FIELDS, EmbeddingCache, default_cache_dir
from toolsearch.backends.hybrid import HybridBackend, rrf_fuse
from toolsearch.dataset import Dataset, Query, load_dataset
from toolsearch.datasets import bundled_datasets
from toolsearch.errors import BackendError
from toolsearch.query import parse_query
from toolsearch.registry import backend_info, load_backend
from toolsearch.tool import Tool, pool_order, pool_sort_key

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "tune_hybrid.json"
PUBLIC_SETS = ("metatool", "bfcl")
LEXICAL = ("keyword", "bm25", "fts5")
FIELD_CANDIDATES: tuple[tuple[str, ...], ...] = (
    ("description",),
    ("name", "description"),
    ("name", "hint", "description"),
    ("name", "hint", "description", "params"),
    ("name", "hint", "description", "param_descriptions"),
    ("name", "hint", "description", "params", "param_descriptions"),
)
WEIGHT_GRID = (0.25, 0.5, 1.0, 2.0)
K_GRID = (1, 2, 3, 5, 10, 20, 60)
METRICS = ("ndcg@10", "recall@5")
SEARCH_K = 10


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def shared_dir() -> Path:
    configured = os.environ.get("TOOLSEARCH_SHARED_DATASETS")
    return Path(configured) if configured else ROOT.parent / "shared" / "datasets"


@dataclass
class Split:
    """One evaluation sample: a dataset and the queries drawn from it."""

    name: str  # "metatool/dev"
    dataset: Dataset
    queries: list[Query]
    role: str  # "dev" or "test"

    qrels: dict[str, dict[str, int]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.qrels = {q.id: dict(self.dataset.qrels[q.id]) for q in self.queries}


def make_splits(per_set: int) -> list[Split]:
    splits: list[Split] = []
    for name in PUBLIC_SETS:
        folder = shared_dir() / name
        if not (folder / "qrels.tsv").is_file():
            log(f"skipping {name}: no {folder}")
            continue
        dataset = load_dataset(folder)
        positives = sorted(dataset.positives, key=lambda q: q.id)
        random.Random(0).shuffle(positives)
        splits.append(Split(f"{name}/dev", dataset, positives[:per_set], "dev"))
        test = positives[per_set : 2 * per_set]
        if test:
            splits.append(Split(f"{name}/test", dataset, test, "test"))
    for folder in bundled_datasets():
        dataset = load_dataset(folder)
        positives = sorted(dataset.positives, key=lambda q: q.id)
        random.Random(0).shuffle(positives)
        half = len(positives) // 2
        if half:
            splits.append(Split(f"{dataset.name}/dev", dataset, positives[:half], "dev"))
            splits.append(Split(f"{dataset.name}/test", dataset, positives[half:], "test"))
    return splits


# --------------------------------------------------------------------------- running backends

Rankings = dict[str, list[str]]  # query id -> tool names, best first


def run_backend(
    backend: Any, tools: Sequence[Tool], queries: Sequence[Query], depth: int
) -> Rankings:
    backend.index(pool_order(tools))  # the engine hands backends the pool in pool order
    parsed = [parse_query(q.text) for q in queries]
    return {
        q.id: [hit.name for hit in backend.search(p, depth) if hit.score > 0]
        for q, p in zip(queries, parsed, strict=True)
    }


def installed(name: str) -> bool:
    try:
        return backend_info(name).installed
    except BackendError as exc:
        log(f"backend {name} unavailable: {exc}")
        return False


class _MemoEncoder:
    """The model, remembering single-text (query) vectors across the field candidates: the
    same vectors the backend computes for a live query, computed once per text."""

    cacheable = True

    def __init__(self, inner: Any, cache_dir: str | None) -> None:
        self.inner = inner
        self.name = inner.name
        self.memo: dict[str, Any] = {}
        # single-text vectors are kept apart from batch-encoded ones (they differ in the last
        # bits), so a rerun of this script does not re-encode thousands of queries
        self.store = EmbeddingCache(cache_dir or default_cache_dir())
        self.store_model = f"{self.name}|single"

    def encode(self, texts: list[str]) -> Any:
        import numpy as np

        if len(texts) != 1:
            return self.inner.encode(texts)
        text = texts[0]
        found = self.memo.get(text)
        if found is None:
            key = hashlib.blake2b(text.encode("utf-8"), digest_size=16).digest()
            blob = self.store.get_many(self.store_model, [key]).get(key)
            if blob is not None:
                found = np.frombuffer(blob, dtype=np.float32).reshape(1, -1)
            else:
                found = self.inner.encode(texts)
                self.store.put_many(self.store_model, [(key, found.shape[1], found.tobytes())])
            self.memo[text] = found
        return found


_ENCODER: list[Any] = []


def embedding_options(
    fields: Sequence[str], cache_dir: str | None, *, shared_encoder: bool = True
) -> dict[str, Any]:
    """Options of the embedding backend under test; one model instance is shared by all runs."""
    options: dict[str, Any] = {}
    if shared_encoder:
        from toolsearch.backends.embedding import SentenceTransformerEncoder

        if not _ENCODER:
            _ENCODER.append(_MemoEncoder(SentenceTransformerEncoder(), cache_dir))
        options["encoder"] = _ENCODER[0]
    return {
        **options,
        "fields": list(fields),
        "cache_dir": cache_dir if cache_dir else True,
        "query_cache_size": 10_000,
    }


# --------------------------------------------------------------------------- evaluation


def fast_metrics(qrels: Mapping[str, Mapping[str, int]], run: Rankings) -> dict[str, float]:
    """``ndcg@10`` (linear gains, ``grade / log2(rank + 1)``) and ``recall@5`` as ranx computes
    them, in plain Python: fast enough for the whole grid. Every configuration the script
    reports is also scored by ranx, and the two must agree (see :func:`check_against_ranx`)."""
    ndcg = recall = 0.0
    for qid, gold in qrels.items():
        names = run.get(qid, [])
        relevant = {n for n, g in gold.items() if g > 0}
        dcg = sum(gold.get(n, 0) / math.log2(i + 2) for i, n in enumerate(names[:10]))
        ideal = sorted((g for g in gold.values() if g > 0), reverse=True)[:10]
        idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
        ndcg += dcg / idcg if idcg else 0.0
        recall += len(relevant & set(names[:5])) / len(relevant) if relevant else 0.0
    count = len(qrels) or 1
    return {"ndcg@10": round(ndcg / count, 4), "recall@5": round(recall / count, 4)}


def check_against_ranx(qrels: Mapping[str, Mapping[str, int]], run: Rankings) -> dict[str, float]:
    """ranx's scores of ``run``; stops the script if :func:`fast_metrics` disagrees."""
    exact = evaluate(qrels, run)
    fast = fast_metrics(qrels, run)
    if any(abs(exact[m] - fast[m]) > 1e-4 for m in METRICS):
        raise SystemExit(f"fast metrics {fast} disagree with ranx {exact}")
    return exact


_QRELS: dict[int, Any] = {}


def evaluate(qrels: Mapping[str, Mapping[str, int]], run: Rankings) -> dict[str, float]:
    """ranx ``ndcg@10`` and ``recall@5`` of ``run`` (names best first) against ``qrels``."""
    import warnings

    import ranx

    ranx_qrels = _QRELS.get(id(qrels))
    if ranx_qrels is None:
        ranx_qrels = _QRELS[id(qrels)] = ranx.Qrels(dict(qrels))
    scored = {
        qid: {n: float(len(names) - i) for i, n in enumerate(names)} for qid, names in run.items()
    }
    if not any(scored.values()):
        return dict.fromkeys(METRICS, 0.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = ranx.evaluate(ranx_qrels, ranx.Run(scored), list(METRICS))
    return {metric: round(float(result[metric]), 4) for metric in METRICS}


def fuse(
    member_runs: Mapping[str, Rankings],
    weights: Mapping[str, float],
    k: float,
    tools: Mapping[str, Tool],
    top: int = SEARCH_K,
) -> Rankings:
    """What ``HybridBackend.search(query, top)`` returns, from each member's ranked names."""
    out: Rankings = {}
    qids = next(iter(member_runs.values())).keys()
    for qid in qids:
        scores = rrf_fuse({m: member_runs[m][qid] for m in weights}, weights, k)
        ranked = sorted(scores, key=lambda n: (-scores[n], pool_sort_key(tools[n])))
        out[qid] = ranked[:top]
    return out


@dataclass
class Config:
    members: dict[str, float]
    k: float | None = None  # None: a single backend
    scores: dict[str, dict[str, float]] = field(default_factory=dict)

    @property
    def label(self) -> str:
        if self.k is None:
            return next(iter(self.members))
        weights = "+".join(f"{m}*{w:g}" for m, w in self.members.items())
        return f"hybrid({weights}; k={self.k:g})"

    def dev_score(self) -> float:
        dev = [s["ndcg@10"] for name, s in self.scores.items() if name.endswith("/dev")]
        return sum(dev) / len(dev)

    def simplicity(self) -> tuple[float, ...]:
        weights = list(self.members.values())
        spread = math.log(max(weights) / min(weights))
        return (len(weights), spread, abs((self.k or 60) - 60))

    def to_json(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "members": self.members,
            "k": self.k,
            "dev_ndcg@10_mean": round(self.dev_score(), 4),
            "scores": self.scores,
        }


def choose(configs: Sequence[Config], tolerance: float) -> Config:
    best = max(c.dev_score() for c in configs)
    near = [c for c in configs if c.dev_score() >= best - tolerance]
    return min(near, key=lambda c: (c.simplicity(), -c.dev_score()))


def weight_grid(members: Sequence[str]) -> list[dict[str, float]]:
    seen: set[tuple[float, ...]] = set()
    grids: list[dict[str, float]] = []
    for combo in itertools.product(WEIGHT_GRID, repeat=len(members)):
        top = max(combo)
        key = tuple(round(w / top, 6) for w in combo)
        if key in seen:
            continue
        seen.add(key)
        grids.append(dict(zip(members, (w / top * 1.0 for w in combo), strict=True)))
    return grids


# --------------------------------------------------------------------------- main


def main(argv: Iterable[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=1000, help="queries per dev/test sample")
    parser.add_argument("--depth", type=int, default=50, help="hits each hybrid member adds")
    parser.add_argument("--tolerance", type=float, default=0.002)
    parser.add_argument("--cache-dir", default=None, help="embedding cache folder")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument(
        "--backends",
        default="keyword,bm25,fts5,embedding",
        help="comma-separated backends to consider (those not installed are skipped)",
    )
    args = parser.parse_args(list(argv) if argv is not None else None)
    started = time.perf_counter()

    splits = make_splits(args.queries)
    if not any(s.role == "dev" for s in splits):
        log("no public dev sets found; nothing to tune on")
        return 2
    datasets = {s.dataset.name: s.dataset for s in splits}
    # all queries of a dataset run together (one index build per dataset and backend)
    queries_of: dict[str, list[Query]] = {}
    for split in splits:
        queries_of.setdefault(split.dataset.name, []).extend(split.queries)
    tools_of = {name: {t.name: t for t in ds.tools} for name, ds in datasets.items()}

    def runs_for(make: Any, label: str) -> dict[str, Rankings]:
        out: dict[str, Rankings] = {}
        for name, dataset in datasets.items():
            t0 = time.perf_counter()
            out[name] = run_backend(make(), dataset.tools, queries_of[name], args.depth)
            log(f"  {label} on {name}: {time.perf_counter() - t0:.1f}s")
        return out

    def scores_of(
        run: Mapping[str, Rankings], roles: tuple[str, ...] = ("dev", "test"), fast: bool = False
    ) -> dict[str, dict[str, float]]:
        result = {}
        for split in splits:
            if split.role not in roles:
                continue
            wanted = {q.id: run[split.dataset.name][q.id][:SEARCH_K] for q in split.queries}
            score = fast_metrics if fast else check_against_ranx
            result[split.name] = score(split.qrels, wanted)
        return result

    # (1) embedding text fields
    field_results = []
    best_fields: tuple[str, ...] = DEFAULT_FIELDS
    member_runs: dict[str, dict[str, Rankings]] = {}
    wanted = {b.strip() for b in args.backends.split(",") if b.strip()}
    if "embedding" in wanted and installed("embedding"):
        candidates: list[Config] = []
        field_runs: dict[tuple[str, ...], dict[str, Rankings]] = {}
        for fields in FIELD_CANDIDATES:
            log(f"embedding fields {fields}")
            options = embedding_options(fields, args.cache_dir)
            field_runs[fields] = runs_for(
                lambda o=options: load_backend("embedding", **o), "embedding"
            )
            config = Config({"embedding": 1.0}, None, scores_of(field_runs[fields]))
            candidates.append(config)
            field_results.append({"fields": list(fields), **config.to_json()})
        # simplest = fewest fields among the near-best
        best = max(c.dev_score() for c in candidates)
        best_fields = min(
            (
                f
                for f, c in zip(FIELD_CANDIDATES, candidates, strict=True)
                if c.dev_score() >= best - args.tolerance
            ),
            key=len,
        )
        member_runs["embedding"] = field_runs[best_fields]
        log(f"embedding fields chosen: {best_fields}")

    # (2) single backends
    skipped: dict[str, str] = {}
    for name in LEXICAL:
        if name in wanted and installed(name):
            log(f"backend {name}")
            try:
                member_runs[name] = runs_for(lambda n=name: load_backend(n), name)
            except Exception as exc:  # a broken backend is reported, not fatal to the rest
                log(f"  skipped: {type(exc).__name__}: {exc}")
                skipped[name] = f"{type(exc).__name__}: {exc}"
    singles = [Config({name: 1.0}, None, scores_of(run)) for name, run in member_runs.items()]

    # (3) fusions
    # every configuration is scored on the dev samples; only the best few (and the chosen one)
    # are then scored on the test samples, for the report
    dev_ids = {
        ds: {q.id for s in splits if s.dataset.name == ds and s.role == "dev" for q in s.queries}
        for ds in datasets
    }

    def fused_runs(config: Config, only: Mapping[str, set[str]] | None) -> dict[str, Rankings]:
        out = {}
        for ds in datasets:
            runs = {
                m: {q: r for q, r in member_runs[m][ds].items() if only is None or q in only[ds]}
                for m in config.members
            }
            out[ds] = fuse(runs, config.members, config.k or 60, tools_of[ds])
        return out

    fusions: list[Config] = []
    names = list(member_runs)
    for size in range(2, len(names) + 1):
        for members in itertools.combinations(names, size):
            for weights in weight_grid(members):
                for k in K_GRID:
                    config = Config(dict(weights), k)
                    config.scores = scores_of(fused_runs(config, dev_ids), ("dev",), fast=True)
                    fusions.append(config)
                    if len(fusions) % 250 == 0:
                        log(f"  {len(fusions)} fusions scored")
    log(f"{len(fusions)} fusion configurations evaluated on the dev samples")
    chosen = choose(fusions, args.tolerance) if fusions else None
    top_fusions = sorted(fusions, key=lambda c: -c.dev_score())[:15]
    if chosen is not None and chosen not in top_fusions:
        top_fusions.append(chosen)
    best_of_set: dict[tuple[str, ...], Config] = {}
    for config in fusions:
        key = tuple(sorted(config.members))
        if key not in best_of_set or config.dev_score() > best_of_set[key].dev_score():
            best_of_set[key] = config
    for config in best_of_set.values():
        if config not in top_fusions:
            top_fusions.append(config)
    for config in top_fusions:
        config.scores = scores_of(fused_runs(config, None))
    top_fusions.sort(key=lambda c: -c.dev_score())
    best_per_set = {
        "+".join(key): {"label": c.label, "dev_ndcg@10_mean": round(c.dev_score(), 4)}
        for key, c in sorted(best_of_set.items(), key=lambda item: -item[1].dev_score())
    }

    # the real backend agrees with the evaluated fusion
    if chosen is not None:
        member_options = (
            {"embedding": embedding_options(best_fields, args.cache_dir, shared_encoder=False)}
            if "embedding" in chosen.members
            else {}
        )
        hybrid = HybridBackend(
            chosen.members, k=int(chosen.k or 60), depth=args.depth, member_options=member_options
        )
        check_set = next(s for s in splits if s.role == "dev")
        sample = check_set.queries[:50]
        real = run_backend(hybrid, check_set.dataset.tools, sample, SEARCH_K)
        runs = {
            m: {q.id: member_runs[m][check_set.dataset.name][q.id] for q in sample}
            for m in chosen.members
        }
        expected = fuse(runs, chosen.members, chosen.k or 60, tools_of[check_set.dataset.name])
        if real != expected:
            raise SystemExit("HybridBackend disagrees with the evaluated fusion")

    # (4) preference order of the default backend
    ranked_backends: list[tuple[float, str]] = [(c.dev_score(), c.label) for c in singles]
    if chosen is not None:
        ranked_backends.append((chosen.dev_score(), "hybrid"))
    preference = [n for _, n in sorted(ranked_backends, key=lambda p: -p[0]) if n != "keyword"]
    preference.append("keyword")

    result = {
        "benchmark": "tune_hybrid",
        "toolsearch_version": __version__,
        "python": platform.python_version(),
        "protocol": {
            "queries_per_sample": args.queries,
            "split_seed": 0,
            "member_depth": args.depth,
            "search_k": SEARCH_K,
            "metrics": list(METRICS),
            "objective": "mean ndcg@10 over dev samples",
            "tolerance": args.tolerance,
            "weight_grid": list(WEIGHT_GRID),
            "k_grid": list(K_GRID),
        },
        "datasets": {
            name: {
                "sha256": ds.sha256(),
                "tools": len(ds.tools),
                "samples": {s.name: len(s.queries) for s in splits if s.dataset.name == name},
            }
            for name, ds in datasets.items()
        },
        "embedding_fields": {"chosen": list(best_fields), "candidates": field_results},
        "singles": [c.to_json() for c in singles],
        "skipped_backends": skipped,
        "fusions_evaluated": len(fusions),
        "top_fusions": [c.to_json() for c in top_fusions],
        "best_per_member_set": best_per_set,
        "chosen_hybrid": chosen.to_json() if chosen else None,
        "default_backend_preference": preference,
        "seconds": round(time.perf_counter() - started, 1),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    per_set = sorted(best_of_set.values(), key=lambda c: -c.dev_score())
    print_table(singles, per_set, chosen, [s.name for s in splits])
    log(f"wrote {args.out}")
    return 0


def print_table(
    singles: Sequence[Config], top: Sequence[Config], chosen: Config | None, columns: Sequence[str]
) -> None:
    rows = [*singles, *top]
    if chosen is not None and chosen not in rows:
        rows.append(chosen)
    header = ["configuration", *[f"{c} ndcg@10 / R@5" for c in columns]]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for config in rows:
        mark = " **(chosen)**" if config is chosen else ""
        cells = [
            f"{config.scores[c]['ndcg@10']:.3f} / {config.scores[c]['recall@5']:.3f}"
            for c in columns
        ]
        print(f"| {config.label}{mark} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    raise SystemExit(main())
