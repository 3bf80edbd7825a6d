"""A cross-encoder trained on tool data: reranking the default's first hits, and saying
"no tool fits" when none of them does.

    python -m lab.reranker --out lab/results/reranker.json

A cross-encoder reads a request and one tool's text together, so it can see what a bi-encoder
and word counts cannot: "delete the message I posted" does not fit ``send_message``, however
many words they share. Untrained general rerankers lowered tool-retrieval scores in published
benchmarks (ToolRet), so this one is trained on tool requests: the bundled all-MiniLM-L6-v2
with a one-logit head, binary cross-entropy, each dev request paired with its gold tools
(label 1) and with the :data:`NEGATIVES` highest-ranked wrong tools among the default's first
:data:`CANDIDATES` (label 0) — the candidates it will rerank, so it learns the near misses the
default actually makes. mcp-workbench's dev negatives (requests no tool serves) pair with their
first :data:`NEGATIVES` candidates, all labelled 0. The settings (:data:`RECIPE`) are BERT
fine-tuning's usual ones; one pass at 2e-5, tried first on mcp-workbench's dev split, left the
training loss near what the label shares alone give, so the recipe takes three passes at 5e-5.

Protocol (``lab/retrieval.md``): every cross-encoder here is a **fold model**, trained on the
dev splits of two datasets and used only on the third, so no score comes from a model that
saw the queries or the catalogue. Choices are made on the dev splits (candidates from the
ablation's fold embedding models): the mix of cross-encoder and default score
(:data:`MIX_GRID`, mean dev ndcg@10 over the three datasets) and the abstention threshold
(the highest of :data:`THRESHOLD_GRID` whose recall@5 cost is at most
:data:`ablation.ABSTAIN_MAX_COST` on every dev split, as the default's cosine threshold is
chosen), for each number of candidates read (:data:`ABSTAIN_TOP`). Reported on test splits:
leave-one-dataset-out (first stage and cross-encoder both trained without the dataset) and
with the shipped first stage, with ranx paired t-tests against the default. Needs the
``embedding`` extra (PyTorch) and the public datasets (``../shared/datasets``).
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from lab.ablation import (
    ABSTAIN_MAX_COST,
    Data,
    abstention_effect,
    load_data,
    log,
    rank,
    refusal_cost,
    replay_script,
    scores,
    shipped_variant,
    significance,
    significance_mark,
)
from lab.member_runs import DATASETS
from lab.tuned_models import LIMIT, base_path
from toolsearch.backend import Hit
from toolsearch.backends.calibration import CALIBRATED_MIN_SIMILARITY
from toolsearch.backends.embedding import DEFAULT_FIELDS, DEFAULT_MAX_WORDS, default_cache_dir
from toolsearch.backends.encoders import TUNED_MODEL, model_fingerprint
from toolsearch.backends.fine_tuning import warmup_schedule
from toolsearch.backends.tool_text import tool_text

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "lab" / "results" / "reranker.json"
#: The default's first hits the cross-encoder reads.
CANDIDATES = 10
#: Wrong candidates paired with each training request.
NEGATIVES = 3
#: Weight of the cross-encoder's probability against the default's score (scaled by the
#: query's best) in the reranked order; 1 is the cross-encoder alone.
MIX_GRID = (0.25, 0.5, 0.75, 1.0)
#: Candidates whose best probability decides abstention.
ABSTAIN_TOP = (1, 3, 10)
THRESHOLD_GRID = tuple(round(0.02 * i, 2) for i in range(1, 50))


@dataclass(frozen=True)
class CrossRecipe:
    """Batch size, AdamW learning rate, linear warm-up share (then linear decay), passes,
    word pieces per request+tool pair, seed and CPU threads."""

    batch: int = 32
    learning_rate: float = 5e-5
    warmup: float = 0.1
    epochs: int = 3
    max_length: int = 128
    seed: int = 42
    threads: int = 2


RECIPE = CrossRecipe()
Example = tuple[str, str, float]


# --------------------------------------------------------------------------- data


def tool_texts(data: Data) -> dict[str, str]:
    """Each tool's text, as the embedding member embeds it."""
    return {
        t.name: tool_text(t, DEFAULT_FIELDS, DEFAULT_MAX_WORDS) for t in data.sample.dataset.tools
    }


