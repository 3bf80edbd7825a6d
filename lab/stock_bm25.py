"""The ``bm25`` backend against the stock library a user would pick instead: bm25s.

    python -m lab.stock_bm25 --out lab/results/stock_bm25.json
    python -m lab.stock_bm25 --split dev --out stock_bm25_dev.json   # where choices are made

On the **test** split of every labelled dataset (at most 1,000 queries each; ``--split dev``
for the dev split), four rankings: ``bm25s`` as its README sets it up (its English stop words
and PyStemmer's English Snowball stemmer, Lucene BM25 at k1 1.5, b 0.75) over each tool's name,
description, parameter names and parameter descriptions as the embedding backend writes them
(``tool_text``); and the ``bm25`` backend on the words of its fields only, as first (no
stemming, no stop words: ``plain``), with ``stem`` and ``stopwords`` on (``stemmed``, the
hybrid's stemmed member), and with parameter descriptions counted as description words too
(``described``, the backend's default). ranx paired t-tests of ``described`` against each
other ranking, p < 0.05. Needs the ``lab`` extra (bm25s) and the public datasets.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from lab.broad_lodo import METRICS, scored
from lab.broad_model import SOURCES
from lab.member_runs import DEPTH, MemberSpec, Sample, load_sample, member_hits
from toolsearch.backends.embedding import DEFAULT_FIELDS
from toolsearch.backends.tool_text import tool_text

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "lab" / "results" / "stock_bm25.json"
LIMIT = 1000
_WORDS_ONLY = {"param_descriptions": False}
MEMBERS = {
    "plain": MemberSpec("bm25-plain", "bm25", {"stem": False, "stopwords": False, **_WORDS_ONLY}),
    "stemmed": MemberSpec("bm25-stemmed", "bm25", {"stem": True, "stopwords": True, **_WORDS_ONLY}),
    "described": MemberSpec("bm25-described", "bm25", {}),
}


def stock_ranked(sample: Sample) -> dict[str, list[str]]:
    """bm25s's ranking of ``sample``'s labelled queries, set up as its README does."""
    import bm25s
    import Stemmer

    stemmer = Stemmer.Stemmer("english")
    tools = list(sample.dataset.tools)
    corpus = [tool_text(tool, DEFAULT_FIELDS, None) for tool in tools]
    retriever = bm25s.BM25()
    retriever.index(bm25s.tokenize(corpus, stopwords="en", stemmer=stemmer, show_progress=False))
    queries = [q for q in sample.queries if sample.is_positive(q)]
    tokens = bm25s.tokenize([q.text for q in queries], stopwords="en", stemmer=stemmer)
    depth = min(DEPTH, len(tools))
    found, _ = retriever.retrieve(tokens, k=depth, show_progress=False, n_threads=1)
    return {q.id: [tools[j].name for j in row] for q, row in zip(queries, found, strict=True)}


def measure(limit: int = LIMIT, split: str = "test") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in SOURCES:
        sample = load_sample(name, split, limit)
        runs = {"bm25s": stock_ranked(sample)}
        for label, spec in MEMBERS.items():
            hits = member_hits(sample, spec, limit=limit)
            runs[label] = {q: [n for n, _ in hits[q]] for q in sample.qrels}
        out[name] = scored(sample, runs, "described")
    return {"benchmark": "stock_bm25", "limit": limit, "split": split, "datasets": out}


def markdown(data: dict[str, Any]) -> str:
    names = ("bm25s", "plain", "stemmed", "described")
    split = data.get("split", "test")
    lines = [
        f"| dataset ({split}) | queries | ndcg@10 bm25s / plain / stemmed / described "
        "| recall@5 | hit@1 |",
        "|---|---:|---:|---:|---:|",
    ]
    for dataset, got in data["datasets"].items():
        cells = []
        for metric in METRICS:
            values = " / ".join(f"{got['means'][n][metric]:.3f}" for n in names)
            marks = "".join(
                mark
                for n, mark in (("bm25s", "†"), ("stemmed", "*"))
                if got["versus"][n][metric]["significant"]
            )
            cells.append(values + (f" {marks}" if marks else ""))
        lines.append(f"| {dataset} | {got['queries']} | {' | '.join(cells)} |")
    lines += [
        "",
        "`bm25s`: the stock library with its English stop words and Snowball stemmer over the "
        "tool's name, description, parameter names and parameter descriptions; `plain`: the "
        "`bm25` backend on its fields' words without stemming or stop words; `stemmed`: with "
        "both (the hybrid's stemmed member); `described`: parameter descriptions counted too "
        "(the backend's default). After the values, `†`: `described` differs from bm25s, `*`: "
        "from stemmed (paired t-test, p < 0.05).",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--limit", type=int, default=LIMIT)
    parser.add_argument("--split", choices=("dev", "test"), default="test")
    args = parser.parse_args(argv)
    data = measure(args.limit, args.split)
    args.out.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    print(markdown(data))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
