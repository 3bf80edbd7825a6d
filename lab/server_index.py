"""Servers as a first-class index beside the tools, and camel-case brand names read whole.

    python -m lab.server_index --out lab/results/server_index.json

Two questions of issue 54, each answered by replaying the cached member rankings of the
default's three members through :class:`toolsearch.fusion.Fuser` (as ``lab/ablation.py`` does):

* **Brand names** (no setting): "GitHub" in a request was read as ``github``, ``git`` and
  ``hub``, so a server called ``git`` was named by every GitHub request. The default now reads
  a camel-case request word whole when the catalogue knows it
  (:func:`toolsearch.tokenize.query_tokens`). Rows: the default with the previous reading (the
  lexical members and the fusion's request words both, rankings cached apart) against the
  default, on every dev and test split.
* **A server index** (one weight, chosen on dev). Each server — a tool's ``server``, else the
  API prefix of a dotted name (``uber.ride``: ``uber``; :func:`sibling_group`), else none (a
  flat catalogue is left as it is) — is a document: its service words, then each tool's
  name words and description. A request scores every server lexically (stemmed BM25 over
  the server documents, divided by the best) and densely (cosine with the centroid of the
  server's tool vectors, min-max scaled over the servers), fused as the tools are (0.7 dense,
  0.3 lexical, :func:`toolsearch.fusion.convex_fuse`), and every tool gains ``weight`` times its
  server's score, on the whole request and each step — the joint server and tool scoring of
  Tool-to-Agent Retrieval (arXiv 2511.01854) in the form of the default's server support. The
  weight is chosen on the dev splits by mean ndcg@10 (the current setting, none, stays
  unless another beats it by more than ``CHOICE_MARGIN``); test splits are reported, and
  leave-one-dataset-out: the weight chosen on the other datasets' dev splits, scored on the
  left-out test split.

Datasets: mcp-workbench, MetaTool, BFCL, mcp-workbench inside 10,000 tools (its dev and test
queries among the distractors of ``lab/distractors.py``), and the public catalogues with
servers or API groups (Gorilla API Zoo, RestBench, ToolAlpaca, NESTFUL; SGD, whose servers
are numbered copies of its services, was not run for lack of time). Every split is
scored with the shipped model: no fold model (``lab/broad_model.py``) was at hand, so the dev
splits of the eleven datasets it trained on are in-domain for the embedding member (the
weight is chosen where the dense evidence is at its best, which favours no server index
over one). Per dataset: hit@1, hit@5, recall@5, ndcg@10 and the **server-first rate**, the
share of labelled requests whose first hit is a tool of a gold tool's server (requests whose
gold tools have a server or API group); ranx paired t-tests (p < 0.05) against the default.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np

from lab import ablation
from lab.distractors import samples as distractor_samples
from lab.member_runs import MemberSpec, Sample, load_sample
from toolsearch.backend import Hit
from toolsearch.backends.bm25 import BM25Backend
from toolsearch.backends.embedding import EmbeddingBackend
from toolsearch.backends.fine_tuning import sibling_group
from toolsearch.bench.metrics import parse_metrics, per_query_scores
from toolsearch.fusion import Fuser, NameWords, convex_fuse
from toolsearch.query import ParsedQuery, parse_query
from toolsearch.tokenize import service_words, split_tool_name, tokenize
from toolsearch.tool import Tool

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "lab" / "results" / "server_index.json"
LIMIT = 1000
#: The datasets: the ablation's three, the large catalogue, the public ones with servers.
DATASETS = (
    "mcp-workbench",
    "metatool",
    "bfcl",
    ablation.LARGE,
    "gorilla-apizoo",
    "restbench",
    "toolalpaca-eval",
    "nestful",
)
#: The settings tried on dev: how tools are grouped (``servers``: by their ``server``;
#: ``API groups``: also by the API prefix of a dotted name) and the weight of a tool's group's
#: score. No setting (the default) is no server index.
SETTINGS: tuple[tuple[str, float], ...] = (
    *(("servers", w) for w in (0.1, 0.2, 0.3, 0.5)),
    ("API groups", 0.1),
)
#: The server index's members, weighted as the default weighs dense and lexical evidence.
SERVER_MEMBERS = {"embedding": 0.7, "bm25": 0.3}
SERVER_METHODS = {"embedding": "minmax", "bm25": "max"}
METRICS = ("hit@1", "hit@5", "recall@5", "ndcg@10")
DEFAULT = "default"
BEFORE = "default, camel-case words split (before)"
#: The reading of camel-case request words before issue 54, cached under its own labels.
SPLIT_TAG = ".camel-parts"


# --------------------------------------------------------------------------- the readings


@contextmanager
def camel_parts_kept() -> Iterator[None]:
    """Read every camel-case request word by its parts too, as before (lexical members and the
    fusion's request words alike)."""
    nothing: frozenset[str] = frozenset()
    with (
        mock.patch("toolsearch.fusion.vocabulary", return_value=nothing),
        mock.patch.object(BM25Backend, "known_words", property(lambda self: nothing)),
    ):
        yield


def members(name: str, split: str, tag: str = "") -> dict[str, MemberSpec]:
    """The default's three members on ``name``'s ``split`` with the shipped model; ``tag``
    keeps the lexical members' rankings of another reading apart."""
    found = ablation.members_for(name, split, LIMIT, fold=False)
    kept = {m: s for m, s in found.items() if m == "embedding" or m in ablation.LEXICAL_SHARES}
    return {m: replace(s, label=s.label + tag) if m != "embedding" else s for m, s in kept.items()}


def sample_of(name: str, split: str) -> Sample:
    if name == ablation.LARGE:
        return distractor_samples(LIMIT, ablation.LARGE_TOOLS, split)[1]
    return load_sample(name, split, LIMIT)


def load(name: str, split: str, cache: Path) -> tuple[ablation.Data, ablation.Data]:
    """``name``'s ``split`` read as the default reads it, and as it was read before."""
    sample = sample_of(name, split)
    now = ablation.sample_data(sample, members(name, split), LIMIT, cache)
    with camel_parts_kept():
        before = ablation.sample_data(sample, members(name, split, SPLIT_TAG), LIMIT, cache)
    return now, before


# --------------------------------------------------------------------------- server index


def server_document(home: str, tools: Sequence[Tool]) -> Tool:
    """A server as one document: its service words, then each tool's name and description."""
    words = service_words(tokenize(home))
    parts = [" ".join(words)]
    for tool in tools:
        parts += [" ".join(split_tool_name(tool.name)[1]), tool.description]
    return Tool(f"server:{home}", "\n".join(parts))


@dataclass
class ServerIndex:
    """The servers of a catalogue, scored per request text lexically and densely."""

    group: dict[str, str]
    lexical: BM25Backend
    centroids: np.ndarray
    homes: list[str]
    vectors: Mapping[str, np.ndarray]
    memo: dict[str, dict[str, float]] = field(default_factory=dict)

    def scores(self, text: str) -> dict[str, float]:
        """``{server: score in [0, 1]}`` for a request text (memoised)."""
        found = self.memo.get(text)
        if found is not None:
            return found
        query = parse_query(text)
        lexical = self.lexical.search(query, len(self.homes))
        vector = self.vectors.get(text)
        dense: list[Hit] = []
        if vector is not None:
            cosines = self.centroids @ vector
            order = np.argsort(-cosines)
            dense = [Hit(f"server:{self.homes[i]}", float(cosines[i])) for i in order]
        fused = convex_fuse({"embedding": dense, "bm25": lexical}, SERVER_MEMBERS, SERVER_METHODS)
        self.memo[text] = found = {name.removeprefix("server:"): s for name, s in fused.items()}
        return found


def query_vectors(sample: Sample, texts: Sequence[str], cache: Path) -> dict[str, np.ndarray]:
    """The embedding member's vector of each text (cached beside the member rankings)."""
    spec = ablation.MEMBERS["embedding"]
    digest = hashlib.sha256("\n".join(texts).encode()).hexdigest()[:12]
    backend = EmbeddingBackend(**dict(spec.options))
    file = cache / f"{sample.dataset.name}.{sample.split}.vectors.{spec.key(backend)}.{digest}.npz"
    if file.is_file():
        stored = np.load(file)
        return dict(zip(texts, stored["vectors"], strict=True))
    ablation.log(f"encoding {len(texts)} texts of {sample.name}")
    backend.remember_queries(list(texts))
    matrix = np.stack([backend.query_vector(text) for text in texts])
    file.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(file, vectors=matrix)
    return dict(zip(texts, matrix, strict=True))


def group_of(tool: Tool, grouping: str) -> str | None:
    """The group of ``tool`` in ``grouping`` (see :data:`SETTINGS`)."""
    return sibling_group(tool) if grouping == "API groups" else tool.server


def server_index(data: ablation.Data, cache: Path, grouping: str) -> ServerIndex | None:
    """The server index of ``data``'s catalogue (None: no tool has a group)."""
    tools = list(data.sample.dataset.tools)
    group = {tool.name: home for tool in tools if (home := group_of(tool, grouping))}
    if not group:
        return None
    by_home: dict[str, list[Tool]] = {}
    for tool in tools:
        if tool.name in group:
            by_home.setdefault(group[tool.name], []).append(tool)
    homes = sorted(by_home)
    lexical = BM25Backend(param_descriptions=False)
    lexical.index([server_document(home, by_home[home]) for home in homes])
    member = EmbeddingBackend(**dict(ablation.MEMBERS["embedding"].options))
    position = {tool.name: i for i, tool in enumerate(tools)}
    matrix = member.encode_tools(tools)
    centroids = np.stack([matrix[[position[t.name] for t in by_home[h]]].mean(0) for h in homes])
    centroids /= np.linalg.norm(centroids, axis=1, keepdims=True)
    texts = [q.text for q in data.sample.queries]
    texts += [step for steps in data.steps.values() if len(steps) > 1 for step in steps]
    vectors = query_vectors(data.sample, list(dict.fromkeys(texts)), cache)
    return ServerIndex(group, lexical, centroids, homes, vectors)


@dataclass(frozen=True)
class ServerIndexFuser(Fuser):
    """The default's fusion, then every tool plus ``server_weight`` times its server's score."""

    server_weight: float = 0.0
    index: ServerIndex | None = None

    def fuse(
        self,
        query: ParsedQuery,
        hits: Mapping[str, Sequence[Hit]],
        names: Mapping[str, NameWords],
        k: int | None = None,
    ) -> dict[str, float]:
        fused = super().fuse(query, hits, names, k)
        if not self.server_weight or self.index is None:
            return fused
        servers, group = self.index.scores(query.raw), self.index.group
        weight = self.server_weight
        return {n: s + weight * servers.get(group.get(n, ""), 0.0) for n, s in fused.items()}


def with_server_index(weight: float, index: ServerIndex | None) -> ablation.Variant:
    default = ablation.shipped_variant()
    fields = {name: getattr(default.fuser, name) for name in Fuser.__dataclass_fields__}
    fuser = ServerIndexFuser(**fields, server_weight=weight, index=index)
    return replace(default, name=f"server index {weight}", fuser=fuser)


def variant_name(setting: tuple[str, float] | None) -> str:
    """The name of a setting's runs (None: the default)."""
    return DEFAULT if setting is None else f"{setting[0]} {setting[1]}"


# --------------------------------------------------------------------------- scoring


def server_first(data: ablation.Data, run: Mapping[str, Sequence[Hit]]) -> dict[str, Any]:
    """The share of labelled requests whose first hit is a tool of a gold tool's server or API
    group (requests whose gold tools have none left out)."""
    group = {tool.name: sibling_group(tool) for tool in data.sample.dataset.tools}
    asked = {
        qid: {group[name] for name in gold if group.get(name)}
        for qid, gold in data.sample.qrels.items()
    }
    ids = [qid for qid, homes in asked.items() if homes]
    if not ids:
        return {"queries": 0}
    first = sum(bool(run[q]) and group.get(run[q][0].name) in asked[q] for q in ids)
    return {"queries": len(ids), "rate": round(first / len(ids), 4)}


def measured(data: ablation.Data, run: Mapping[str, Sequence[Hit]]) -> dict[str, Any]:
    qrels = data.sample.qrels
    names = {qid: [h.name for h in hits] for qid, hits in run.items()}
    per_query = per_query_scores(qrels, names, parse_metrics(METRICS), groups=data.sample.groups)
    means = {m: round(sum(per_query[m][q] for q in qrels) / len(qrels), 4) for m in METRICS}
    return means | {"server_first": server_first(data, run)}


def compared(
    data: ablation.Data, runs: Mapping[str, Mapping[str, Sequence[Hit]]]
) -> dict[str, Any]:
    return {
        "queries": len(data.sample.qrels),
        "scores": {name: measured(data, run) for name, run in runs.items()},
        "versus_default": ablation.significance(data, runs, DEFAULT),
    }


def split_results(name: str, split: str, cache: Path) -> dict[str, Any]:
    """Every variant on ``name``'s ``split``: the previous reading, and each server weight."""
    now, before = load(name, split, cache)
    runs: dict[str, Mapping[str, Sequence[Hit]]] = {
        DEFAULT: ablation.rank(now, ablation.shipped_variant()),
    }
    with camel_parts_kept():
        runs[BEFORE] = ablation.rank(before, ablation.shipped_variant())
    indexes = {g: server_index(now, cache, g) for g in dict.fromkeys(g for g, _ in SETTINGS)}
    for grouping, weight in SETTINGS:
        index = indexes[grouping]
        runs[variant_name((grouping, weight))] = (
            ablation.rank(now, with_server_index(weight, index)) if index else runs[DEFAULT]
        )
    result = compared(now, runs)
    ablation.log(
        f"{name} {split}: "
        + ", ".join(f"{v} {s['ndcg@10']:.4f}" for v, s in result["scores"].items())
    )
    return result


def dev_means(dev: Mapping[str, Mapping[str, Any]], datasets: Sequence[str]) -> dict[str, float]:
    """Mean dev ndcg@10 over ``datasets`` of the default and of every setting."""
    names = [DEFAULT, *(variant_name(s) for s in SETTINGS)]
    return {n: sum(dev[d]["scores"][n]["ndcg@10"] for d in datasets) / len(datasets) for n in names}


def chosen(dev: Mapping[str, Mapping[str, Any]], datasets: Sequence[str]) -> str:
    """The setting of the best mean dev ndcg@10 over ``datasets`` (the smaller weight on a
    tie); the default unless it beats the default by more than ``CHOICE_MARGIN``."""
    means = dev_means(dev, datasets)
    best = max(means, key=lambda n: means[n])
    return best if means[best] > means[DEFAULT] + ablation.CHOICE_MARGIN else DEFAULT


def measure(cache: Path, datasets: Sequence[str] = DATASETS) -> dict[str, Any]:
    dev = {name: split_results(name, "dev", cache) for name in datasets}
    test = {name: split_results(name, "test", cache) for name in datasets}
    return summary(dev, test)


def summary(dev: Mapping[str, Any], test: Mapping[str, Any]) -> dict[str, Any]:
    """The dev and test results with the settings chosen on dev, overall and per left-out
    dataset."""
    datasets = list(dev)
    lodo: dict[str, Any] = {}
    for held in datasets:
        others = [d for d in datasets if d != held and not _same_catalogue(d, held)]
        lodo[held] = {"setting": chosen(dev, others), "chosen_on": others}
        lodo[held]["test"] = test[held]["scores"][lodo[held]["setting"]]
    return {
        "limit": LIMIT,
        "settings": [variant_name(s) for s in SETTINGS],
        "dev_means": dev_means(dev, datasets),
        "chosen": chosen(dev, datasets),
        "dev": dev,
        "test": test,
        "lodo": lodo,
    }


def _same_catalogue(a: str, b: str) -> bool:
    """mcp-workbench and mcp-workbench inside 10,000 tools share their queries."""
    return {a, b} == {"mcp-workbench", ablation.LARGE}


# --------------------------------------------------------------------------- report


def _cell(result: Mapping[str, Any], variant: str, metric: str) -> str:
    value = result["scores"][variant][metric]
    test = result["versus_default"].get(variant, {}).get(metric)
    return f"{value:.3f}{'*' if test and test['significant'] else ''}"


def _first(result: Mapping[str, Any], variant: str) -> str:
    found = result["scores"][variant]["server_first"]
    return f"{found['rate']:.3f}" if found["queries"] else "-"


def reading_table(data: Mapping[str, Any]) -> str:
    """Brand names: the previous reading against the default, every split."""
    lines = [
        "| dataset | split | queries | ndcg@10 before / now | recall@5 | hit@1 | hit@5 "
        "| server first |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for split in ("dev", "test"):
        for name, result in data[split].items():
            cells = [
                f"{_cell(result, BEFORE, m)} / {_cell(result, DEFAULT, m)}"
                for m in ("ndcg@10", "recall@5")
            ]
            cells += [
                f"{result['scores'][BEFORE][m]:.3f} / {result['scores'][DEFAULT][m]:.3f}"
                for m in ("hit@1", "hit@5")
            ]
            cells.append(f"{_first(result, BEFORE)} / {_first(result, DEFAULT)}")
            lines.append(f"| {name} | {split} | {result['queries']} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "Before: camel-case request words read by their parts too (`GitHub`: github, git, hub); "
        "now: read whole where the catalogue knows the word. The default otherwise as it ships, "
        "shipped model on every split, no abstention. `*`: differs from the default (ranx "
        "paired t-test, p < 0.05, ndcg@10 and recall@5). Server first: the share of requests "
        "whose first hit is a tool of a gold tool's server or API group.",
    ]
    return "\n".join(lines)


def markdown(data: Mapping[str, Any]) -> str:
    """The server index: dev ndcg@10 per setting, then test and leave-one-dataset-out."""
    names = [DEFAULT, *data["settings"]]
    lines: list[str] = []
    for split in ("dev", "test"):
        lines += [
            f"| dataset ({split}) | queries | " + " | ".join(names) + " |",
            "|---|---:|" + "---:|" * len(names),
        ]
        for name, result in data[split].items():
            cells = [_cell(result, n, "ndcg@10") for n in names]
            lines.append(f"| {name} | {result['queries']} | " + " | ".join(cells) + " |")
        if split == "dev":
            means = data["dev_means"]
            lines.append("| mean | | " + " | ".join(f"{means[n]:.4f}" for n in names) + " |")
        lines.append("")
    lines += [
        "ndcg@10 of each setting, dev splits (which choose) and test splits; `*`: differs "
        "from the default (ranx paired t-test, p < 0.05).",
    ]
    lines += [
        "",
        "| dataset (test) | setting (LODO) | hit@1 default / LODO | hit@5 | recall@5 | ndcg@10 "
        "| server first |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for name, result in data["test"].items():
        setting = data["lodo"][name]["setting"]
        cells = [
            f"{_cell(result, DEFAULT, m)} / {_cell(result, setting, m)}"
            for m in ("hit@1", "hit@5", "recall@5", "ndcg@10")
        ]
        cells.append(f"{_first(result, DEFAULT)} / {_first(result, setting)}")
        lines.append(f"| {name} | {setting} | " + " | ".join(cells) + " |")
    lines += [
        "",
        f"Setting chosen on all dev splits: {data['chosen']} (the default, no server index, "
        f"stays unless a setting beats it by more than {ablation.CHOICE_MARGIN} mean dev "
        "ndcg@10). `servers w`: each tool with a server gains w times its server's score "
        "(0.7 x the cosine with the centroid of the server's tool vectors, min-max scaled over "
        "the servers, + 0.3 x stemmed BM25 over the server documents, divided by the best); "
        "`API groups w`: the same with the tools of a flat catalogue grouped by the prefix of "
        "a dotted name (`uber.ride`: `uber`). LODO: the setting chosen on the other datasets' "
        "dev splits (mcp-workbench and mcp-workbench inside 10,000 tools leave each other out "
        "too), scored on the left-out test split. `*`: differs from the default (ranx paired "
        "t-test, p < 0.05; hit@1 and hit@5 untested). Server first: the share of requests whose "
        "first hit is a tool of a gold tool's server or API group. Shipped model on every "
        f"split, at most {data['limit']} queries a split, no abstention.",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    return ablation.replay_script(argv, __doc__ or "", OUT, measure, markdown)


if __name__ == "__main__":
    raise SystemExit(main())