def examples(data: Data, ranked: Mapping[str, Sequence[Hit]]) -> list[Example]:
    """(request, tool text, label) for every dev request of ``data``: its gold tools, and its
    first :data:`NEGATIVES` wrong candidates (a negative request's first candidates)."""
    texts, out = tool_texts(data), []
    for query in data.sample.queries:
        gold = {n for n, g in data.sample.qrels.get(query.id, {}).items() if g > 0}
        out += [(query.text, texts[n], 1.0) for n in sorted(gold) if n in texts]
        wrong = [h.name for h in ranked[query.id][:CANDIDATES] if h.name not in gold]
        out += [(query.text, texts[n], 0.0) for n in wrong[:NEGATIVES]]
    return out


def _key(*parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, default=str).encode()).hexdigest()[:16]


# --------------------------------------------------------------------------- the model


def _torch() -> Any:
    import torch

    torch.set_num_threads(RECIPE.threads)
    return torch


def load_cross_encoder(path: Path) -> tuple[Any, Any]:
    """The tokenizer and one-logit model at ``path`` (on the base model, a new, untrained
    head)."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()  # type: ignore[no-untyped-call]  # the fresh head's "newly initialized" notice
    model = AutoModelForSequenceClassification.from_pretrained(str(path), num_labels=1)
    return AutoTokenizer.from_pretrained(str(path)), model


def _encode(tokenizer: Any, batch: Sequence[Example]) -> Any:
    return tokenizer(
        [e[0] for e in batch],
        [e[1] for e in batch],
        truncation="longest_first",
        max_length=RECIPE.max_length,
        padding=True,
        return_tensors="pt",
    )


def bucketed(items: Sequence[Example], seed: int, buckets: int = 16) -> list[list[Example]]:
    """One pass of shuffled batches, each of texts of similar length (drawn from a window of
    ``buckets`` batches), so little of a batch is padding; the batches' order is shuffled too."""
    rng = random.Random(seed)
    order = list(items)
    rng.shuffle(order)
    window, out = RECIPE.batch * buckets, []
    for start in range(0, len(order), window):
        chunk = sorted(order[start : start + window], key=lambda e: len(e[0]) + len(e[1]))
        out += [chunk[i : i + RECIPE.batch] for i in range(0, len(chunk), RECIPE.batch)]
    rng.shuffle(out)
    return out


def train(train_examples: Sequence[Example], out: Path) -> dict[str, Any]:
    """A cross-encoder trained on ``train_examples`` by :data:`RECIPE`, saved to ``out``."""
    torch = _torch()
    torch.manual_seed(RECIPE.seed)
    tokenizer, model = load_cross_encoder(base_path())
    order = list(train_examples)
    plan = [b for epoch in range(RECIPE.epochs) for b in bucketed(order, RECIPE.seed + epoch)]
    optimiser = torch.optim.AdamW(model.parameters(), lr=RECIPE.learning_rate)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimiser, warmup_schedule(len(plan), RECIPE.warmup)
    )
    loss_of = torch.nn.BCEWithLogitsLoss()
    model.train()
    started, losses = time.perf_counter(), []
    for batch in plan:
        logits = model(**_encode(tokenizer, batch)).logits.squeeze(-1)
        loss = loss_of(logits, torch.tensor([e[2] for e in batch]))
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        schedule.step()
        losses.append(float(loss.detach()))
    model.eval()
    record = {
        "examples": len(order),
        "positives": sum(1 for e in order if e[2] > 0),
        "steps": len(plan),
        "seconds": round(time.perf_counter() - started, 1),
        "first_loss": round(sum(losses[:10]) / min(10, len(losses)), 4),
        "last_loss": round(sum(losses[-10:]) / min(10, len(losses)), 4),
        "recipe": asdict(RECIPE),
    }
    model.save_pretrained(str(out))
    tokenizer.save_pretrained(str(out))
    (out / "toolsearch-training.json").write_text(json.dumps(record, indent=2) + "\n")
    return record


