"""Ablation of the default backend's retrieval techniques, and the choice of its settings.

    python -m lab.ablation            # writes lab/results/ablation.json
    python -m lab.ablation --limit 300 --cache /tmp/runs

Protocol (see ``lab/retrieval.md``):

* Datasets ``mcp-workbench`` (bundled), ``metatool`` and ``bfcl`` (``../shared/datasets``);
  each split by :func:`toolsearch.splits.split_of`, at most ``--limit`` (1,000) queries per
  split, the hash-ordered sample of :func:`toolsearch.bench.runner.sample_queries`.
* Every member backend runs once per dataset and split at depth 100 through its ``search``
  (:mod:`member_runs`, cached on disk); every variant then replays the cached member hits
  through :class:`toolsearch.fusion.Fuser` — the code :class:`HybridBackend` runs — so the
  numbers are those of the real backend. The script checks this on a sample of queries.
* Settings (the convex weight of the embedding member, the name-match weight, the server
  bonus, the server support, the action bonus, the abstention threshold) are chosen on the
  **dev** splits only: the best mean ndcg@10 over the three dev sets (for the server support
  and the action bonus, also over mcp-workbench's dev split inside 10,000 tools,
  :mod:`distractors`: the setting they are for);
  **test** splits are reported. Leave-one-dataset-out (LODO): the same choice made on the
  two other datasets' dev splits, scored on the left-out dataset's test split.
* Metrics per dataset and query style: recall@5, hit@1, ndcg@10 (ranx), every query scored by
  its groups of alternative gold tools as ``toolsearch bench`` scores it; significance: ranx's
  paired two-sided t-test of every variant against the previous default (RRF), p < 0.05.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from lab import broad_model
from lab.distractors import MAX_LOSS as MAX_LARGE_LOSS
from lab.distractors import samples as distractor_samples
from lab.member_runs import (
    DATASETS,
    DEPTH,
    MemberSpec,
    Sample,
    Scored,
    default_runs_dir,
    hybrid_member,
    load_sample,
    member_hits,
)
from lab.script import table_script
from toolsearch.backend import Hit
from toolsearch.backends.encoders import DEFAULT_MODEL, TUNED_MODEL
from toolsearch.backends.hybrid import (
    DEFAULT_ACTION_BONUS,
    DEFAULT_MEMBERS,
    DEFAULT_NAME_WEIGHT,
    DEFAULT_SERVER_BONUS,
    DEFAULT_SERVER_SUPPORT,
)
from toolsearch.backends.hybrid import DEFAULT_EXACT_NAME_BONUS as EXACT_NAME_BONUS
from toolsearch.backends.hybrid import DEFAULT_STEP_DEPTH as STEP_DEPTH
from toolsearch.bench.metrics import parse_metrics, per_query_scores
from toolsearch.bench.significance import compare_backends
from toolsearch.fusion import Fuser, NameWords, name_table, name_words
from toolsearch.multistep import Ranking, merge_steps, split_steps
from toolsearch.query import parse_query

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "lab" / "results" / "ablation.json"
METRICS = ("recall@5", "hit@1", "ndcg@10")
#: What is computed: ``METRICS`` plus complete@5, reported for multi-step tasks.
SCORED = (*METRICS, "complete@5")
SPLITS = ("dev", "test")
OBJECTIVE = "ndcg@10"
#: Members every variant draws on.
MEMBERS: Mapping[str, MemberSpec] = {
    "keyword": MemberSpec("keyword", "keyword", {}),
    # the lexical and embedding members as the default hybrid runs them (int8 embedding)
    "bm25": hybrid_member("bm25", "bm25_unstemmed"),
    "bm25_stem": hybrid_member("bm25s", "bm25"),
    "fts5": MemberSpec("fts5", "fts5", {}),
    "embedding": hybrid_member("embedding", "embedding"),
}
EMBEDDING_GRID = (0.5, 0.55, 0.6, 0.65, 0.7, 0.75)
NAME_GRID = (0.0, 0.1, 0.2, 0.4)
#: What a tool whose server the query names may gain; chosen after the weights, with them.
SERVER_GRID = (0.0, 0.1, 0.2, 0.3, 0.5)
#: The share of its server's best score a tool may gain; chosen after the server bonus.
SUPPORT_GRID = (0.0, 0.3, 0.5, 0.8, 1.0)
#: What a tool whose name shares an action class with the request may gain; chosen last.
ACTION_GRID = (0.0, 0.05, 0.1, 0.15, 0.2, 0.3)
#: mcp-workbench inside this many tools (:mod:`distractors`): a dev set of the server support.
LARGE_TOOLS = 10_000
LARGE = f"mcp-workbench+{LARGE_TOOLS}"
#: The backend's current setting stays unless a grid point beats its mean dev ndcg@10 by more
#: than this: smaller differences are noise on about 1,000 queries per set, and a default that
#: moves with every retrained model is no default.
CHOICE_MARGIN = 0.001
#: The exact-name bonus as a tier: above any fused score.
EXACT_TIER = 1.0
#: Split of the lexical share between stemmed and unstemmed bm25 in the default.
LEXICAL_SHARES = {"bm25_stem": 4 / 7, "bm25": 3 / 7}
#: The same split with fts5 as the unstemmed member, as the default had it before.
FTS5_SHARES = {"bm25_stem": 4 / 7, "fts5": 3 / 7}
#: The default hybrid's name for each member of this script.
HYBRID_LABELS = {"bm25_stem": "bm25", "bm25": "bm25_unstemmed"}
#: The highest recall@5 the abstention threshold may cost on any dev set.
ABSTAIN_MAX_COST = 0.01
ABSTAIN_GRID = tuple(round(0.10 + 0.01 * i, 2) for i in range(26))
#: The default's row of the ablation, the row before it, and its fusion with one search per
#: request.
DEFAULT_VARIANT = "+ action agreement (default)"
SUPPORT_VARIANT = "+ server support"
SERVER_NAMED_VARIANT = "+ server named"
MULTISTEP_VARIANT = "+ multi-step"
ONE_SEARCH_VARIANT = "+ exact-name bonus"
FTS5_VARIANT = "default with fts5 for unstemmed bm25"
STEP_DEPTH_VARIANT = f"default with steps at depth {DEPTH}"
MULTISTEP_TITLE = "Multi-step search against one search per request"
SERVER_TITLE = "The server-named bonus against none"
SUPPORT_TITLE = "Server support against none"
ACTION_TITLE = "The action bonus against none"
UNSTEMMED_TITLE = "Unstemmed bm25 as the third member against fts5"
STEP_DEPTH_TITLE = f"Steps ranked from {STEP_DEPTH} hits per member against {DEPTH}"
#: The floors the default is held to on the test splits, as it ships (abstaining):
#: ``(what, set, group, metric, floor)``.
TARGET_FLOORS = (
    ("`keywords` hit@1", "mcp-workbench", "keywords", "hit@1", 0.95),
    ("recall@5", "mcp-workbench", "all", "recall@5", 0.93),
    ("`hard` recall@5", "mcp-workbench", "hard", "recall@5", 0.85),
    ("`task` recall@5", "mcp-workbench", "task", "recall@5", 0.70),
    ("ndcg@10", "metatool", "all", "ndcg@10", 0.80),
    ("ndcg@10", "bfcl", "all", "ndcg@10", 0.87),
)
#: Ceilings: how far the default may fall below a member alone (any set and style), the share
#: of negatives it may offer a tool and the recall@5 abstaining may cost a test split (the
#: recall@5 it may lose inside :data:`LARGE_TOOLS` tools is the distractors script's).
MAX_MEMBER_GAP = 0.01
MAX_FALSE_POSITIVE_RATE = 0.10
MAX_REFUSAL_COST = 0.02
#: Pairs of variants tested against each other: ``{key: (before, after)}``.
PAIRS = {
    "multistep_vs_one_search": (ONE_SEARCH_VARIANT, MULTISTEP_VARIANT),
    "server_named": (MULTISTEP_VARIANT, SERVER_NAMED_VARIANT),
    "server_support": (SERVER_NAMED_VARIANT, SUPPORT_VARIANT),
    "action": (SUPPORT_VARIANT, DEFAULT_VARIANT),
    "unstemmed_bm25_vs_fts5": (FTS5_VARIANT, DEFAULT_VARIANT),
    "step_depth": (STEP_DEPTH_VARIANT, DEFAULT_VARIANT),
}


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


@dataclass(frozen=True)
class Variant:
    """One configuration: a fusion of members (or one member) with optional multi-step."""

    name: str
    fuser: Fuser
    depth: int = DEPTH
    multistep: bool = False
    what: str = ""
    step_depth: int = STEP_DEPTH


def member_variant(member: str) -> Variant:
    return Variant(member, Fuser({member: 1.0}, "rrf", k=0), what=f"the {member} member alone")


def convex_variant(
    name: str, embedding: float, name_weight: float, lexical: Mapping[str, float], what: str = ""
) -> Variant:
    weights = {"embedding": embedding} | {m: (1 - embedding) * s for m, s in lexical.items()}
    methods = {m: ("minmax" if m == "embedding" else "max") for m in weights}
    return Variant(name, Fuser(weights, "convex", methods, name_weight=name_weight), what=what)


def default_variant(embedding: float, name_weight: float, name: str = "default") -> Variant:
    return convex_variant(name, embedding, name_weight, LEXICAL_SHARES)


def one_search_variant(embedding: float, name_weight: float) -> Variant:
    """The default's fusion (stemmed bm25, name match, exact-name bonus), one search per
    request."""
    stemmed = default_variant(embedding, name_weight)
    return Variant(
        ONE_SEARCH_VARIANT,
        replace(stemmed.fuser, exact_name_bonus=EXACT_NAME_BONUS),
        what=f"plus {EXACT_NAME_BONUS} for tools whose whole name (two words or more) "
        "the query says",
    )


# --------------------------------------------------------------------------- replay


@dataclass
class Data:
    """One sample with its cached member hits (whole queries and split steps)."""

    sample: Sample
    hits: dict[str, dict[str, Scored]]
    step_hits: dict[str, dict[str, Scored]]
    steps: dict[str, list[str]]
    names: Mapping[str, NameWords] = field(default_factory=dict)

    def is_negative(self, qid: str) -> bool:
        return qid not in self.sample.qrels


def stand_in(name: str) -> Path:
    """The model that stands in for the shipped one on ``name``: the shipped recipe trained
    without ``name``'s group of sources (``broad_model.candidate_fold_model``)."""
    return broad_model.candidate_fold_model(broad_model.fold_of(name))


