"""The same mcp-workbench test queries searched in its own catalogue and inside 10,000 tools.

    python -m lab.distractors --out lab/results/distractors.json

A gateway with many MCP servers plugged in searches far more tools than the catalogue a
query was written for. This grows the bundled mcp-workbench catalogue to ``--tools`` (10,000)
with **distractors**: the public tool catalogues (BFCL, MetaTool, the Docker and GitHub MCP
catalogues, read from ``../shared/datasets``) and renamed instances of their servers
(:func:`toolsearch.synth.scale_catalog`, seed 0) until the size is reached. Servers of an
mcp-workbench service (``github``, ``stripe-remote``, ...) are left out of the pool, so no
distractor is another server's copy of a gold tool, and no distractor has a gold tool's name
(one tool per name). The queries, their gold tools and the split are unchanged.

Each backend (the default ``hybrid``, the default without its server bonus, without its
server support or without its action bonus, its ``embedding`` and stemmed ``bm25`` members)
ranks
the test split (at most ``--limit`` queries, the sample of the other quality benchmarks) in
both catalogues; the table gives recall@5 per query style, hit@1 and ndcg@10 over all
labelled queries, the false-positive rate on negatives, and ranx's paired t-test of the
large catalogue against the small one (p < 0.05; one pair of runs per metric). Target (the
retrieval quality issue): a recall@5 loss of at most .05.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from lab.member_runs import (
    DEPTH,
    MemberSpec,
    Sample,
    Scored,
    default_runs_dir,
    hybrid_member,
    load_sample,
)
from lab.member_runs import member_hits as cached_member_hits
from toolsearch.bench.metrics import parse_metrics, per_query_scores
from toolsearch.bench.runner import resolve_dataset
from toolsearch.bench.significance import compare_backends
from toolsearch.catalog import load_catalog
from toolsearch.synth import scale_catalog
from toolsearch.tool import Tool

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "lab" / "results" / "distractors.json"
POOL = ("bfcl", "metatool", "mcp-docker-catalog", "mcp-github-catalog")
BACKENDS: Mapping[str, MemberSpec] = {
    "default (hybrid)": MemberSpec("hybrid", "hybrid", {}),
    "default without server bonus": MemberSpec("hybrid", "hybrid", {"server_bonus": 0.0}),
    "default without server support": MemberSpec("hybrid", "hybrid", {"server_support": 0.0}),
    "default without action bonus": MemberSpec("hybrid", "hybrid", {"action_bonus": 0.0}),
    "embedding": MemberSpec("embedding", "embedding", {}),
    "bm25_stem": hybrid_member("bm25s", "bm25"),
}
METRICS = ("recall@5", "hit@1", "ndcg@10")
TESTED = ("recall@5", "ndcg@10")
STYLE_METRIC = "recall@5"
MAX_LOSS = 0.05


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _same_service(server: str | None, servers: set[str]) -> bool:
    """Whether ``server`` names one of ``servers`` (``stripe-remote`` is ``stripe``)."""
    return server is not None and bool(set(re.split(r"[-_.]", server.lower())) & servers)


def distractors(own: Sequence[Tool], size: int) -> list[Tool]:
    """``size - len(own)`` public tools and renamed copies, none of an ``own`` service and
    none with an ``own`` name; one tool per name."""
    servers = {tool.server.lower() for tool in own if tool.server}
    pool = [
        tool
        for name in POOL
        for tool in load_catalog(resolve_dataset(name))
        if not _same_service(tool.server, servers)
    ]
    wanted = size - len(own)
    seen = {tool.name for tool in own}
    kept: list[Tool] = []
    for tool in scale_catalog(pool, 2 * wanted, seed=0):
        if tool.name not in seen and not _same_service(tool.server, servers):
            seen.add(tool.name)
            kept.append(tool)
    return kept[:wanted]


def samples(limit: int | None, size: int, split: str = "test") -> tuple[Sample, Sample]:
    """The ``split`` sample in its own catalogue and in a catalogue of ``size`` tools."""
    small = load_sample("mcp-workbench", split, limit)
    tools = [*small.dataset.tools, *distractors(small.dataset.tools, size)]
    big = replace(small.dataset, name=f"mcp-workbench+{size}", tools=tools, path=None)
    return small, Sample(big, small.split, small.queries)


def _names(hits: Mapping[str, Scored]) -> dict[str, list[str]]:
    return {qid: [tool for tool, _ in found] for qid, found in hits.items()}


def _means(sample: Sample, run: Mapping[str, list[str]]) -> dict[str, float]:
    qrels = sample.qrels
    per_query = per_query_scores(qrels, run, parse_metrics(METRICS), groups=sample.groups)
    out = {m: round(sum(per_query[m][q] for q in qrels) / len(qrels), 4) for m in METRICS}
    styles: dict[str, list[str]] = {}
    for query in sample.queries:
        if query.id in qrels and query.style:
            styles.setdefault(query.style, []).append(query.id)
    for style, ids in sorted(styles.items()):
        values = [per_query[STYLE_METRIC][q] for q in ids]
        out[f"{style} {STYLE_METRIC}"] = round(sum(values) / len(values), 4)
    negatives = [q.id for q in sample.queries if not sample.is_positive(q)]
    if negatives:
        out["false_positive_rate"] = round(sum(1 for q in negatives if run[q]) / len(negatives), 4)
    return out


def measure(small: Sample, big: Sample, limit: int, cache: Path) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for label, spec in BACKENDS.items():
        runs = {
            "own": _names(cached_member_hits(small, spec, limit=limit, cache=cache)),
            "10k": _names(cached_member_hits(big, spec, limit=limit, cache=cache)),
        }
        tests = compare_backends(
            small.qrels, runs, parse_metrics(TESTED), depth=DEPTH, groups=small.groups
        )
        out[label] = {
            "own": _means(small, runs["own"]),
            "large": _means(big, runs["10k"]),
            "significant": {p.metric: p.significant for p in tests.pairs},
            "test": tests.describe(),
        }
        log(f"{label}: {out[label]['own']} -> {out[label]['large']}")
    return out


def markdown(data: Mapping[str, Any]) -> str:
    """Rows: backend x catalogue; columns: every measured figure; then the target's verdict."""
    results = data["results"]
    columns = list(next(iter(results.values()))["own"])
    size = data["tools"]
    lines = [
        "| backend | catalogue | " + " | ".join(columns) + " |",
        "|---|---|" + "---:|" * len(columns),
    ]
    for label, result in results.items():
        for key, shown in (("own", f"own ({data['own_tools']})"), ("large", f"{size:,}")):
            cells = []
            for column in columns:
                mark = "*" if key == "large" and result["significant"].get(column) else ""
                cells.append(f"{result[key][column]:.3f}{mark}")
            lines.append(f"| {label} | {shown} | " + " | ".join(cells) + " |")
    default = results["default (hybrid)"]
    loss = default["own"]["recall@5"] - default["large"]["recall@5"]
    verdict = "met" if loss <= MAX_LOSS else "missed"
    lines += [
        "",
        f"`*`: differs from the own catalogue (recall@5 and ndcg@10): {default['test']}. "
        f"mcp-workbench test split, {data['queries']} queries. The "
        f"default's recall@5 loss inside {size:,} tools: {loss:.3f} (target ≤ {MAX_LOSS}: "
        f"{verdict}).",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--tools", type=int, default=10_000, help="size of the large catalogue")
    parser.add_argument("--limit", type=int, default=1000, help="test queries")
    parser.add_argument("--cache", type=Path, default=default_runs_dir())
    args = parser.parse_args(argv)
    small, big = samples(args.limit, args.tools)
    if len(big.dataset.tools) != args.tools:
        raise SystemExit(f"the pool gives {len(big.dataset.tools)} tools, not {args.tools}")
    data = {
        "tools": args.tools,
        "own_tools": len(small.dataset.tools),
        "queries": len(small.queries),
        "results": measure(small, big, args.limit, args.cache),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    print(markdown(data))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
