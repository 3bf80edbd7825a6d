"""Fine-tuning a sentence-transformers model on labelled tool requests (lab/retrieval.md).

``toolsearch train --full`` and ``lab/fine_tune.py`` train the same way: each request
is paired with the embedded text of each of its gold tools, and the model learns to put a
request nearer its gold tool's text than every other tool text of its batch (in-batch
negatives: sentence-transformers' MultipleNegativesRankingLoss, written out here so training
needs only PyTorch). No tool appears twice in a batch, since a second copy of the gold tool
would count as a wrong answer. The settings (:class:`Recipe`) are the field's usual ones, fixed
before measuring: measured leave-one-dataset-out, the trained model also ranks catalogues it
never saw better than the published one (docs/results.md, table "fine_tune"; docs/training.md).
"""

from __future__ import annotations

import json
import random
import re
import shutil
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, NamedTuple

from toolsearch.dataset import Dataset, Query
from toolsearch.errors import ConfigError, MissingExtraError
from toolsearch.tool import Tool

from .tool_text import tool_text

__all__ = [
    "LOSS_WINDOW",
    "Pair",
    "Recipe",
    "batches",
    "description_queries",
    "fine_tune",
    "first_sentence",
    "load_trainable",
    "mine_hard_negatives",
    "recipe_pairs",
    "save_model",
    "sibling_group",
    "training_pairs",
    "warmup_schedule",
]


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
#: Steps averaged into the reported first and last loss; with fewer than twice as many steps
#: the loss says little about whether training helped (``toolsearch train`` says so).
LOSS_WINDOW = 10


class Pair(NamedTuple):
    """A request, the text and name of one of its gold tools and, when mined, a hard negative:
    a tool of the same catalogue the request does not ask for (empty strings when none)."""

    request: str
    text: str
    name: str
    negative: str = ""
    negative_name: str = ""


@dataclass(frozen=True)
class Recipe:
    """How a model is trained: batch size, AdamW learning rate, share of linear warm-up (then
    linear decay to zero), passes over the pairs, word pieces kept per text, seed, CPU threads
    and the similarity scale of the loss. ``hard_negatives``: each request also meets one mined
    hard negative (:func:`mine_hard_negatives`, at most ``negative_margin`` x its gold tool's
    similarity). ``sibling_negatives``: that negative is taken from the gold tool's siblings
    (:func:`sibling_group`) when one qualifies, so the model learns the verb that tells a
    server's tools apart rather than only which server a request is about."""

    batch: int = 32
    learning_rate: float = 2e-5
    warmup: float = 0.1
    epochs: int = 2
    max_seq_length: int = 128
    seed: int = 42
    threads: int = 2
    scale: float = 20.0
    hard_negatives: bool = True
    negative_margin: float = 0.95
    sibling_negatives: bool = False

    def describe(self) -> dict[str, Any]:
        """The settings, as recorded with a trained model and hashed into cache keys (the
        mining settings only when mining is on, so a plain recipe keeps its record)."""
        settings = asdict(self)
        if not self.sibling_negatives or not self.hard_negatives:
            del settings["sibling_negatives"]
        if not self.hard_negatives:
            del settings["hard_negatives"], settings["negative_margin"]
        return settings


def description_queries(name: str, tools: Sequence[Tool], min_words: int = 4) -> Dataset:
    """Labelled requests made from tool metadata alone (lab/retrieval.md, "Pairs from tool
    metadata"): each tool whose description opens with a sentence of at least ``min_words``
    words is asked for by that sentence, and its tool text is read without the description, so
    the pair teaches what names and parameters mean instead of repeating the request's words.
    What a catalogue with no labelled queries can still teach the model."""
    bare = [replace(tool, description="") for tool in tools]
    queries: list[Query] = []
    qrels: dict[str, dict[str, int]] = {}
    for number, tool in enumerate(tools):
        sentence = first_sentence(tool.description)
        if len(sentence.split()) >= min_words:
            queries.append(Query(f"{name}#{number}", sentence))
            qrels[queries[-1].id] = {tool.name: 1}
    return Dataset(f"{name} (descriptions)", bare, queries, qrels)


def first_sentence(text: str) -> str:
    """The first sentence of ``text``, spaces normalised, without its full stop."""
    return _SENTENCE_END.split(" ".join(text.split()), maxsplit=1)[0].rstrip(".")