def members_for(
    name: str, split: str, limit: int | None, *, fold: bool | None = None
) -> dict[str, MemberSpec]:
    """The members run on ``name``'s ``split``. On dev (or with ``fold``), the fine-tuned
    default model is replaced by :func:`stand_in`, a model that never saw ``name``: choices are
    made on scores of a model that never saw those queries, as on a user's catalogue."""
    if not (split == "dev" if fold is None else fold) or DEFAULT_MODEL != TUNED_MODEL:
        return dict(MEMBERS)
    options = {**MEMBERS["embedding"].options, "model": str(stand_in(name))}
    return dict(MEMBERS) | {"embedding": MemberSpec("embedding", "embedding", options)}


def load_data(
    name: str, split: str, limit: int | None, cache: Path, *, fold: bool | None = None
) -> Data:
    sample = load_sample(name, split, limit)
    return sample_data(sample, members_for(name, split, limit, fold=fold), limit, cache)


def load_large(split: str, limit: int | None, cache: Path, *, fold: bool | None = None) -> Data:
    """mcp-workbench's ``split`` inside :data:`LARGE_TOOLS` tools, with the default's members
    (on dev, or with ``fold``, the fold model that never saw mcp-workbench)."""
    _, big = distractor_samples(limit, LARGE_TOOLS, split)
    members = members_for("mcp-workbench", split, limit, fold=fold)
    used = {m: spec for m, spec in members.items() if m == "embedding" or m in LEXICAL_SHARES}
    return sample_data(big, used, limit, cache)