def probabilities(path: Path, pairs: Sequence[tuple[str, str]]) -> list[float]:
    """The cross-encoder's probability that each (request, tool text) pair fits, batched by
    length so little is padded."""
    torch = _torch()
    tokenizer, model = load_cross_encoder(path)
    model.eval()
    order = sorted(range(len(pairs)), key=lambda i: len(pairs[i][0]) + len(pairs[i][1]))
    out = [0.0] * len(pairs)
    with torch.inference_mode():
        for start in range(0, len(order), 64):
            chunk = order[start : start + 64]
            batch = [(*pairs[i], 0.0) for i in chunk]
            logits = model(**_encode(tokenizer, batch)).logits.squeeze(-1).tolist()
            for i, logit in zip(chunk, logits, strict=True):
                out[i] = 1 / (1 + math.exp(-logit))
    return out


# --------------------------------------------------------------------------- folds


def cache_dir() -> Path:
    return Path(default_cache_dir()) / "cross_encoders"


def fold_cross_encoder(left_out: str, dev: Mapping[str, Data]) -> Path:
    """The cross-encoder trained on the dev splits of every dataset but ``left_out`` (trained
    now unless cached)."""
    variant = shipped_variant()
    train_examples: list[Example] = []
    for name in DATASETS:
        if name != left_out:
            train_examples += examples(dev[name], rank(dev[name], variant))
    key = _key(
        asdict(RECIPE), model_fingerprint(base_path()), CANDIDATES, NEGATIVES, train_examples
    )
    folder = cache_dir() / f"without-{left_out}-{key}"
    if not (folder / "toolsearch-training.json").is_file():
        log(f"reranker: training without {left_out} on {len(train_examples)} examples")
        record = train(train_examples, folder)
        log(f"reranker: trained without {left_out}: {record}")
    return folder


def candidate_probabilities(
    model: Path, data: Data, ranked: Mapping[str, Sequence[Hit]]
) -> dict[str, list[float]]:
    """``{query id: probability of each of its first CANDIDATES hits}``, cached by the model,
    the sample and the candidates."""
    texts = tool_texts(data)
    queries = {q.id: q.text for q in data.sample.queries}
    wanted = {qid: [h.name for h in hits[:CANDIDATES]] for qid, hits in ranked.items()}
    cache_dir().mkdir(parents=True, exist_ok=True)
    path = cache_dir() / f"scores-{_key(model.name, data.sample.key(LIMIT), wanted)}.json"
    if path.is_file():
        return dict(json.loads(path.read_text()))
    pairs = [(queries[qid], texts[n]) for qid, names in wanted.items() for n in names]
    found = iter(probabilities(model, pairs))
    out = {qid: [next(found) for _ in names] for qid, names in wanted.items()}
    path.write_text(json.dumps(out))
    return out


# --------------------------------------------------------------------------- rankings


def reranked(
    ranked: Mapping[str, Sequence[Hit]], probs: Mapping[str, Sequence[float]], mix: float
) -> dict[str, list[Hit]]:
    """The first candidates reordered by ``mix`` x probability + (1 - ``mix``) x the
    default's score over the query's best; the rest keep their places after them."""
    out: dict[str, list[Hit]] = {}
    for qid, hits in ranked.items():
        head, tail = list(hits[:CANDIDATES]), list(hits[CANDIDATES:])
        top = head[0].score if head and head[0].score > 0 else 1.0
        mixed = [mix * p + (1 - mix) * h.score / top for h, p in zip(head, probs[qid], strict=True)]
        order = sorted(range(len(head)), key=lambda i: -mixed[i])
        out[qid] = [Hit(head[i].name, mixed[i]) for i in order] + tail
    return out