def training_pairs(
    labelled: Iterable[tuple[Dataset, Sequence[Query]]],
    fields: Sequence[str],
    max_words: int | None,
) -> list[Pair]:
    """A pair for every positively graded gold tool of every labelled query, the tool's text
    being what the embedding backend embeds (``fields``, ``max_words``)."""
    pairs: list[Pair] = []
    for dataset, queries in labelled:
        tools: dict[str, Tool] = {tool.name: tool for tool in dataset.tools}
        texts: dict[str, str] = {}
        for query in queries:
            for name, grade in dataset.qrels.get(query.id, {}).items():
                if grade > 0 and name in tools:
                    if name not in texts:
                        texts[name] = tool_text(tools[name], fields, max_words)
                    pairs.append(Pair(query.text, texts[name], name))
    return pairs


def recipe_pairs(
    model: Any,
    labelled: Sequence[tuple[Dataset, Sequence[Query]]],
    fields: Sequence[str],
    max_words: int | None,
    recipe: Recipe,
) -> list[Pair]:
    """The pairs ``recipe`` trains ``model`` on: with mined hard negatives when it asks for
    them (mined by ``model`` before training), else :func:`training_pairs`."""
    if recipe.hard_negatives:
        group = sibling_group if recipe.sibling_negatives else None
        return mine_hard_negatives(
            model, labelled, fields, max_words, recipe.negative_margin, siblings=group
        )
    return training_pairs(labelled, fields, max_words)


def sibling_group(tool: Tool) -> str | None:
    """The server or API a tool belongs to, whose other tools are its siblings: its
    ``server``, else the part of a dotted name before the first dot (``datadog.List_keys``,
    ``hf.bert-base``), else none."""
    if tool.server:
        return tool.server
    head, dot, _ = tool.name.partition(".")
    return head if dot and head else None


def mine_hard_negatives(
    model: Any,
    labelled: Iterable[tuple[Dataset, Sequence[Query]]],
    fields: Sequence[str],
    max_words: int | None,
    margin: float = 0.95,
    siblings: Callable[[Tool], str | None] | None = None,
) -> list[Pair]:
    """:func:`training_pairs` with a hard negative each: the tool of the request's catalogue
    that ``model`` ranks highest among those that are not a gold tool of the request and are
    less similar than ``margin`` x the gold tool (NV-Retriever's positive-aware "TopK-PercPos"
    mining, Moreira et al. 2024: the margin keeps unlabelled true answers out). With
    ``siblings`` (a tool's group, e.g. :func:`sibling_group`), the best qualifying tool of the
    gold tool's own group comes first. A pair keeps no negative when no tool qualifies."""
    if not 0 < margin <= 1:
        raise ConfigError(f"negative_margin must be in (0, 1], got {margin!r}")
    pairs: list[Pair] = []
    for dataset, queries in labelled:
        found = training_pairs([(dataset, queries)], fields, max_words)
        if not found:
            continue
        tools = list({tool.name: tool for tool in dataset.tools}.values())
        texts = [tool_text(tool, fields, max_words) for tool in tools]
        slot = {tool.name: i for i, tool in enumerate(tools)}
        gold: dict[str, set[str]] = {}
        for query in queries:
            graded = dataset.qrels.get(query.id, {})
            gold.setdefault(query.text, set()).update(n for n, g in graded.items() if g > 0)
        requests = [text for text, names in gold.items() if names]
        encode = {
            "normalize_embeddings": True,
            "convert_to_numpy": True,
            "batch_size": 64,
            "show_progress_bar": False,
        }
        similarity = model.encode(requests, **encode) @ model.encode(texts, **encode).T
        row = {text: i for i, text in enumerate(requests)}
        groups = [siblings(tool) if siblings else None for tool in tools]
        for pair in found:
            scores = similarity[row[pair.request]]
            ceiling = margin * scores[slot[pair.name]]
            qualifying = [
                j
                for j in scores.argsort()[::-1]
                if tools[j].name not in gold[pair.request] and scores[j] < ceiling
            ]
            own = groups[slot[pair.name]]
            chosen = next((j for j in qualifying if own and groups[j] == own), None)
            if chosen is None and qualifying:
                chosen = qualifying[0]
            if chosen is not None:
                pair = pair._replace(negative=texts[chosen], negative_name=tools[chosen].name)
            pairs.append(pair)
    return pairs


def batches(pairs: Sequence[Pair], size: int) -> list[list[Pair]]:
    """The pairs in batches of at most ``size``, each pair in the first batch that has room and
    holds none of its tools (gold or negative) yet: a second copy of a gold tool would count as
    a wrong answer."""
    out: list[list[Pair]] = []
    tools: list[set[str]] = []
    for pair in pairs:
        mine = {pair.name, pair.negative_name} - {""}
        for batch, names in zip(out, tools, strict=True):
            if len(batch) < size and not mine & names:
                batch.append(pair)
                names.update(mine)
                break
        else:
            out.append([pair])
            tools.append(set(mine))
    return out