def sample_data(
    sample: Sample, members: Mapping[str, MemberSpec], limit: int | None, cache: Path
) -> Data:
    """``sample`` with the cached hits of ``members`` for its queries and their steps."""
    hits = {m: member_hits(sample, spec, limit=limit, cache=cache) for m, spec in members.items()}
    steps = {q.id: split_steps(q.text) for q in sample.queries}
    texts = {f"{qid}#{i}": t for qid, st in steps.items() if len(st) > 1 for i, t in enumerate(st)}
    step_hits = {
        m: member_hits(sample, spec, limit=limit, cache=cache, texts=texts)
        for m, spec in members.items()
        if m in ("embedding", "bm25_stem", "bm25", "fts5")
    }
    names = name_table(sample.dataset.tools)
    return Data(sample, hits, step_hits, steps, names)


def fused_hits(
    variant: Variant, text: str, hits: Mapping[str, Scored], names: Any, depth: int | None = None
) -> list[Hit]:
    """``variant``'s fusion of the members' cached ``hits`` cut to ``depth`` (the variant's)."""
    depth = variant.depth if depth is None else depth
    member = {m: [Hit(n, s) for n, s in hits[m][:depth]] for m in variant.fuser.weights}
    fused = variant.fuser.fuse(parse_query(text), member, names)
    return [Hit(n, fused[n]) for n in sorted(fused, key=lambda n: -fused[n]) if fused[n] > 0]


def _best(hits: Scored) -> float:
    return hits[0][1] if hits else 0.0


def rank(data: Data, variant: Variant) -> dict[str, list[Hit]]:
    """``{query id: hits}`` of ``variant`` replayed over the cached member hits."""
    out: dict[str, list[Hit]] = {}
    weights = variant.fuser.weights
    leading = max(weights, key=lambda m: weights[m])  # the hybrid's confidence member
    for query in data.sample.queries:
        whole = {m: data.hits[m][query.id] for m in weights}
        ranked = fused_hits(variant, query.text, whole, data.names)
        steps = data.steps[query.id]
        if variant.multistep and len(steps) > 1:
            rankings = []
            for i, step in enumerate(steps):
                part = {m: data.step_hits[m][f"{query.id}#{i}"] for m in weights}
                hits = fused_hits(variant, step, part, data.names, variant.step_depth)
                rankings.append(Ranking(hits, _best(part[leading])))
            ranked = merge_steps(Ranking(ranked, _best(whole[leading])), rankings, DEPTH)
        out[query.id] = ranked[:DEPTH]
    return out


def scores(data: Data, ranked: Mapping[str, Sequence[Hit]]) -> dict[str, dict[str, float]]:
    """``{group: {metric: mean}}`` for ``all``, each style and ``multi-tool`` queries (two
    tools or more needed), every query scored by its groups of alternative gold tools
    (docs/benchmark.md); the ``task`` style also reports complete@5 (every step served)."""
    qrels, groups = data.sample.qrels, data.sample.groups
    names = {qid: [h.name for h in hits] for qid, hits in ranked.items()}
    per_query = per_query_scores(qrels, names, parse_metrics(SCORED), groups=groups)
    return {
        group: {
            m: round(sum(per_query[m][q] for q in ids) / len(ids), 4)
            for m in (SCORED if group == "task" else METRICS)
        }
        for group, ids in query_groups(data).items()
    }


def query_groups(data: Data) -> dict[str, list[str]]:
    """The positive queries of ``all``, of each style and of ``multi-tool`` (two groups of
    gold tools or more), by id; empty groups left out."""
    qrels, groups = data.sample.qrels, data.sample.groups
    members: dict[str, list[str]] = {"all": list(qrels)}
    for query in data.sample.queries:
        if query.id in qrels:
            if query.style:
                members.setdefault(query.style, []).append(query.id)
            if len(groups[query.id]) > 1:
                members.setdefault("multi-tool", []).append(query.id)
    return {group: ids for group, ids in members.items() if ids}


# --------------------------------------------------------------------------- choosing


Grid = dict[tuple[float, float], dict[str, float]]
#: A setting of a dev grid or curve.
Point = TypeVar("Point", bound=Hashable)


def grid_scores(data: Mapping[tuple[str, str], Data]) -> Grid:
    """Dev ndcg@10 of the default's form for every (embedding weight, name weight) of the grid,
    per dataset."""
    grid: Grid = {}
    for embedding in EMBEDDING_GRID:
        for name_weight in NAME_GRID:
            variant = default_variant(embedding, name_weight)
            grid[embedding, name_weight] = {
                d: scores(data[d, "dev"], rank(data[d, "dev"], variant))["all"][OBJECTIVE]
                for d in DATASETS
            }
            log(f"  embedding {embedding} name {name_weight}: {grid[embedding, name_weight]}")
    return grid


def incumbent() -> tuple[float, float]:
    """The (embedding weight, name weight) the hybrid has now."""
    total = sum(DEFAULT_MEMBERS.values())
    return round(DEFAULT_MEMBERS["embedding"] / total, 4), DEFAULT_NAME_WEIGHT


def shipped_variant() -> Variant:
    """The default exactly as the hybrid ships it (its current weights and server settings)."""
    return default_at(*incumbent())


def default_at(embedding: float, name_weight: float) -> Variant:
    """The default with these embedding and name weights and the hybrid's server settings."""
    chosen = variants(
        embedding, name_weight, DEFAULT_SERVER_BONUS, DEFAULT_SERVER_SUPPORT, DEFAULT_ACTION_BONUS
    )
    return next(v for v in chosen if v.name == DEFAULT_VARIANT)


def dev_means(
    scores: Mapping[Point, Mapping[str, float]], datasets: Iterable[str]
) -> dict[Point, float]:
    """Each setting's mean dev score over ``datasets``."""
    chosen = list(datasets)
    return {point: sum(by[d] for d in chosen) / len(chosen) for point, by in scores.items()}


def current_holds(means: Mapping[Point, float], current: Point | None) -> bool:
    """Whether ``current`` (the backend's setting) is within :data:`CHOICE_MARGIN` of the best
    mean, and so stays."""
    return (
        current is not None
        and current in means
        and (max(means.values()) - means[current] <= CHOICE_MARGIN)
    )


