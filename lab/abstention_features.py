"""What a "no tool fits" rule can read of a request, with the catalogue's probe reference.

One cosine threshold serves every catalogue today, yet how high the best cosine of a request
no tool fits runs depends on the catalogue (its size, its domain, how its descriptions are
written). So a catalogue can be measured against out-of-catalogue probes — requests written for
toolsearch that no tool catalogue is meant to serve (``datasets/abstention-probes``) — and a
request judged against that reference. :func:`features` is what :mod:`lab.abstention` learns
from (:data:`FEATURES`): the best cosine, and the same above the probes' median best cosine on
this catalogue; the best BM25 score per request word, likewise; the share of request words the
catalogue's vocabulary knows; the share the best tool's own text says; the share of the words
of one of the embedding's first tools' names that the request says; whether the request names
a catalogue server. Every input is what a search has at hand (the members' hits, the indexed
tools), so a rule built on them would cost a search a few numpy operations; :class:`Classifier`
is the logistic regression such a rule would ship, evaluated without scikit-learn.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from importlib.resources import files
from pathlib import Path
from typing import Any

from toolsearch.backend import Hit
from toolsearch.fusion import name_words
from toolsearch.query import ParsedQuery
from toolsearch.stemming import TermNormaliser
from toolsearch.tokenize import query_tokens, tool_fields
from toolsearch.tool import Tool

__all__ = [
    "FEATURES",
    "Catalogue",
    "Probes",
    "Reference",
    "catalogue_of",
    "features",
    "probe_requests",
]

#: The features the classifier reads, in order.
FEATURES: tuple[str, ...] = (
    "cosine",
    "cosine_above_probes",
    "bm25_per_word",
    "bm25_above_probes",
    "known_words",
    "top_tool_words",
    "name_said",
    "server_named",
)
#: The embedding's first hits whose names :func:`features` reads.
NAMED_HITS = 3
#: The quantile of the probes' scores a request is set against (robust to the few probes a
#: catalogue happens to serve).
PROBE_QUANTILE = 0.5


@lru_cache(maxsize=1)
def _stemmer() -> TermNormaliser:
    return TermNormaliser(stem=True, stopwords=True)


def probe_requests() -> list[str]:
    """The out-of-catalogue probe requests (``datasets/abstention-probes``, shipped with the
    package data)."""
    folder = Path(str(files("toolsearch.datasets"))) / "abstention-probes"
    text = (folder / "probes.jsonl").read_text(encoding="utf-8")
    return [json.loads(line)["text"] for line in text.splitlines() if line.strip()]


def request_words(query: ParsedQuery) -> list[str]:
    """The request's content words, stemmed as the stemmed bm25 member reads them."""
    return list(dict.fromkeys(_stemmer()(query_tokens(query))))


def tool_words(tool: Tool) -> frozenset[str]:
    """Every stemmed content word of ``tool``'s name, server, description, hint and parameters."""
    fields = tool_fields(tool)
    return frozenset(
        _stemmer()(
            [*fields.server, *fields.name, *fields.description, *fields.hint, *fields.params]
        )
    )


@dataclass(frozen=True)
class Reference:
    """How high out-of-catalogue probes score on one catalogue: the :data:`PROBE_QUANTILE`
    of their best cosine and of their best BM25 score per request word."""

    cosine: float = 0.0
    bm25_per_word: float = 0.0


@dataclass(frozen=True)
class Catalogue:
    """What the features need of the indexed tools: each tool's words and its own name's, the
    vocabulary, the service words of each server, and the probes' :class:`Reference`."""

    words: Mapping[str, frozenset[str]]
    names: Mapping[str, frozenset[str]]
    vocabulary: frozenset[str]
    servers: tuple[frozenset[str], ...]
    reference: Reference = Reference()