def load_trainable(model_path: Path, recipe: Recipe) -> Any:
    """The sentence-transformers model at ``model_path``, seeded and threaded for training."""
    try:
        import torch
        from sentence_transformers import SentenceTransformer
    except ImportError as exc:
        raise MissingExtraError("fine-tuning", "embedding", [exc.name or "torch"]) from exc
    torch.manual_seed(recipe.seed)
    torch.set_num_threads(recipe.threads)
    return SentenceTransformer(str(model_path), device="cpu", local_files_only=True)


def warmup_schedule(steps: int, warmup: float) -> Any:
    """The learning-rate factor of each step: a linear warm-up over ``warmup`` x ``steps``
    steps, then a linear decay to zero (for ``torch.optim.lr_scheduler.LambdaLR``)."""
    ramp = max(1, round(warmup * steps))

    def factor(step: int) -> float:
        if step < ramp:
            return (step + 1) / ramp
        return max(0.0, (steps - step) / max(1, steps - ramp))

    return factor


def fine_tune(model: Any, pairs: Sequence[Pair], recipe: Recipe = Recipe()) -> dict[str, Any]:
    """Train ``model`` in place on ``pairs`` (shuffled with the recipe's seed); what was done."""
    import torch

    if not pairs:
        raise ConfigError("fine-tuning needs labelled queries with gold tools; none were given")
    order = list(pairs)
    plan: list[list[Pair]] = []
    for epoch in range(recipe.epochs):
        random.Random(recipe.seed + epoch).shuffle(order)
        plan += batches(order, recipe.batch)
    optimiser = torch.optim.AdamW(model.parameters(), lr=recipe.learning_rate)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimiser, warmup_schedule(len(plan), recipe.warmup)
    )
    model.max_seq_length = recipe.max_seq_length
    model.train()
    started, losses = time.perf_counter(), []
    for batch in plan:
        loss = _batch_loss(torch, model, batch, recipe.scale)
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        schedule.step()
        losses.append(float(loss.detach()))
    model.eval()
    # first and last losses are means over windows that never overlap (one step each at two)
    window = max(1, min(LOSS_WINDOW, len(losses) // 2))
    head, tail = losses[:window], losses[-window:]
    return {
        "pairs": len(pairs),
        "steps": len(plan),
        "seconds": round(time.perf_counter() - started, 1),
        "first_loss": round(sum(head) / len(head), 4),
        "last_loss": round(sum(tail) / len(tail), 4),
        "loss_window": window,
        "recipe": recipe.describe(),
    }


def _batch_loss(torch: Any, model: Any, batch: Sequence[Pair], scale: float) -> Any:
    """Cross-entropy of each request over its batch's tool texts, gold and hard negatives
    (cosine x ``scale``)."""
    functional = torch.nn.functional
    texts = [p.text for p in batch] + [p.negative for p in batch if p.negative_name]
    requests = model(model.preprocess([p.request for p in batch]))["sentence_embedding"]
    tools = model(model.preprocess(texts))["sentence_embedding"]
    similarity = functional.normalize(requests, dim=-1) @ functional.normalize(tools, dim=-1).T
    return functional.cross_entropy(scale * similarity, torch.arange(len(batch)))


def save_model(model: Any, folder: Path, record: dict[str, Any]) -> None:
    """Save ``model`` as a sentence-transformers folder whose weights are stored in float16
    (half the size; the shipped model's vectors barely move, lab/retrieval.md) and loaded as
    float32, with ``record`` (how it was trained) as ``toolsearch-training.json``."""
    from safetensors.torch import load_file, save_file

    model.save(str(folder))
    weights = folder / "model.safetensors"
    tensors = load_file(str(weights))
    half = {k: (v.half() if v.is_floating_point() else v).contiguous() for k, v in tensors.items()}
    save_file(half, str(weights), metadata={"format": "pt"})
    config_file = folder / "config.json"
    shutil.copymode(config_file, weights)  # safetensors writes 0600; the rest follows umask
    config = json.loads(config_file.read_text(encoding="utf-8"))
    config["dtype"] = "float32"  # load as float32 whatever the stored precision
    config_file.write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    text = json.dumps(record, indent=2) + "\n"
    (folder / "toolsearch-training.json").write_text(text, encoding="utf-8")