def choose_default(
    grid: Grid, datasets: Iterable[str], current: tuple[float, float] | None = None
) -> tuple[float, float, float]:
    """The (embedding weight, name weight) with the best mean dev ndcg@10 over ``datasets``
    (the first of the grid on a tie), and that mean; ``current`` (the backend's setting) stays
    unless the best beats it by more than :data:`CHOICE_MARGIN`."""
    means = dev_means(grid, datasets)
    if current is not None and current_holds(means, current):
        return (*current, means[current])
    best: tuple[float, float, float] = (0.0, 0.0, -1.0)
    for point in grid:
        if means[point] > best[2] + 1e-9:
            best = (*point, means[point])
    return best


def setting_curve(
    dev: Mapping[str, Data], setting: str, fuser: Callable[[float], Fuser], grid: Iterable[float]
) -> dict[float, dict[str, float]]:
    """Dev ndcg@10 per set of ``dev`` with multi-step search and ``fuser(value)``, for each
    value of one ``setting`` in ``grid``."""
    curve = {}
    for value in grid:
        variant = Variant(setting, fuser(value), multistep=True)
        curve[value] = {
            name: scores(data, rank(data, variant))["all"][OBJECTIVE] for name, data in dev.items()
        }
        log(f"  {setting} {value}: {curve[value]}")
    return curve


def choose_value(
    curve: Mapping[float, Mapping[str, float]], datasets: Iterable[str], current: float
) -> float:
    """The setting of a one-dimensional dev ``curve``: ``current`` while it is within
    :data:`CHOICE_MARGIN` of the best mean over ``datasets``, else the smallest setting that is
    (the least change the data cannot tell from the best)."""
    means = dev_means(curve, datasets)
    if current_holds(means, current):
        return current
    best = max(means.values())
    return min(value for value in means if best - means[value] <= CHOICE_MARGIN)


#: What the unseen-catalogue comparisons take away from the default: ``{result key: settings}``.
UNSEEN_WITHOUT: Mapping[str, Mapping[str, Any]] = {
    "server_unseen": {"server_bonus": 0.0, "server_support": 0.0},
    "action_unseen": {"action_bonus": 0.0},
}


def unseen_catalogue_effects(limit: int | None, cache: Path, default: Variant) -> dict[str, Any]:
    """The server features and the action bonus where the model never saw the catalogue, as on
    a user's own: the test split of each dataset whose tools have servers (and of mcp-workbench
    inside :data:`LARGE_TOOLS` tools), its embedding member the fold model trained without that
    dataset, the default against the default without them (:data:`UNSEEN_WITHOUT`; paired
    t-test)."""
    sets: dict[str, Callable[[], Data]] = {
        name: partial(load_data, name, "test", limit, cache, fold=True)
        for name in DATASETS
        if any(name_words(tool).server for tool in load_sample(name, "test", limit).dataset.tools)
    }
    sets[LARGE] = partial(load_large, "test", limit, cache, fold=True)
    out: dict[str, Any] = {key: {} for key in UNSEEN_WITHOUT}
    for name, load in sets.items():
        data = load()
        ranked = rank(data, default)
        scored = scores(data, ranked)
        for key, settings in UNSEEN_WITHOUT.items():
            without = replace(
                default, name=f"{DEFAULT_VARIANT} {key}", fuser=replace(default.fuser, **settings)
            )
            runs = {without.name: rank(data, without), default.name: ranked}
            out[key][name] = {
                "scores": {
                    "without": scores(data, runs[without.name]),
                    "default": scored,
                },
                "significance": significance(data, runs, without.name)[default.name],
            }
    return out


def top_similarity(data: Data, qid: str) -> float:
    found = data.hits["embedding"][qid]
    return found[0][1] if found else 0.0


def abstained(
    data: Data, ranked: Mapping[str, Sequence[Hit]], threshold: float
) -> dict[str, list[Hit]]:
    """``ranked`` with no result for every query whose best embedding similarity is below
    ``threshold``, as the default's "no tool fits" answers it."""
    return {
        qid: (list(hits) if top_similarity(data, qid) >= threshold else [])
        for qid, hits in ranked.items()
    }


def abstention_effect(
    data: Data, ranked: Mapping[str, Sequence[Hit]], threshold: float
) -> dict[str, float]:
    """False-positive rate on negatives and recall@5 lost on positives when every query whose
    best embedding similarity is below ``threshold`` gets no result."""
    return refusal_cost(data, ranked, abstained(data, ranked, threshold))


def refusal_cost(
    data: Data, ranked: Mapping[str, Sequence[Hit]], kept: Mapping[str, Sequence[Hit]]
) -> dict[str, float]:
    """recall@5 lost on positives when ``ranked`` becomes ``kept`` (some queries refused) and,
    where there are negatives, the share of them still offered a tool."""
    before, after = scores(data, ranked)["all"], scores(data, kept)["all"]
    negatives = [q.id for q in data.sample.queries if data.is_negative(q.id)]
    out = {"recall@5_cost": round(before["recall@5"] - after["recall@5"], 4)}
    if negatives:
        out["false_positive_rate"] = round(sum(1 for q in negatives if kept[q]) / len(negatives), 4)
    return out


def choose_abstention(data: Mapping[tuple[str, str], Data], variant: Variant) -> float:
    """The highest threshold whose recall@5 cost on every dev set is at most
    :data:`ABSTAIN_MAX_COST`."""
    best = 0.0
    runs = {d: rank(data[d, "dev"], variant) for d, s in data if s == "dev"}
    for threshold in ABSTAIN_GRID:
        costs = [
            abstention_effect(data[d, "dev"], runs[d], threshold)["recall@5_cost"] for d in runs
        ]
        if max(costs) <= ABSTAIN_MAX_COST:
            best = threshold
    return best


# --------------------------------------------------------------------------- variants