def catalogue_of(tools: Sequence[Tool], reference: Reference | None = None) -> Catalogue:
    words = {tool.name: tool_words(tool) for tool in tools}
    named = {tool.name: name_words(tool) for tool in tools}
    own = {name: frozenset(_stemmer()(sorted(found.own))) for name, found in named.items()}
    servers = {found.server for found in named.values()} - {frozenset()}
    vocabulary = frozenset().union(*words.values()) if words else frozenset()
    return Catalogue(words, own, vocabulary, tuple(servers), reference or Reference())


@dataclass(frozen=True)
class Probes:
    """The members' best raw scores for each probe: ``cosines`` and ``bm25_per_word``."""

    cosines: Sequence[float]
    bm25_per_word: Sequence[float]

    def reference(self) -> Reference:
        return Reference(_quantile(self.cosines), _quantile(self.bm25_per_word))


def _quantile(values: Sequence[float]) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(PROBE_QUANTILE * len(ordered)))]


def best(hits: Sequence[Hit] | None) -> float:
    return hits[0].score if hits else 0.0


def per_word(score: float, words: Sequence[str]) -> float:
    """A BM25 score per request word: BM25 sums over the words, so a long request scores
    higher whether or not a tool fits it."""
    return score / max(1, len(words))


def features(
    query: ParsedQuery,
    cosines: Sequence[Hit] | None,
    lexical: Sequence[Hit] | None,
    catalogue: Catalogue,
) -> dict[str, float]:
    """The classifier's features of ``query`` from the embedding member's hits (``cosines``)
    and the stemmed bm25 member's (``lexical``) on ``catalogue``."""
    words = request_words(query)
    cosine = best(cosines)
    bm25 = per_word(best(lexical), words)
    known = sum(w in catalogue.vocabulary for w in words) / len(words) if words else 0.0
    top = catalogue.words.get(cosines[0].name, frozenset()) if cosines else frozenset()
    in_top = sum(w in top for w in words) / len(words) if words else 0.0
    said = set(words)
    name_said = max(
        (
            _share(catalogue.names.get(hit.name, frozenset()), said)
            for hit in (cosines or [])[:NAMED_HITS]
        ),
        default=0.0,
    )
    raw = set(query_tokens(query))
    named = any(server <= raw for server in catalogue.servers)
    ref = catalogue.reference
    return {
        "cosine": cosine,
        "cosine_above_probes": cosine - ref.cosine,
        "bm25_per_word": bm25,
        "bm25_above_probes": math.log1p(bm25) - math.log1p(ref.bm25_per_word),
        "known_words": known,
        "top_tool_words": in_top,
        "name_said": name_said,
        "server_named": float(named),
    }


def _share(part: frozenset[str], whole: set[str]) -> float:
    """The share of ``part``'s words in ``whole`` (0 for no words)."""
    return len(part & whole) / len(part) if part else 0.0


@dataclass(frozen=True)
class Classifier:
    """Logistic regression over standardised :data:`FEATURES`: refuse below ``threshold``."""

    names: tuple[str, ...]
    mean: tuple[float, ...]
    scale: tuple[float, ...]
    weights: tuple[float, ...]
    bias: float
    threshold: float

    def probability(self, found: Mapping[str, float]) -> float:
        z = self.bias + sum(
            w * (found[n] - m) / s
            for n, m, s, w in zip(self.names, self.mean, self.scale, self.weights, strict=True)
        )
        return 1.0 / (1.0 + math.exp(-z))

    def to_json(self) -> dict[str, Any]:
        return {
            "features": list(self.names),
            "mean": list(self.mean),
            "scale": list(self.scale),
            "weights": list(self.weights),
            "bias": self.bias,
            "threshold": self.threshold,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Classifier:
        return cls(
            tuple(data["features"]),
            tuple(float(v) for v in data["mean"]),
            tuple(float(v) for v in data["scale"]),
            tuple(float(v) for v in data["weights"]),
            float(data["bias"]),
            float(data["threshold"]),
        )


def load_classifier(path: Path) -> Classifier:
    return Classifier.from_json(json.loads(path.read_text(encoding="utf-8")))