def abstained(
    ranked: Mapping[str, Sequence[Hit]],
    probs: Mapping[str, Sequence[float]],
    top: int,
    threshold: float,
) -> dict[str, list[Hit]]:
    """``ranked`` with no hits for every query whose first ``top`` candidates all have a
    probability below ``threshold``."""
    return {
        qid: (list(hits) if max(probs[qid][:top], default=0.0) >= threshold else [])
        for qid, hits in ranked.items()
    }


# --------------------------------------------------------------------------- choosing


def choose_threshold(
    dev: Mapping[str, Data],
    ranked: Mapping[str, Mapping[str, Sequence[Hit]]],
    probs: Mapping[str, Mapping[str, Sequence[float]]],
    top: int,
) -> float:
    """The highest threshold whose recall@5 cost is at most ABSTAIN_MAX_COST on every dev
    split (0 when none is)."""
    best = 0.0
    for threshold in THRESHOLD_GRID:
        costs = [
            refusal_cost(dev[d], ranked[d], abstained(ranked[d], probs[d], top, threshold))
            for d in dev
        ]
        if max(c["recall@5_cost"] for c in costs) <= ABSTAIN_MAX_COST:
            best = threshold
    return best


def dev_choices(cache: Path) -> dict[str, Any]:
    """The fold cross-encoders, their dev scores, and the mix and thresholds chosen there."""
    variant = shipped_variant()
    dev = {d: load_data(d, "dev", LIMIT, cache) for d in DATASETS}
    models = {d: fold_cross_encoder(d, dev) for d in DATASETS}
    ranked = {d: rank(dev[d], variant) for d in DATASETS}
    probs = {d: candidate_probabilities(models[d], dev[d], ranked[d]) for d in DATASETS}
    curve = {
        str(mix): {
            d: scores(dev[d], reranked(ranked[d], probs[d], mix))["all"]["ndcg@10"]
            for d in DATASETS
        }
        for mix in MIX_GRID
    }
    mix = max(MIX_GRID, key=lambda m: sum(curve[str(m)].values()))
    thresholds = {top: choose_threshold(dev, ranked, probs, top) for top in ABSTAIN_TOP}
    negatives = "mcp-workbench"
    dev_curve = {
        str(t): refusal_cost(
            dev[negatives], ranked[negatives], abstained(ranked[negatives], probs[negatives], 3, t)
        )
        for t in THRESHOLD_GRID[::5]
    }
    return {
        "models": {
            d: json.loads((p / "toolsearch-training.json").read_text()) for d, p in models.items()
        },
        "paths": models,
        "default_dev_ndcg@10": {d: scores(dev[d], ranked[d])["all"]["ndcg@10"] for d in DATASETS},
        "mix_curve": curve,
        "mix": mix,
        "thresholds": {str(k): v for k, v in thresholds.items()},
        "mcp-workbench_dev_curve_top3": dev_curve,
    }


def test_effects(
    cache: Path, models: Mapping[str, Path], mix: float, thresholds: Mapping[str, float], fold: bool
) -> dict[str, Any]:
    """Each dataset's test split, first stage with the fold embedding model (``fold``) or the
    shipped one, the cross-encoder always the fold one: the default against it reranked, and
    each abstention rule's cost (the default's cosine threshold beside them)."""
    variant, out = shipped_variant(), {}
    cosine = CALIBRATED_MIN_SIMILARITY[TUNED_MODEL]
    for name in DATASETS:
        data = load_data(name, "test", LIMIT, cache, fold=fold)
        ranked = rank(data, variant)
        probs = candidate_probabilities(models[name], data, ranked)
        again = reranked(ranked, probs, mix)
        out[name] = {
            "default": scores(data, ranked),
            "reranked": scores(data, again),
            "significance": significance(data, {"default": ranked, "reranked": again}, "default")[
                "reranked"
            ],
            "abstention": {
                top: refusal_cost(data, ranked, abstained(ranked, probs, int(top), t))
                for top, t in thresholds.items()
            },
            "cosine_abstention": abstention_effect(data, ranked, cosine),
        }
        log(f"reranker: {name} test ({'fold' if fold else 'shipped'} first stage) done")
    return out