def variants(
    embedding: float,
    name_weight: float,
    server_bonus: float,
    server_support: float,
    action_bonus: float,
) -> list[Variant]:
    """The members alone, the previous default, then each technique added in turn."""
    previous = Variant(
        "rrf (previous default)",
        Fuser({"embedding": 1.0, "fts5": 0.5}, "rrf", k=5),
        depth=50,
        what="RRF k=5 of embedding 1.0 + fts5 0.5, depth 50",
    )
    stemmed = default_variant(embedding, name_weight)
    one_search = one_search_variant(embedding, name_weight)
    one_fuser = one_search.fuser
    named = replace(one_fuser, server_bonus=server_bonus)
    supported = replace(named, server_support=server_support)
    default = replace(supported, action_bonus=action_bonus)
    steps = [
        convex_variant(
            "+ convex fusion", embedding, 0.0, {"fts5": 1.0}, "normalised convex combination"
        ),
        convex_variant(
            "+ name match", embedding, name_weight, {"fts5": 1.0}, "plus the name-match feature"
        ),
        convex_variant(
            "+ stemmed bm25",
            embedding,
            name_weight,
            FTS5_SHARES,
            "plus bm25 with stemming and stop-words as a third member",
        ),
        Variant(
            "+ unstemmed bm25 for fts5",
            stemmed.fuser,
            what="the unstemmed lexical member is bm25 instead of fts5",
        ),
        one_search,
        Variant(
            "exact-name tier instead",
            replace(one_fuser, exact_name_bonus=EXACT_TIER),
            what=f"a bonus of {EXACT_TIER} instead: such tools always first",
        ),
        Variant(
            MULTISTEP_VARIANT,
            one_fuser,
            multistep=True,
            what="plus per-step search of multi-clause requests: steps at least as confident as "
            "the whole request merged in round-robin after its best hit",
        ),
        Variant(
            SERVER_NAMED_VARIANT,
            named,
            multistep=True,
            what=f"plus {server_bonus} for tools whose server the request names",
        ),
        Variant(
            SUPPORT_VARIANT,
            supported,
            multistep=True,
            what=f"plus {server_support} times the best score among the tool's server's tools",
        ),
        Variant(
            DEFAULT_VARIANT,
            default,
            multistep=True,
            what=f"plus {action_bonus} for tools whose name shares an action class with the "
            "request (create, read, update, delete, send, run, stop, respond)",
        ),
        Variant(
            STEP_DEPTH_VARIANT,
            default,
            multistep=True,
            step_depth=DEPTH,
            what=f"the default with each step ranked from {DEPTH} hits per member instead of "
            f"{STEP_DEPTH}",
        ),
        Variant(
            FTS5_VARIANT,
            replace(
                convex_variant("", embedding, name_weight, FTS5_SHARES).fuser,
                exact_name_bonus=EXACT_NAME_BONUS,
                server_bonus=server_bonus,
                server_support=server_support,
                action_bonus=action_bonus,
            ),
            multistep=True,
            what="the default with fts5 as its unstemmed lexical member, as it was before",
        ),
    ]
    return [*(member_variant(m) for m in MEMBERS), previous, *steps]


def significance(
    data: Data, runs: Mapping[str, Mapping[str, Sequence[Hit]]], base: str
) -> dict[str, Any]:
    """ranx paired t-test of every variant against ``base`` on the sample's positives."""
    qrels = data.sample.qrels
    out: dict[str, Any] = {}
    names = {v: {q: [h.name for h in hits] for q, hits in run.items()} for v, run in runs.items()}
    for variant in names:
        if variant == base:
            continue
        test = compare_backends(
            qrels,
            {base: names[base], variant: names[variant]},
            parse_metrics(("recall@5", "ndcg@10")),
            groups=data.sample.groups,
        )
        out[variant] = {
            p.metric: {
                "delta": round(p.delta, 4),
                "p": round(p.p_value, 4),
                "significant": p.significant,
            }
            for p in test.pairs
        }
    return out


def lodo(
    data: Mapping[tuple[str, str], Data],
    grid: Grid,
    curves: Mapping[str, Mapping[float, Mapping[str, float]]],
) -> dict[str, Any]:
    """Leave-one-dataset-out: settings chosen on the other datasets' dev splits (and, for the
    server support and the action bonus, the large catalogue unless it is built on the
    left-out dataset), scored on the left-out dataset's test split. ``curves`` holds the dev
    curves of the server bonus (``servers``), support (``support``) and action bonus
    (``actions``)."""
    out: dict[str, Any] = {}
    for held in DATASETS:
        others = [d for d in DATASETS if d != held]
        embedding, name_weight, _ = choose_default(grid, others, incumbent())
        server_bonus = choose_value(curves["servers"], others, DEFAULT_SERVER_BONUS)
        supported_on = others if held == "mcp-workbench" else [*others, LARGE]
        server_support = choose_value(curves["support"], supported_on, DEFAULT_SERVER_SUPPORT)
        action_bonus = choose_value(curves["actions"], supported_on, DEFAULT_ACTION_BONUS)
        variant = default_variant(embedding, name_weight)
        fuser = replace(
            variant.fuser,
            server_bonus=server_bonus,
            server_support=server_support,
            action_bonus=action_bonus,
        )
        test = data[held, "test"]
        out[held] = {
            "chosen_on": others,
            "embedding_weight": embedding,
            "name_weight": name_weight,
            "server_bonus": server_bonus,
            "server_support": server_support,
            "action_bonus": action_bonus,
            "support_chosen_on": supported_on,
            "test": scores(test, rank(test, replace(variant, fuser=fuser))),
        }
    return out


