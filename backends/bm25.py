"""Backend ``bm25``: Okapi BM25 over tool-aware tokens, with Lucene's IDF by default.

Each tool is one bag of tokens from :mod:`toolsearch.tokenize`: its server, name parts,
description, search hint and parameter names, each field's tokens repeated by its weight
(:data:`~toolsearch.tokenize.DEFAULT_FIELD_WEIGHTS`: name x3, hint x2, the rest x1), so a name
part counts in term frequency and in document length like three words of prose.

Which BM25
----------
The score of a tool *d* for query tokens *q₁…qₙ* (a repeated token counts each time) is
``Σ idf(q) · tf·(k1+1) / (tf + k1·(1 - b + b·|d|/avgdl))``. The variants differ in ``idf``:

``lucene`` (default)
    ``idf = ln(1 + (N - n + 0.5)/(n + 0.5)) = ln((N + 1)/(n + 0.5))`` — Lucene's and
    Elasticsearch's BM25. Always positive and falling with document frequency *n*, so a term
    found in half the catalogue still counts a little, and every tool sharing a token with the
    query scores above zero.
``okapi``
    rank-bm25's ``BM25Okapi``: ``idf = ln((N - n + 0.5)/(n + 0.5))``, negative values replaced
    by ``epsilon`` x the mean idf. A term in exactly half of the tools gets idf 0 (so in a
    two-tool catalogue a perfect match scores nothing) and one in more than half gets the same
    floor as every other common term. Kept for comparison with published rank-bm25 numbers.
``bm25l``
    rank-bm25's ``BM25L`` (Lucene's idf, with ``delta`` added to the length-normalised term
    frequency, as rank-bm25 writes it), which favours long documents a little more.

rank-bm25's ``BM25Plus`` is not offered: it adds ``idf · delta`` for every query term to every
document, matching or not, so every tool would score above zero for any query.

Two engines, one score
----------------------
``engine="numpy"`` (default) keeps an inverted index in numpy arrays — for each term the ids of
the tools that contain it and their term frequencies — and scores a query by gathering the
posting lists of its tokens, so a query touches only the tools that share a token with it.
Changes are incremental: an upserted tool goes to a small delta segment, a removed one is masked
out, and corpus statistics (N, document frequencies, total length) are kept exact, so scores equal
a rebuild's bit for bit; the segments are merged back once the delta outgrows an eighth of the
catalogue. ``engine="rank_bm25"`` hands the same token bags to rank-bm25 and rebuilds it on every
change: the slow reference, equal to the numpy engine within floating-point rounding (the tests
check 1e-9 relative). For ``lucene`` it is rank-bm25's ``BM25Okapi`` with the idf table of
``BM25L``, which is exactly Lucene's formula.

Ties keep pool order (:func:`~toolsearch.tool.pool_sort_key`) whatever order tools were indexed
or upserted in.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Container, Iterable, Mapping, Sequence
from itertools import chain
from typing import TYPE_CHECKING, Any, ClassVar

from toolsearch.backend import BaseBackend, Hit
from toolsearch.backends.tool_text import param_descriptions_text
from toolsearch.errors import ConfigError
from toolsearch.query import ParsedQuery
from toolsearch.stemming import TermNormaliser
from toolsearch.tokenize import (
    QUERY_RULES_VERSION,
    TOKENIZER_VERSION,
    SchemaCache,
    check_field_weights,
    query_tokens,
    tokenize,
    tool_fields,
    weighted_tokens,
)
from toolsearch.tool import Tool, pool_sort_key

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

__all__ = ["VARIANTS", "BM25Backend", "BM25Index"]

#: The BM25 variants this backend scores with.
VARIANTS: tuple[str, ...] = ("lucene", "okapi", "bm25l")
ENGINES: tuple[str, ...] = ("numpy", "rank_bm25")

# Merge the delta segment into the main one when it (plus removed tools still in the main
# segment) exceeds this fraction of the catalogue, or this many tools for small catalogues.
_COMPACT_FRACTION = 8
_COMPACT_MIN = 256
# Sample size per requested hit when bounding the top-k threshold (see BM25Index.select).
_SAMPLE_PER_K = 64


def _number(name: str, value: object, *, low: float, high: float | None = None) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ConfigError(f"bm25 option {name} must be a finite number, got {value!r}")
    if value < low or (high is not None and value > high):
        bound = f"between {low} and {high}" if high is not None else f"at least {low}"
        raise ConfigError(f"bm25 option {name} must be {bound}, got {value!r}")
    return float(value)


class BM25Index:
    """The numpy engine: an incremental inverted index with exact BM25 statistics.

    Tools live in *slots* (positions in the arrays); a full build gives slot = pool position. A
    main segment holds the postings of every tool present at the last build in three arrays
    (``starts`` by term id, ``docs``, ``tfs``); tools upserted since live in a dict-based delta
    segment; removed tools keep their main postings but are masked out of every score.
    """

    def __init__(
        self,
        *,
        variant: str = "lucene",
        k1: float = 1.2,
        b: float = 0.75,
        delta: float = 0.5,
        epsilon: float = 0.25,
    ) -> None:
        import numpy as np

        self.variant, self.k1, self.b, self.delta, self.epsilon = variant, k1, b, delta, epsilon
        self.vocab: dict[str, int] = {}
        self._df: list[int] = []
        self._slots: list[Tool | None] = []
        self._slot_of: dict[str, int] = {}
        self._lengths: list[int] = []
        self._total_length = 0
        self._live = 0
        # Main segment: every slot below _main_slots. Its bags (term ids and frequencies per
        # tool, slot after slot) and its postings (the same pairs grouped by term).
        self._main_slots = 0
        self._main_terms = 0
        self._bag_offsets: NDArray[np.int64] = np.zeros(1, dtype=np.int64)
        self._bag_ids: NDArray[np.int32] = np.zeros(0, dtype=np.int32)
        self._bag_tfs: NDArray[np.float32] = np.zeros(0, dtype=np.float32)
        self._starts: NDArray[np.int64] = np.zeros(1, dtype=np.int64)
        self._docs: NDArray[np.int64] = np.zeros(0, dtype=np.int64)
        self._tfs: NDArray[np.float32] = np.zeros(0, dtype=np.float32)
        # Delta segment: slots upserted since the last build, postings by term id.
        self._delta_bags: dict[int, tuple[list[int], list[int]]] = {}
        self._delta: dict[int, dict[int, float]] = {}
        self._dead_main: set[int] = set()
        self._cache: dict[str, Any] = {}

    # ------------------------------------------------------------------ building
    def _encode(self, tokens: Sequence[str]) -> tuple[list[int], list[int]]:
        """A token bag as (term ids, frequencies), new terms added to the vocabulary."""
        counts = Counter(tokens)
        vocab = self.vocab
        ids = [vocab.get(term, -1) for term in counts]
        if -1 in ids:
            for i, term in enumerate(counts):
                if ids[i] == -1:
                    tid = vocab.get(term)
                    if tid is None:
                        tid = vocab[term] = len(vocab)
                        self._df.append(0)
                    ids[i] = tid
        return ids, list(counts.values())

    def _bag(self, slot: int) -> tuple[list[int], list[int]]:
        found = self._delta_bags.get(slot)
        if found is not None:
            return found
        start, end = self._bag_offsets[slot], self._bag_offsets[slot + 1]
        return self._bag_ids[start:end].tolist(), self._bag_tfs[start:end].astype(int).tolist()

    def build(self, tools: Sequence[Tool], bags: Sequence[Sequence[str]]) -> None:
        """Replace the index with ``tools`` and their token bags (same order)."""
        import numpy as np

        # Slots in pool order, so large ties can be ordered by slot (already sorted input,
        # as the engine passes it, costs one linear pass).
        pairs = sorted(zip(tools, bags, strict=True), key=lambda pair: pool_sort_key(pair[0]))
        tools = [tool for tool, _ in pairs]
        bags = [bag for _, bag in pairs]
        self.vocab = {}
        self._df = []
        encoded = [self._encode(bag) for bag in bags]
        sizes = np.fromiter((len(ids) for ids, _ in encoded), dtype=np.int64, count=len(encoded))
        total = int(sizes.sum())
        ids = np.fromiter(chain.from_iterable(i for i, _ in encoded), dtype=np.int32, count=total)
        tfs = np.fromiter(chain.from_iterable(t for _, t in encoded), dtype=np.float32, count=total)
        self._rebuild(list(tools), sizes, ids, tfs, [len(bag) for bag in bags])

    def _rebuild(
        self,
        tools: list[Tool],
        sizes: NDArray[np.int64],
        ids: NDArray[np.int32],
        tfs: NDArray[np.float32],
        lengths: list[int],
    ) -> None:
        """Make ``tools`` (slot = position) the main segment, from their bags laid end to end."""
        import numpy as np

        n_terms = len(self.vocab)
        self._slots = list(tools)
        self._slot_of = {tool.name: slot for slot, tool in enumerate(tools)}
        self._lengths = list(lengths)
        self._total_length = sum(lengths)
        self._live = len(tools)
        self._main_slots = len(tools)
        self._main_terms = n_terms
        self._bag_offsets = np.concatenate(([0], np.cumsum(sizes))).astype(np.int64)
        self._bag_ids, self._bag_tfs = ids, tfs
        docs = np.repeat(np.arange(len(tools), dtype=np.int64), sizes)
        order = np.argsort(ids, kind="stable")
        counts = np.bincount(ids, minlength=n_terms)
        self._starts = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
        self._docs = docs[order]
        self._tfs = tfs[order]
        self._df = counts.tolist()
        self._delta_bags = {}
        self._delta = {}
        self._dead_main = set()
        self._cache = {}

    def upsert(self, tools: Sequence[Tool], bags: Sequence[Sequence[str]]) -> None:
        """Add or replace tools (matched by name) without touching the others."""
        for tool, tokens in zip(tools, bags, strict=True):
            self._drop(tool.name)
            ids, tfs = self._encode(tokens)
            slot = len(self._slots)
            self._slots.append(tool)
            self._slot_of[tool.name] = slot
            self._delta_bags[slot] = (ids, tfs)
            self._lengths.append(len(tokens))
            self._total_length += len(tokens)
            self._live += 1
            for tid, tf in zip(ids, tfs, strict=True):
                self._df[tid] += 1
                self._delta.setdefault(tid, {})[slot] = float(tf)
        self._changed()

    def remove(self, names: Iterable[str]) -> None:
        """Drop the named tools; unknown names are ignored."""
        for name in names:
            self._drop(name)
        self._changed()

    def _drop(self, name: str) -> None:
        slot = self._slot_of.pop(name, None)
        if slot is None:
            return
        ids, _ = self._bag(slot)
        in_delta = self._delta_bags.pop(slot, None) is not None
        for tid in ids:
            self._df[tid] -= 1
            if in_delta:
                postings = self._delta[tid]
                del postings[slot]
                if not postings:
                    del self._delta[tid]
        if not in_delta:
            self._dead_main.add(slot)
        self._total_length -= self._lengths[slot]
        self._live -= 1
        self._slots[slot] = None

    def _changed(self) -> None:
        self._cache = {}
        stale = len(self._delta_bags) + len(self._dead_main)
        if stale > max(_COMPACT_MIN, self._live // _COMPACT_FRACTION):
            self.compact()

    def compact(self) -> None:
        """Merge the delta segment into the main one (slots renumbered in pool order)."""
        import numpy as np

        live = sorted(
            ((tool, slot) for slot, tool in enumerate(self._slots) if tool is not None),
            key=lambda pair: pool_sort_key(pair[0]),
        )
        id_parts: list[Any] = []
        tf_parts: list[Any] = []
        offsets = self._bag_offsets
        for _, slot in live:
            delta = self._delta_bags.get(slot)
            if delta is None:
                start, end = offsets[slot], offsets[slot + 1]
                id_parts.append(self._bag_ids[start:end])
                tf_parts.append(self._bag_tfs[start:end])
            else:
                id_parts.append(np.asarray(delta[0], dtype=np.int32))
                tf_parts.append(np.asarray(delta[1], dtype=np.float32))
        sizes = np.fromiter((len(p) for p in id_parts), dtype=np.int64, count=len(id_parts))
        ids = np.concatenate(id_parts) if id_parts else np.zeros(0, dtype=np.int32)
        tfs = np.concatenate(tf_parts) if tf_parts else np.zeros(0, dtype=np.float32)
        self._rebuild(
            [tool for tool, _ in live],
            sizes,
            ids.astype(np.int32, copy=False),
            tfs.astype(np.float32, copy=False),
            [self._lengths[slot] for _, slot in live],
        )

    # ------------------------------------------------------------------ scoring
    def knows(self, term: str) -> bool:
        """Whether ``term`` is a word of the tools indexed (or once indexed) here."""
        return term in self.vocab

    def __len__(self) -> int:
        return self._live

    @property
    def tools(self) -> dict[str, Tool]:
        """The indexed tools by name."""
        return {name: self._slots[slot] for name, slot in self._slot_of.items()}  # type: ignore[misc]

    def _norms(self) -> NDArray[np.float64]:
        """Per slot: ``k1·(1 - b + b·|d|/avgdl)`` (lucene, okapi) or ``1 - b + b·|d|/avgdl``."""
        norms: NDArray[np.float64] | None = self._cache.get("norms")
        if norms is None:
            import numpy as np

            avgdl = self._total_length / self._live
            lengths = np.asarray(self._lengths, dtype=np.float64)
            norms = 1 - self.b + self.b * lengths / avgdl
            if self.variant != "bm25l":
                norms = self.k1 * norms
            self._cache["norms"] = norms
        return norms

    def _main_part(self, tid: int) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
        """The main-segment postings of term ``tid``: tool slots and their term-frequency parts,
        computed on first use after each change of the corpus statistics (a change moves
        avgdl and with it every part, so they are recomputed only for terms being queried)."""
        parts: dict[int, tuple[NDArray[np.int64], NDArray[np.float64]]] = self._cache.setdefault(
            "parts", {}
        )
        found = parts.get(tid)
        if found is None:
            start, end = self._starts[tid], self._starts[tid + 1]
            docs = self._docs[start:end]
            found = (docs, self._term_part(self._tfs[start:end], self._norms()[docs]))
            parts[tid] = found
        return found

    def _mean_okapi_idf(self) -> float:
        mean: float | None = self._cache.get("mean_idf")
        if mean is None:
            import numpy as np

            df = np.asarray(self._df, dtype=np.float64)
            df = df[df > 0]
            n = self._live
            idfs = (np.log(n - df + 0.5) - np.log(df + 0.5)).tolist()
            # fsum is exactly rounded, so the mean does not depend on vocabulary order and an
            # incrementally updated index agrees with a rebuild to the last bit.
            mean = math.fsum(idfs) / len(idfs) if idfs else 0.0
            self._cache["mean_idf"] = mean
        return mean

    def idf(self, n: int) -> float:
        """The variant's idf of a term found in ``n`` of the indexed tools."""
        total = self._live
        if self.variant == "okapi":
            value = math.log(total - n + 0.5) - math.log(n + 0.5)
            return value if value >= 0 else self.epsilon * self._mean_okapi_idf()
        return math.log(total + 1) - math.log(n + 0.5)

    def _term_part(self, tfs: NDArray[Any], norms: NDArray[np.float64]) -> NDArray[np.float64]:
        import numpy as np

        # Frequencies are stored as float32 (exact for integers); compute in float64.
        tfs = tfs.astype(np.float64, copy=False)
        k1 = self.k1
        if self.variant == "bm25l":
            ctd = tfs / norms
            return tfs * (k1 + 1) * (ctd + self.delta) / (k1 + ctd + self.delta)
        return tfs * (k1 + 1) / (tfs + norms)

    def scores(self, tokens: Sequence[str]) -> NDArray[np.float64]:
        """BM25 score of every slot for ``tokens`` (removed slots score 0)."""
        import numpy as np

        scores = np.zeros(len(self._slots), dtype=np.float64)
        if not self._live or not self._total_length:
            return scores
        norms = self._norms()
        starts = self._starts
        vocab, df = self.vocab, self._df
        for term, count in Counter(tokens).items():
            tid = vocab.get(term)
            if tid is None or df[tid] == 0:
                continue
            weight = count * self.idf(df[tid])
            if weight == 0:
                continue
            if tid < self._main_terms and starts[tid + 1] > starts[tid]:
                docs, parts = self._main_part(tid)
                scores[docs] += weight * parts
            postings = self._delta.get(tid)
            if postings:
                docs = np.fromiter(postings.keys(), dtype=np.int64, count=len(postings))
                tfs = np.fromiter(postings.values(), dtype=np.float64, count=len(postings))
                scores[docs] += weight * self._term_part(tfs, norms[docs])
        if self._dead_main:
            scores[list(self._dead_main)] = 0.0
        return scores

    def top(self, tokens: Sequence[str], k: int) -> list[tuple[Tool, float]]:
        """The best ``k`` tools with score > 0, best first, ties in pool order."""
        if k <= 0 or not self._live:
            return []
        return self.select(self.scores(tokens), k)

    def score_map(self, tokens: Sequence[str]) -> dict[str, float]:
        """Every indexed tool's score for ``tokens``, zeros included."""
        scores = self.scores(tokens).tolist()
        return {name: scores[slot] for name, slot in self._slot_of.items()}

    def select(self, scores: NDArray[np.float64], k: int) -> list[tuple[Tool, float]]:
        """Top ``k`` slots of a score array (score > 0), ties by pool order."""
        import numpy as np

        size = scores.size
        threshold = 0.0
        if size > _SAMPLE_PER_K * k * 4:
            # The k-th best of an evenly spaced sample is at most the k-th best overall, so
            # every top-k slot scores at least that much: a cheap bound that leaves a few
            # hundred candidates instead of every tool sharing a common word with the query.
            sample = scores[:: size // (_SAMPLE_PER_K * k)]
            threshold = max(0.0, float(np.partition(sample, sample.size - k)[sample.size - k]))
        if threshold > 0:
            candidates = np.flatnonzero(scores >= threshold)
        else:
            candidates = np.flatnonzero(scores > 0)
        if not candidates.size:
            return []
        if candidates.size > k:
            # Keep the k best and everything tied with the k-th: pool order decides among them.
            values = scores[candidates]
            kth = np.partition(values, candidates.size - k)[candidates.size - k]
            candidates = candidates[values >= kth]
        slots = self._slots
        if not self._delta_bags:
            # No upserts since the last build: slot order is pool order.
            order = np.lexsort((candidates, -scores[candidates]))[:k]
            chosen = candidates[order].tolist()
            return [(slots[s], float(scores[s])) for s in chosen]
        pairs = [(slots[s], float(scores[s])) for s in candidates.tolist()]
        pairs.sort(key=lambda pair: (-pair[1], pool_sort_key(pair[0])))  # type: ignore[arg-type]
        return pairs[:k]  # type: ignore[return-value]


class _RankBM25Engine:
    """The reference engine: rank-bm25 itself over the same token bags, rebuilt on change."""

    def __init__(self, *, variant: str, k1: float, b: float, delta: float, epsilon: float):
        self.variant, self.k1, self.b, self.delta, self.epsilon = variant, k1, b, delta, epsilon
        self._tools: list[Tool] = []
        self._bags: list[list[str]] = []
        self._model: Any = None

    def build(self, tools: Sequence[Tool], bags: Sequence[Sequence[str]]) -> None:
        pairs = sorted(zip(tools, bags, strict=True), key=lambda pair: pool_sort_key(pair[0]))
        self._tools = [tool for tool, _ in pairs]
        self._bags = [list(bag) for _, bag in pairs]
        self._model = None
        if self._tools and any(self._bags):
            self._model = rank_bm25_model(
                self._bags,
                variant=self.variant,
                k1=self.k1,
                b=self.b,
                delta=self.delta,
                epsilon=self.epsilon,
            )

    def upsert(self, tools: Sequence[Tool], bags: Sequence[Sequence[str]]) -> None:
        merged = dict(
            zip(
                (t.name for t in self._tools),
                zip(self._tools, self._bags, strict=True),
                strict=True,
            )
        )
        merged.update((t.name, (t, list(bag))) for t, bag in zip(tools, bags, strict=True))
        self.build([t for t, _ in merged.values()], [bag for _, bag in merged.values()])

    def remove(self, names: Iterable[str]) -> None:
        drop = set(names)
        kept = [
            (t, bag) for t, bag in zip(self._tools, self._bags, strict=True) if t.name not in drop
        ]
        self.build([t for t, _ in kept], [bag for _, bag in kept])

    def __len__(self) -> int:
        return len(self._tools)

    @property
    def tools(self) -> dict[str, Tool]:
        return {tool.name: tool for tool in self._tools}

    def knows(self, term: str) -> bool:
        """Whether ``term`` is a word of the indexed tools."""
        return self._model is not None and term in self._model.idf

    def _scores(self, tokens: Sequence[str]) -> list[float]:
        known = [token for token in tokens if token in self._model.idf]
        if not known:
            return [0.0] * len(self._tools)
        values: list[float] = self._model.get_scores(known).tolist()
        return values

    def score_map(self, tokens: Sequence[str]) -> dict[str, float]:
        if self._model is None:
            return {tool.name: 0.0 for tool in self._tools}
        return dict(zip((t.name for t in self._tools), self._scores(tokens), strict=True))

    def top(self, tokens: Sequence[str], k: int) -> list[tuple[Tool, float]]:
        if k <= 0 or self._model is None:
            return []
        scores = self._scores(tokens)
        ranked = sorted(
            (i for i in range(len(self._tools)) if scores[i] > 0),
            key=lambda i: (-scores[i], i),
        )
        return [(self._tools[i], float(scores[i])) for i in ranked[:k]]


def rank_bm25_model(
    corpus: Sequence[Sequence[str]],
    *,
    variant: str = "lucene",
    k1: float = 1.2,
    b: float = 0.75,
    delta: float = 0.5,
    epsilon: float = 0.25,
) -> Any:
    """A rank-bm25 model scoring ``corpus`` by ``variant`` (see the module docstring).

    ``lucene`` is ``BM25Okapi`` (its term-frequency part) with ``BM25L``'s idf table,
    ``ln(N + 1) - ln(n + 0.5)``, which is Lucene's idf.
    """
    import rank_bm25

    docs = [list(doc) for doc in corpus]
    if variant == "okapi":
        return rank_bm25.BM25Okapi(docs, k1=k1, b=b, epsilon=epsilon)
    if variant == "bm25l":
        return rank_bm25.BM25L(docs, k1=k1, b=b, delta=delta)
    model = rank_bm25.BM25Okapi(docs, k1=k1, b=b, epsilon=epsilon)
    model.idf = rank_bm25.BM25L(docs, k1=k1, b=b).idf
    return model


class _IndexedWords:
    """A query word is "in" an index when its term (stemmed, if the index stems) is."""

    def __init__(self, terms: TermNormaliser, engine: BM25Index | _RankBM25Engine) -> None:
        self.terms, self.engine = terms, engine

    def __contains__(self, word: object) -> bool:
        found = self.terms([word]) if isinstance(word, str) else []
        return bool(found) and self.engine.knows(found[0])


class BM25Backend(BaseBackend):
    """BM25 over tool-aware tokens (Lucene idf by default); incremental, numpy-fast.

    Options (keyword only): ``variant`` (``"lucene"``, ``"okapi"``, ``"bm25l"``), ``k1``
    (term-frequency saturation, default 1.2), ``b`` (length normalisation, 0..1, default 0.75),
    ``delta`` (``bm25l`` only), ``epsilon`` (``okapi`` only), ``field_weights`` (integer
    repetitions per field, merged over the defaults), ``engine`` (``"numpy"`` or the
    ``"rank_bm25"`` reference), ``stem`` (Snowball stems, PyStemmer) and ``stopwords`` (drop
    function words), both applied to tools and queries alike (:mod:`toolsearch.stemming`) and
    on by default, as stock BM25 libraries set up English; ``param_descriptions`` (on by
    default) counts each parameter's description as words of the tool's description, as a
    stock library indexing the tool's whole text does (docs/backends.md).
    """

    name: ClassVar[str] = "bm25"
    incremental: ClassVar[bool] = True
    persistent: ClassVar[bool] = False
    extra: ClassVar[str | None] = "bm25"
    requires: ClassVar[tuple[str, ...]] = ("rank_bm25", "numpy")

    def __init__(
        self,
        *,
        variant: str = "lucene",
        k1: float = 1.2,
        b: float = 0.75,
        delta: float = 0.5,
        epsilon: float = 0.25,
        field_weights: Mapping[str, int] | None = None,
        engine: str = "numpy",
        stem: bool = True,
        stopwords: bool = True,
        param_descriptions: bool = True,
    ) -> None:
        super().__init__()
        flags = (
            ("stem", stem),
            ("stopwords", stopwords),
            ("param_descriptions", param_descriptions),
        )
        for option, value in flags:
            if not isinstance(value, bool):
                raise ConfigError(f"bm25 option {option} must be true or false, got {value!r}")
        self.terms = TermNormaliser(stem=stem, stopwords=stopwords)
        self.param_descriptions = param_descriptions
        if variant not in VARIANTS:
            raise ConfigError(
                f"unknown bm25 variant {variant!r}; choose one of: {', '.join(VARIANTS)}"
            )
        if engine not in ENGINES:
            raise ConfigError(
                f"unknown bm25 engine {engine!r}; choose one of: {', '.join(ENGINES)}"
            )
        self.variant = variant
        self.k1 = _number("k1", k1, low=0.0)
        self.b = _number("b", b, low=0.0, high=1.0)
        self.delta = _number("delta", delta, low=0.0)
        self.epsilon = _number("epsilon", epsilon, low=0.0)
        self.field_weights = {
            k: int(v) for k, v in check_field_weights(field_weights, integer=True).items()
        }
        self.engine = engine
        engine_class = BM25Index if engine == "numpy" else _RankBM25Engine
        self._engine: BM25Index | _RankBM25Engine = engine_class(
            variant=variant, k1=self.k1, b=self.b, delta=self.delta, epsilon=self.epsilon
        )

    @property
    def tools(self) -> Mapping[str, Tool]:
        """The indexed tools by name."""
        return self._engine.tools

    @property
    def scorer(self) -> BM25Index | _RankBM25Engine:
        """The scoring engine itself: ``scorer.top(tokens, k)`` ranks pre-tokenised queries
        (``(tool, score)`` pairs) without the :class:`~toolsearch.query.ParsedQuery` layer."""
        return self._engine

    def token_bags(self, tools: Sequence[Tool]) -> list[list[str]]:
        """The weighted token bag of each tool: what BM25 counts (public for tests and tools
        that want to feed the same tokens to another BM25 implementation)."""
        cache: SchemaCache = {}
        weights = self.field_weights
        described = self.param_descriptions and weights["description"] > 0

        def bag(tool: Tool) -> list[str]:
            tokens = weighted_tokens(tool_fields(tool, schema_cache=cache), weights)
            if described:
                tokens += tokenize(param_descriptions_text(tool)) * weights["description"]
            return self.terms(tokens)

        return [bag(tool) for tool in tools]

    def index(self, tools: Sequence[Tool]) -> None:
        """Replace the index with ``tools``; duplicate names keep the last."""
        unique = list({tool.name: tool for tool in tools}.values())
        self._engine.build(unique, self.token_bags(unique))

    def upsert(self, tools: Sequence[Tool]) -> None:
        """Add ``tools``, replacing indexed tools of the same name; only they are tokenised."""
        unique = list({tool.name: tool for tool in tools}.values())
        if unique:
            self._engine.upsert(unique, self.token_bags(unique))

    def remove(self, names: Iterable[str]) -> None:
        """Drop the named tools; unknown names are ignored."""
        self._engine.remove(list(names))

    def search(self, query: ParsedQuery, k: int) -> list[Hit]:
        """The best ``k`` tools for ``query``'s tokens, best first, scores above zero."""
        if k <= 0 or query.is_empty or not len(self._engine):
            return []
        tokens = self.terms(query_tokens(query, whole=self.known_words))
        if not tokens:
            return []
        return [Hit(tool.name, score) for tool, score in self._engine.top(tokens, k)]

    def score_all(self, query: ParsedQuery) -> dict[str, float]:
        """Every indexed tool's score for ``query``, zeros included: for differential tests
        against other BM25 implementations and for looking into a ranking."""
        return self._engine.score_map(self.terms(query_tokens(query, whole=self.known_words)))

    @property
    def known_words(self) -> Container[str]:
        """The words the index holds, as a query's words are looked up in it: a camel-case
        query word found here is read whole (:func:`toolsearch.tokenize.query_tokens`)."""
        return _IndexedWords(self.terms, self._engine)

    def params(self) -> dict[str, object]:
        settings: dict[str, object] = {
            "variant": self.variant,
            "k1": self.k1,
            "b": self.b,
            "field_weights": dict(self.field_weights),
            "engine": self.engine,
            "stem": self.terms.stem,
            "stopwords": self.terms.stopwords,
            "param_descriptions": self.param_descriptions,
            "tokenizer_version": TOKENIZER_VERSION,
            "query_rules_version": QUERY_RULES_VERSION,
        }
        if self.variant == "bm25l":
            settings["delta"] = self.delta
        if self.variant == "okapi":
            settings["epsilon"] = self.epsilon
        return settings