def measure(cache: Path) -> dict[str, Any]:
    started = time.perf_counter()
    chosen = dev_choices(cache)
    models = chosen.pop("paths")
    tests = {
        setting: test_effects(cache, models, chosen["mix"], chosen["thresholds"], fold)
        for setting, fold in (("lodo", True), ("shipped_first_stage", False))
    }
    return {
        "benchmark": "reranker",
        "protocol": __doc__.split("\n\n")[2].strip() if __doc__ else "",
        "candidates": CANDIDATES,
        "negatives": NEGATIVES,
        "cosine_threshold": CALIBRATED_MIN_SIMILARITY[TUNED_MODEL],
        **chosen,
        "test": tests,
        "seconds": round(time.perf_counter() - started, 1),
    }


SETTINGS = {
    "lodo": "left out (first stage and cross-encoder never saw the dataset)",
    "shipped_first_stage": "shipped first stage, fold cross-encoder",
}


def _change(result: Mapping[str, Any], metric: str) -> str:
    before, after = result["default"]["all"][metric], result["reranked"]["all"][metric]
    mark = significance_mark(result["significance"], metric)
    return f"{before:.3f} → {after:.3f}{mark}"


def markdown(results: Mapping[str, Any]) -> str:
    """The reranking table (test splits) and the abstention table."""
    mixes = sorted(results["mix_curve"], key=float)
    lines = [
        "Dev ndcg@10 (fold first stage and fold cross-encoder) of the default, then of the mix "
        f"at {', '.join(mixes)} (1: the cross-encoder alone):",
        "",
        "| dataset | default | " + " | ".join(mixes) + " |",
        "|---|---:|" + "---:|" * len(mixes),
    ]
    for name, default in results["default_dev_ndcg@10"].items():
        cells = " | ".join(f"{results['mix_curve'][m][name]:.3f}" for m in mixes)
        lines.append(f"| {name} | {default:.3f} | {cells} |")
    lines += [
        "",
        f"Reranking the default's first {results['candidates']} hits (mix {results['mix']}, "
        "chosen on dev), test splits; * marks a significant change (paired t-test, p < .05):",
        "",
        "| first stage | dataset | ndcg@10 | recall@5 | hit@1 |",
        "|---|---|---:|---:|---:|",
    ]
    for setting, label in SETTINGS.items():
        for name, result in results["test"][setting].items():
            changes = [_change(result, m) for m in ("ndcg@10", "recall@5")]
            hit = result["default"]["all"]["hit@1"], result["reranked"]["all"]["hit@1"]
            lines.append(
                f"| {label} | {name} | {' | '.join(changes)} | {hit[0]:.3f} → {hit[1]:.3f} |"
            )
    lines += [
        "",
        "Abstention (shipped first stage): share of mcp-workbench test negatives offered a tool,"
        " and recall@5 lost on each test split:",
        "",
        "| rule | threshold | false-positive rate | " + " | ".join(DATASETS) + " |",
        "|---|---:|---:|" + "---:|" * len(DATASETS),
    ]
    shipped = results["test"]["shipped_first_stage"]
    rules = [
        (f"best of first {top} (cross-encoder)", t, top) for top, t in results["thresholds"].items()
    ]
    rules.append(("best cosine (the default)", results["cosine_threshold"], None))
    for label, threshold, top in rules:
        effects = [
            shipped[d]["abstention"][top] if top else shipped[d]["cosine_abstention"]
            for d in DATASETS
        ]
        costs = " | ".join(f"{e['recall@5_cost']:.3f}" for e in effects)
        fpr = effects[DATASETS.index("mcp-workbench")]["false_positive_rate"]
        lines.append(f"| {label} | {threshold} | {fpr:.3f} | {costs} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    return replay_script(argv, __doc__ or "", OUT, measure, markdown)


if __name__ == "__main__":
    raise SystemExit(main())