def check_against_backend(data: Data, variant: Variant, n: int = 25) -> None:
    """The real HybridBackend with the variant's settings (the default's fusion, multi-step
    or not) returns the replayed ranking (first ``n`` queries)."""
    from toolsearch.backends.hybrid import HybridBackend

    # the replay does not abstain
    backend = HybridBackend(
        min_member_score={}, multistep=variant.multistep, step_depth=variant.step_depth
    )
    wanted = {HYBRID_LABELS.get(m, m): w for m, w in variant.fuser.weights.items()}
    actual = dict(backend.fuser.weights)
    if set(actual) != set(wanted) or any(abs(actual[m] - wanted[m]) > 1e-9 for m in wanted):
        raise SystemExit(f"HybridBackend's weights {actual} are not the chosen {wanted}")
    if backend.fuser.name_weight != variant.fuser.name_weight:
        raise SystemExit("HybridBackend's name weight is not the chosen one")
    if backend.fuser.exact_name_bonus != variant.fuser.exact_name_bonus:
        raise SystemExit("HybridBackend's exact-name bonus is not the ablation's default")
    if backend.fuser.server_bonus != variant.fuser.server_bonus:
        raise SystemExit("HybridBackend's server bonus is not the chosen one")
    if backend.fuser.server_support != variant.fuser.server_support:
        raise SystemExit("HybridBackend's server support is not the chosen one")
    if backend.fuser.action_bonus != variant.fuser.action_bonus:
        raise SystemExit("HybridBackend's action bonus is not the chosen one")
    backend.index(list(data.sample.dataset.tools))
    replayed = rank(data, variant)
    for query in data.sample.queries[:n]:
        got = [h.name for h in backend.search(parse_query(query.text), 10)]
        want = [h.name for h in replayed[query.id][:10]]
        if got != want:
            raise SystemExit(f"replay differs from HybridBackend on {query.id}: {got} != {want}")


# --------------------------------------------------------------------------- report


def replay_script(
    argv: Sequence[str] | None,
    doc: str,
    out: Path,
    measure: Callable[[Path], dict[str, Any]],
    render: Callable[[dict[str, Any]], str],
) -> int:
    """The command line of a script that replays cached member rankings (``--out``,
    ``--cache``): ``measure(cache)`` written as JSON to ``--out``, then ``render``-ed."""
    cache = ("--cache", {"type": Path, "default": default_runs_dir()})
    return table_script(argv, doc, out, cache, measure, render)


def significance_mark(test: Mapping[str, Any], metric: str) -> str:
    """``*`` where ``test`` (a :func:`significance` entry) found ``metric`` significant."""
    found = test.get(metric)
    return "*" if found and found["significant"] else ""


def score_columns(lead: Sequence[str], groups: Sequence[str]) -> list[str]:
    """Header and rule of a table of :func:`score_cells`, after the ``lead`` columns."""
    columns = [*lead, "ndcg@10", *(f"{group} recall@5" for group in groups)]
    rule = "|" + "---|" * len(lead) + "---:|" * (1 + len(groups))
    return ["| " + " | ".join(columns) + " |", rule]


def score_cells(
    got: Mapping[str, Mapping[str, float]], groups: Sequence[str], marks: Mapping[str, str]
) -> list[str]:
    """ndcg@10 over all queries, then recall@5 per group (``-`` for a group without queries);
    ``marks`` (per metric) follow the all-query cells."""
    cells = [f"{got['all']['ndcg@10']:.3f}{marks.get('ndcg@10', '')}"]
    for group in groups:
        value = got.get(group, {}).get("recall@5")
        mark = marks.get("recall@5", "") if group == "all" else ""
        cells.append("-" if value is None else f"{value:.3f}{mark}")
    return cells


TABLE_GROUPS = (
    ("mcp-workbench", "all", "recall@5"),
    ("mcp-workbench", "keywords", "hit@1"),
    ("mcp-workbench", "hard", "recall@5"),
    ("mcp-workbench", "multi-tool", "recall@5"),
    ("mcp-workbench", "task", "recall@5"),
    ("metatool", "all", "ndcg@10"),
    ("bfcl", "all", "ndcg@10"),
)


def markdown_table(results: Mapping[str, Any], split: str = "test") -> str:
    """The README table: each variant's ``split`` scores; ``*`` marks a significant difference
    from the previous default (ranx paired t-test, p < 0.05, recall@5 or ndcg@10)."""
    header = ["variant"] + [f"{d} {g} {m}" for d, g, m in TABLE_GROUPS]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for variant in results["variants"]:
        cells = [variant]
        for dataset, group, metric in TABLE_GROUPS:
            entry = results["scores"][dataset][split][variant].get(group, {})
            value = entry.get(metric)
            sig = results["significance"][dataset][split].get(variant, {})
            tested = sig.get(metric if metric in ("recall@5", "ndcg@10") else "ndcg@10", {})
            mark = "*" if group == "all" and tested.get("significant") else ""
            cells.append("-" if value is None else f"{value:.3f}{mark}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


MEMBER_VARIANTS = ("keyword", "bm25", "bm25_stem", "fts5", "embedding")


def _test(results: Mapping[str, Any], dataset: str, variant: str, group: str, metric: str) -> float:
    value: float = results["scores"][dataset]["test"][variant][group][metric]
    return value


def member_gaps(results: Mapping[str, Any]) -> list[tuple[str, str, str, str, float, float]]:
    """``(set, group, metric, best member, its score, the default's)`` for every test set,
    query group and metric (recall@5, ndcg@10), the largest gap below a member first."""
    gaps = []
    for dataset, splits in results["scores"].items():
        for group, mine in splits["test"][DEFAULT_VARIANT].items():
            for metric in ("recall@5", "ndcg@10"):
                member = max(
                    MEMBER_VARIANTS, key=lambda m: _test(results, dataset, m, group, metric)
                )
                theirs = _test(results, dataset, member, group, metric)
                gaps.append((dataset, group, metric, member, theirs, mine[metric]))
    return sorted(gaps, key=lambda gap: gap[5] - gap[4])


def _pair_effect(results: Mapping[str, Any], key: str, title: str) -> str:
    """One sentence: the pair ``PAIRS[key]`` tested against each other, test splits."""
    before_variant, after_variant = PAIRS[key]
    parts = []
    for dataset, metric in (
        ("mcp-workbench", "recall@5"),
        ("metatool", "ndcg@10"),
        ("bfcl", "ndcg@10"),
    ):
        before = _test(results, dataset, before_variant, "all", metric)
        after = _test(results, dataset, after_variant, "all", metric)
        test = results[key][dataset]["test"][metric]
        parts.append(f"{dataset} {metric} {before:.3f} → {after:.3f} ({_verdict(test)})")
    task = [
        _test(results, "mcp-workbench", v, "task", "recall@5")
        for v in (before_variant, after_variant)
    ]
    return (
        f"{title} (test splits, paired t-test): "
        + "; ".join(parts)
        + f"; mcp-workbench `task` recall@5 {task[0]:.3f} → {task[1]:.3f}."
    )


def _verdict(test: Mapping[str, Any]) -> str:
    """A paired test as ``p = …, significant`` (``p < 0.0001`` below the stored precision)."""
    p = f"p = {test['p']}" if test["p"] >= 0.0001 else "p < 0.0001"
    return f"{p}, {'significant' if test['significant'] else 'not significant'}"


def _unseen_sentence(results: Mapping[str, Any], key: str, lead: str) -> str:
    """One sentence, opened by ``lead``: the default against itself without the features of
    ``UNSEEN_WITHOUT[key]``, with the fold model on each left-out test split."""
    parts = []
    for dataset, effect in results.get(key, {}).items():
        before, after = effect["scores"]["without"], effect["scores"]["default"]
        cells = []
        for metric in ("ndcg@10", "recall@5"):
            cells.append(
                f"{metric} {before['all'][metric]:.3f} → {after['all'][metric]:.3f} "
                f"({_verdict(effect['significance'][metric])})"
            )
        task = before.get("task"), after.get("task")
        if task[0] and task[1]:
            cells.append(f"`task` recall@5 {task[0]['recall@5']:.3f} → {task[1]['recall@5']:.3f}")
        parts.append(f"{dataset} {', '.join(cells)}")
    if not parts:
        return ""
    return (
        f"{lead}, with the fold model that never saw the dataset, as on a new catalogue: "
        + "; ".join(parts)
        + "."
    )


def target_rows(results: Mapping[str, Any]) -> list[tuple[str, float, str, bool]]:
    """``(what, the default's test score, the target, met)`` for each retrieval target."""
    shipped, effect = results["shipped"], results["abstention"]["effect"]
    rows = []
    for what, dataset, group, metric, floor in TARGET_FLOORS:
        value = shipped[dataset][group][metric]
        rows.append((f"{dataset} {what}", value, f"≥ {floor:.2f}", value >= floor))
    dataset, group, metric, member, theirs, mine = member_gaps(results)[0]
    size = results.get("group_sizes", {}).get(dataset, {}).get(group)
    counted = f", {size} queries" if size else ""
    own, large = (shipped[name]["all"]["recall@5"] for name in ("mcp-workbench", LARGE))
    ceilings = (
        (
            f"largest gap below a member alone ({dataset} `{group}`{counted}: {metric}, {member})",
            theirs - mine,
            MAX_MEMBER_GAP,
        ),
        (
            "mcp-workbench negatives offered a tool (false-positive rate)",
            effect["mcp-workbench/test"]["false_positive_rate"],
            MAX_FALSE_POSITIVE_RATE,
        ),
        (
            "recall@5 lost to abstaining (largest over the test splits)",
            max(effect[f"{d}/test"]["recall@5_cost"] for d in DATASETS),
            MAX_REFUSAL_COST,
        ),
        (f"mcp-workbench recall@5 lost inside {LARGE_TOOLS:,} tools", own - large, MAX_LARGE_LOSS),
    )
    for what, value, ceiling in ceilings:
        rows.append((what, value, f"≤ {ceiling:.2f}", value <= ceiling))
    return rows


def markdown_targets_table(results: Mapping[str, Any]) -> str:
    """The default's test scores against the retrieval targets, one row each."""
    lines = ["| target | the default (test) | goal | met |", "|---|---:|---:|---|"]
    for what, value, goal, met in target_rows(results):
        lines.append(f"| {what} | {value:.3f} | {goal} | {'yes' if met else 'no'} |")
    return "\n".join(lines)


def markdown_targets(results: Mapping[str, Any]) -> str:
    """The README paragraph of paired effects and the table of the default's test scores
    against the retrieval targets."""
    sizes = results.get("group_sizes", {})
    below = "; ".join(
        f"{dataset} `{group}` ({sizes.get(dataset, {}).get(group, '?')} queries) {metric} "
        f"({member} {theirs:.3f} vs {mine:.3f})"
        for dataset, group, metric, member, theirs, mine in member_gaps(results)
        if theirs - mine > MAX_MEMBER_GAP
    )
    threshold = results["abstention"]["threshold"]
    task = _test(results, "mcp-workbench", ONE_SEARCH_VARIANT, "task", "recall@5")
    return (
        f"{_pair_effect(results, 'multistep_vs_one_search', MULTISTEP_TITLE)} "
        f"{_pair_effect(results, 'server_named', SERVER_TITLE)} "
        f"{_pair_effect(results, 'server_support', SUPPORT_TITLE)} "
        f"{_unseen_sentence(results, 'server_unseen', 'Both server features against neither')} "
        f"{_pair_effect(results, 'action', ACTION_TITLE)} "
        f"{_unseen_sentence(results, 'action_unseen', 'The action bonus against none')} "
        f"{_pair_effect(results, 'unstemmed_bm25_vs_fts5', UNSTEMMED_TITLE)} "
        f"{_pair_effect(results, 'step_depth', STEP_DEPTH_TITLE)}\n\n"
        "Against the retrieval targets set before the broad model (its own, stricter on "
        "MetaTool, BFCL, `task` and `keywords`: table `targets`): the default as it ships, "
        'answering "no tool fits" '
        f"below a best cosine of {threshold} (the ablation's rows above never abstain), on the "
        f"test splits; with one search per request `task` recall@5 would be {task:.3f}. Where "
        f"the default is more than {MAX_MEMBER_GAP} below a member alone (recall@5 or "
        f'ndcg@10, rows above): {below or "nowhere"}. lab/retrieval.md, "Against the '
        f'targets", says what limits each miss and what was tried.\n\n'
        + markdown_targets_table(results)
    )


def shipped_scores(
    data: Mapping[tuple[str, str], Data], large: Data, default: Variant, threshold: float
) -> dict[str, Any]:
    """The default as it ships (no result below the abstention ``threshold``) on every test
    split and on mcp-workbench's test queries inside :data:`LARGE_TOOLS` tools: the scores the
    retrieval targets read."""
    sets = {name: data[name, "test"] for name in DATASETS} | {LARGE: large}
    return {
        name: scores(item, abstained(item, rank(item, default), threshold))
        for name, item in sets.items()
    }


def evaluate_all(data: Mapping[tuple[str, str], Data], chosen: Sequence[Variant]) -> dict[str, Any]:
    base = "rrf (previous default)"
    table: dict[str, Any] = {d: {} for d in DATASETS}
    sig: dict[str, Any] = {d: {} for d in DATASETS}
    pairs: dict[str, Any] = {key: {d: {} for d in DATASETS} for key in PAIRS}
    for (dataset, split), item in data.items():
        log(f"scoring {dataset}/{split}")
        runs = {v.name: rank(item, v) for v in chosen}
        table[dataset][split] = {name: scores(item, run) for name, run in runs.items()}
        sig[dataset][split] = significance(item, runs, base)
        for key, (before, after) in PAIRS.items():
            pair = {v: runs[v] for v in (before, after)}
            pairs[key][dataset][split] = significance(item, pair, before)[after]
    return {"scores": table, "significance": sig} | pairs


def abstention_report(
    data: Mapping[tuple[str, str], Data], variant: Variant, threshold: float
) -> dict[str, Any]:
    report: dict[str, Any] = {
        "threshold": threshold,
        "max_dev_cost": ABSTAIN_MAX_COST,
        "effect": {},
    }
    for (dataset, split), item in data.items():
        report["effect"][f"{dataset}/{split}"] = abstention_effect(
            item, rank(item, variant), threshold
        )
    curve = {}
    wb = data["mcp-workbench", "test"]
    run = rank(wb, variant)
    for t in ABSTAIN_GRID[::3]:
        curve[str(t)] = abstention_effect(wb, run, t)
    report["mcp-workbench_test_curve"] = curve
    return report


def main(argv: Iterable[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--limit", type=int, default=1000, help="queries per split (1000)")
    parser.add_argument("--cache", type=Path, default=None, help="member-run cache folder")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(list(argv) if argv is not None else None)
    cache = args.cache or default_runs_dir()
    data = {(d, s): load_data(d, s, args.limit, cache) for d in DATASETS for s in SPLITS}
    log("choosing the default on the dev splits")
    grid = grid_scores(data)
    embedding, name_weight, dev_mean = choose_default(grid, DATASETS, incumbent())
    dev = {d: data[d, "dev"] for d in DATASETS}
    fuser = one_search_variant(embedding, name_weight).fuser
    bonus = partial(replace, fuser)
    servers = setting_curve(dev, "server_bonus", lambda v: bonus(server_bonus=v), SERVER_GRID)
    server_bonus = choose_value(servers, DATASETS, DEFAULT_SERVER_BONUS)
    log(f"choosing the server support, also on {LARGE} (dev)")
    dev[LARGE] = load_large("dev", args.limit, cache)
    supported = partial(replace, fuser, server_bonus=server_bonus)
    support = setting_curve(
        dev, "server_support", lambda v: supported(server_support=v), SUPPORT_GRID
    )
    server_support = choose_value(support, dev, DEFAULT_SERVER_SUPPORT)
    acting = partial(supported, server_support=server_support)
    actions = setting_curve(dev, "action_bonus", lambda v: acting(action_bonus=v), ACTION_GRID)
    action_bonus = choose_value(actions, dev, DEFAULT_ACTION_BONUS)
    chosen = variants(embedding, name_weight, server_bonus, server_support, action_bonus)
    results: dict[str, Any] = {
        "benchmark": "ablation",
        "protocol": {
            "limit": args.limit,
            "depth": DEPTH,
            "metrics": list(METRICS),
            "objective": f"mean dev {OBJECTIVE}",
            "embedding_grid": list(EMBEDDING_GRID),
            "choice_margin": CHOICE_MARGIN,
            "name_grid": list(NAME_GRID),
            "server_grid": list(SERVER_GRID),
            "support_grid": list(SUPPORT_GRID),
            "support_chosen_on": list(dev),
            "action_grid": list(ACTION_GRID),
            "lexical_shares": LEXICAL_SHARES,
            "significance": "ranx paired two-sided t-test vs the previous default, p < 0.05",
        },
        "samples": {f"{d}/{s}": len(item.sample.queries) for (d, s), item in data.items()},
        "chosen": {
            "embedding_weight": embedding,
            "name_weight": name_weight,
            "dev_mean": round(dev_mean, 4),
            "server_bonus": server_bonus,
            "server_support": server_support,
            "action_bonus": action_bonus,
        },
        "server_curve": {str(b): v for b, v in servers.items()},
        "support_curve": {str(b): v for b, v in support.items()},
        "action_curve": {str(b): v for b, v in actions.items()},
        "variants": [v.name for v in chosen],
        "descriptions": {v.name: v.what for v in chosen},
    }
    results |= evaluate_all(data, chosen)
    default = next(v for v in chosen if v.name.endswith("(default)"))
    threshold = choose_abstention(data, default)
    results["abstention"] = abstention_report(data, default, threshold)
    results["lodo"] = lodo(data, grid, {"servers": servers, "support": support, "actions": actions})
    results |= unseen_catalogue_effects(args.limit, cache, default)
    large = load_large("test", args.limit, cache)
    results["shipped"] = shipped_scores(data, large, default, threshold)
    results["group_sizes"] = {
        name: {group: len(ids) for group, ids in query_groups(data[name, "test"]).items()}
        for name in DATASETS
    }
    results["grid"] = {f"{e}/{w}": v for (e, w), v in grid.items()}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    check_against_backend(data["mcp-workbench", "test"], default)
    multi = data["mcp-workbench", "test"]
    split = [q for q in multi.sample.queries if len(multi.steps[q.id]) > 1]
    check_against_backend(
        replace(multi, sample=replace(multi.sample, queries=tuple(split))), default
    )
    print(markdown_table(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
