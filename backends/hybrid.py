"""Backend ``hybrid``: fusion of any registered backends — the default backend.

Each member ranks the query on its own (its best ``depth`` hits) and the hybrid combines them
(:mod:`toolsearch.fusion`):

``fusion="convex"`` (default)
    each member's scores normalised per query (``max`` for lexical members, ``minmax`` for
    ``embedding``), then ``Σ w_m · norm_m(tool) / Σ w_m``, plus ``name_weight`` times the
    share of the query's content words that are words of the tool's name or server, plus
    ``exact_name_bonus`` when the query says every word of the tool's own name, plus
    ``server_bonus`` when it says every word of the tool's server, plus ``server_support``
    times the best score among the tool's server's tools, plus ``action_bonus`` when the name
    of a tool with a server shares an action class with the query (:mod:`toolsearch.actions`);
``fusion="rrf"``
    reciprocal rank fusion, ``Σ w_m / (k + rank_m(tool))`` (Cormack, Clarke and Büttcher,
    SIGIR 2009), the previous default.

Members are loaded through :func:`toolsearch.registry.load_backend`, so a third-party backend
can be fused like a built-in one. A member's name is the registered backend it runs, unless its
options name one (``member_options = {words = {backend = "bm25"}}``): the same backend can then
be a member twice with different options. The defaults — :data:`DEFAULT_MEMBERS`,
:data:`DEFAULT_MEMBER_OPTIONS` (bm25 with stemming and stop-words, bm25_unstemmed on the words
as written, the embedding member's int8 export), :data:`DEFAULT_NAME_WEIGHT` — were chosen on
dev splits only by ``lab/ablation.py``; docs/backends.md says what the default does, and
docs/results.md ("The default's design") and ``lab/retrieval.md`` hold the figures.

A member that may take long to index (``warms = True``, the embedding backend) can be updated
in the background (``background``; by default when called from a thread running an asyncio
event loop, such as the MCP gateway's): the other members rank at once and the slow one joins
when its vectors are ready (:meth:`HybridBackend.member_states`, logs; docs/speed.md).
"""

from __future__ import annotations

import asyncio
import heapq
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import ExitStack
from functools import partial
from typing import Any, ClassVar

from toolsearch.backend import BaseBackend, Hit, IncrementalBackend, SearchBackend
from toolsearch.errors import ConfigError
from toolsearch.fusion import NORMALISERS, Fuser, NameTable, name_words, rrf_fuse
from toolsearch.multistep import LEAD, Ranking, merge_steps, split_steps
from toolsearch.query import ParsedQuery, parse_query
from toolsearch.tool import Tool, pool_sort_key

from .calibration import CALIBRATED_MIN_SIMILARITY, calibrated_min_similarity
from .encoders import DEFAULT_MODEL
from .warming import BackgroundUpdates

__all__ = [
    "DEFAULT_ACTION_BONUS",
    "DEFAULT_DEPTH",
    "DEFAULT_EXACT_NAME_BONUS",
    "DEFAULT_FUSION",
    "DEFAULT_K",
    "DEFAULT_MEMBERS",
    "DEFAULT_MEMBER_OPTIONS",
    "DEFAULT_MIN_SIMILARITY",
    "DEFAULT_NAME_WEIGHT",
    "DEFAULT_SERVER_BONUS",
    "DEFAULT_SERVER_SUPPORT",
    "DEFAULT_STEP_DEPTH",
    "FUSIONS",
    "HybridBackend",
    "rrf_fuse",
]

#: Members and weights used when none are configured (measured, see the module docstring).
#: The lexical 0.3 is split 4 : 3 between stemmed and unstemmed bm25, as it was measured.
DEFAULT_MEMBERS: Mapping[str, float] = {
    "embedding": 0.7,
    "bm25": 0.3 * 4 / 7,
    "bm25_unstemmed": 0.3 * 3 / 7,
}
#: Options a member starts from (``member_options`` updates them; ``precision = "fp32"`` or
#: ``stem = false`` undoes one): bm25 stems and drops stop-words; unlike the bm25 backend
#: alone, neither lexical member counts parameter descriptions, since the fusion was chosen
#: without them (docs/backends.md); bm25_unstemmed is the bm25 backend on the words as
#: written (an exact word form counts twice: in both lexical members),
#: ranking as the fts5 member it replaced did at a fraction of its cost on long requests
#: (``lab/retrieval.md``); the embedding member runs the default model's int8 export, which
#: changes the default's quality within the regression gate's allowance and encodes faster
#: (docs/results.md, "Speed"; ``docs/speed.md``).
DEFAULT_MEMBER_OPTIONS: Mapping[str, Mapping[str, Any]] = {
    "bm25": {"stem": True, "stopwords": True, "param_descriptions": False},
    "bm25_unstemmed": {
        "backend": "bm25",
        "stem": False,
        "stopwords": False,
        "param_descriptions": False,
    },
    "embedding": {"precision": "int8"},
}
#: The fusion functions.
FUSIONS: tuple[str, ...] = ("convex", "rrf")
DEFAULT_FUSION = "convex"
#: Weight of the name-match feature in convex fusion (chosen on dev splits, each scored with
#: a model of the shipped recipe that never saw it, ``lab/retrieval.md``): off with the broad
#: model, which already ranks by the name; the exact-name bonus still applies.
DEFAULT_NAME_WEIGHT = 0.0
#: What a tool gains in convex fusion when the query says every word of its own name (two
#: words or more): about a close lead between two fused scores. Chosen on dev between 0, 0.1
#: and a tier of 1.0, which lowered keywords hit@1 and BFCL (``lab/retrieval.md``).
DEFAULT_EXACT_NAME_BONUS = 0.1
#: What a tool gains in convex fusion when the query names its server: the smallest of the dev
#: grid within ``CHOICE_MARGIN`` of the best mean dev ndcg@10 (``lab/retrieval.md``).
DEFAULT_SERVER_BONUS = 0.2
#: The share of its server's best score each tool gains in convex fusion: the smallest of the
#: dev grid within ``CHOICE_MARGIN`` of the best mean dev ndcg@10 over the three datasets and
#: mcp-workbench inside 10,000 tools (``lab/retrieval.md``).
DEFAULT_SERVER_SUPPORT = 0.5
#: What a tool with a server gains in convex fusion when its name shares an action class
#: with the query (:mod:`toolsearch.actions`): the smallest of the dev grid within
#: ``CHOICE_MARGIN`` of the best mean dev ndcg@10 over the three datasets and mcp-workbench
#: inside 10,000 tools, each scored with the fold model that never saw it (``lab/retrieval.md``).
DEFAULT_ACTION_BONUS = 0.1
#: "No tool fits" below this best embedding cosine with the default embedding model: the
#: highest threshold costing at most .01 recall@5 on every dev split (``lab/retrieval.md``).
DEFAULT_MIN_SIMILARITY = CALIBRATED_MIN_SIMILARITY[DEFAULT_MODEL]
#: Whether multi-clause requests are split into steps searched one by one (on by default:
#: it lifts multi-step tasks with no significant loss on any test split, ``lab/retrieval.md``).
DEFAULT_MULTISTEP = True
#: The RRF constant used when none is configured (``fusion="rrf"``).
DEFAULT_K = 5
#: How many hits each member contributes when ``depth`` is not configured.
DEFAULT_DEPTH = 100
#: How many hits each member contributes to a step of a multi-step request: a step's ranking
#: only fills the first few merged places, and member depths from 10 to 100 scored the same
#: on every dev split (``lab/retrieval.md``) while 30 fuses a third of the candidates.
DEFAULT_STEP_DEPTH = 30
#: Score normalisation of members not named in ``normalise``: cosines span a narrow band.
_MINMAX_MEMBERS = frozenset({"embedding"})


def _check_members(members: Mapping[str, float] | Sequence[str] | None) -> dict[str, float]:
    if members is None:
        return dict(DEFAULT_MEMBERS)
    if isinstance(members, str):
        raise ConfigError(
            f"hybrid members must be a list of backend names or a table of weights, "
            f"got the string {members!r}"
        )
    if isinstance(members, Mapping):
        chosen = dict(members)
    else:
        names = list(members)
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ConfigError(f"hybrid members repeat {duplicates}")
        chosen = dict.fromkeys(names, 1.0)
    if not chosen:
        raise ConfigError("hybrid needs at least one member backend")
    for name, weight in chosen.items():
        if not isinstance(name, str) or not name:
            raise ConfigError(f"hybrid member names must be non-empty strings, got {name!r}")
        if name == HybridBackend.name:
            raise ConfigError("hybrid cannot be a member of itself")
        if (
            isinstance(weight, bool)
            or not isinstance(weight, int | float)
            or not math.isfinite(weight)
            or weight <= 0
        ):
            raise ConfigError(
                f"hybrid weight of member {name!r} must be a positive number, got {weight!r}"
            )
    return {name: float(weight) for name, weight in chosen.items()}


class _AllMembersIncremental:
    """``incremental`` of a hybrid: on the class, whether the default members are; on an
    instance, whether all of its members are."""

    def __get__(self, obj: HybridBackend | None, owner: type[HybridBackend]) -> bool:
        if obj is None:
            return True
        return all(bool(getattr(m, "incremental", False)) for m in obj.members.values())


def _check_number(name: str, value: object, *, positive: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ConfigError(f"hybrid {name} must be a finite number, got {value!r}")
    if value < 0 or (positive and value == 0):
        raise ConfigError(
            f"hybrid {name} must be {'positive' if positive else 'non-negative'}, got {value!r}"
        )
    return float(value)


def member_backend(name: str, options: Mapping[str, Any]) -> str:
    """The registered backend a member runs: the ``backend`` of its options, else its name."""
    backend = options.get("backend", name)
    if not isinstance(backend, str) or not backend:
        raise ConfigError(
            f"hybrid member_options[{name!r}].backend must be a backend name, got {backend!r}"
        )
    if backend == HybridBackend.name:
        raise ConfigError(f"hybrid member {name!r}: hybrid cannot be a member of itself")
    return backend


def _check_normalise(
    normalise: Mapping[str, str] | None, backends: Mapping[str, str]
) -> dict[str, str]:
    chosen = {m: ("minmax" if b in _MINMAX_MEMBERS else "max") for m, b in backends.items()}
    for member, method in dict(normalise or {}).items():
        if member not in chosen:
            raise ConfigError(f"hybrid normalise names {member!r}, which is not a member")
        if method not in NORMALISERS:
            raise ConfigError(
                f"hybrid normalise[{member!r}] must be one of {', '.join(NORMALISERS)}, "
                f"got {method!r}"
            )
        chosen[member] = method
    return chosen


def _default_min_scores(
    members: Iterable[str], options: Mapping[str, Mapping[str, Any]]
) -> dict[str, float]:
    """The calibrated abstention threshold of the first embedding member whose similarities are
    a calibrated model's (:mod:`toolsearch.backends.calibration`)."""
    for name in members:
        if member_backend(name, options[name]) == "embedding":
            limit = calibrated_min_similarity(_constructor_options(options[name]))
            return {} if limit is None else {name: limit}
    return {}


def _check_min_scores(
    limits: Mapping[str, float] | None, members: Iterable[str]
) -> dict[str, float]:
    if limits is None:
        return {}
    if not isinstance(limits, Mapping):
        raise ConfigError(f"hybrid min_member_score must be a table of scores, got {limits!r}")
    names = set(members)
    for member, limit in limits.items():
        if member not in names:
            raise ConfigError(f"hybrid min_member_score names {member!r}, which is not a member")
        _check_number(f"min_member_score[{member!r}]", limit)
    return {member: float(limit) for member, limit in limits.items()}


def _check_member_options(
    options: Mapping[str, Mapping[str, Any]] | None, members: Iterable[str]
) -> dict[str, dict[str, Any]]:
    given = dict(options or {})
    names = list(members)
    stray = sorted(set(given) - set(names))
    if stray:
        raise ConfigError(
            f"hybrid member_options name backends that are not members: {stray}; "
            f"members: {sorted(names)}"
        )
    for member, opts in given.items():
        if not isinstance(opts, Mapping):
            raise ConfigError(
                f"hybrid member_options[{member!r}] must be a table of options, got {opts!r}"
            )
    chosen = {m: {**DEFAULT_MEMBER_OPTIONS.get(m, {}), **given.get(m, {})} for m in names}
    for member, opts in chosen.items():
        member_backend(member, opts)
    return chosen


def _constructor_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """A member's options as its backend's constructor takes them (without ``backend``)."""
    return {key: value for key, value in options.items() if key != "backend"}


class HybridBackend(BaseBackend):
    """Fusion of other backends: normalised convex combination (default) or RRF.

    ``members``: backend names (weight 1 each) or ``{name: weight}``; default
    :data:`DEFAULT_MEMBERS`. ``fusion``: ``"convex"`` or ``"rrf"``. ``k``: the RRF constant.
    ``depth``: hits taken from each member (at least the requested ``k`` of a search).
    ``normalise``: per-member ``"max"`` or ``"minmax"`` (convex fusion). ``name_weight``: weight
    of the name-match feature (convex fusion; 0 turns it off). ``exact_name_bonus``: what a
    tool whose whole name (two words or more) the query says gains (0 turns it off).
    ``server_bonus``: what a tool whose server the query names gains (0 turns it off).
    ``server_support``: the share of its server's best score each tool gains (0 turns it off).
    ``action_bonus``: what a tool with a server whose name shares an action class with the
    query gains (0 turns it off). ``multistep``: search each step
    of a multi-clause request and merge (:mod:`toolsearch.multistep`); ``step_depth``: hits
    each member contributes to a step, whatever ``k`` is asked for (the first hits are the
    same for any ``k`` up to ``depth``). ``min_member_score``:
    ``{member: score}``; no hits ("no tool fits") when every listed member's best raw score is
    below its threshold (``lab/retrieval.md``); by default the calibrated threshold of the
    embedding member's model (:mod:`toolsearch.backends.calibration`); ``{}`` turns it off.
    ``member_options``: constructor options per member, e.g. ``{"embedding": {"model": ...}}``,
    each updating that member's :data:`DEFAULT_MEMBER_OPTIONS`.
    ``background``: update slow members (``warms = True``) on a worker thread and rank without
    them until they are ready; None = only when called inside a running asyncio event loop.

    It is incremental when every member is (updates are forwarded to the members); ``requires``
    and ``extra`` describe the default members, so the registry's install hint names the
    extras those need.
    """

    name: ClassVar[str] = "hybrid"
    incremental = _AllMembersIncremental()
    persistent: ClassVar[bool] = False
    extra: ClassVar[str | None] = "embedding,bm25"
    requires: ClassVar[tuple[str, ...]] = ("rank_bm25", "numpy", "Stemmer", "sentence_transformers")

    def __init__(
        self,
        members: Mapping[str, float] | Sequence[str] | None = None,
        k: int = DEFAULT_K,
        depth: int = DEFAULT_DEPTH,
        member_options: Mapping[str, Mapping[str, Any]] | None = None,
        *,
        fusion: str = DEFAULT_FUSION,
        normalise: Mapping[str, str] | None = None,
        name_weight: float = DEFAULT_NAME_WEIGHT,
        exact_name_bonus: float = DEFAULT_EXACT_NAME_BONUS,
        server_bonus: float = DEFAULT_SERVER_BONUS,
        server_support: float = DEFAULT_SERVER_SUPPORT,
        action_bonus: float = DEFAULT_ACTION_BONUS,
        multistep: bool = DEFAULT_MULTISTEP,
        step_depth: int = DEFAULT_STEP_DEPTH,
        min_member_score: Mapping[str, float] | None = None,
        background: bool | None = None,
    ) -> None:
        super().__init__()
        if isinstance(k, bool) or not isinstance(k, int | float) or not 0 <= k < math.inf:
            raise ConfigError(f"hybrid k must be a non-negative number, got {k!r}")
        for label, value in (("depth", depth), ("step_depth", step_depth)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"hybrid {label} must be a positive integer, got {value!r}")
        if fusion not in FUSIONS:
            raise ConfigError(f"hybrid fusion must be one of {', '.join(FUSIONS)}, got {fusion!r}")
        if not isinstance(multistep, bool):
            raise ConfigError(f"hybrid multistep must be true or false, got {multistep!r}")
        self.multistep = multistep
        self.weights = _check_members(members)
        self.fusion = fusion
        self.member_options = _check_member_options(member_options, self.weights)
        #: The registered backend each member runs (its name, or its ``backend`` option).
        self.member_backends = {m: member_backend(m, self.member_options[m]) for m in self.weights}
        self.normalise = _check_normalise(normalise, self.member_backends)
        self.name_weight = _check_number("name_weight", name_weight)
        self.exact_name_bonus = _check_number("exact_name_bonus", exact_name_bonus)
        self.server_bonus = _check_number("server_bonus", server_bonus)
        self.server_support = _check_number("server_support", server_support)
        self.action_bonus = _check_number("action_bonus", action_bonus)
        if min_member_score is None:
            min_member_score = _default_min_scores(self.weights, self.member_options)
        self.min_member_score = _check_min_scores(min_member_score, self.weights)
        if background is not None and not isinstance(background, bool):
            raise ConfigError(f"hybrid background must be true, false or None, got {background!r}")
        from toolsearch.registry import load_backend

        self.background = background
        self._warming: dict[str, BackgroundUpdates] = {}

        self.k = k
        self.depth = depth
        self.step_depth = step_depth
        self.fuser = Fuser(
            self.weights,
            fusion,
            self.normalise,
            float(k),
            self.name_weight,
            exact_name_bonus=self.exact_name_bonus,
            server_bonus=self.server_bonus,
            server_support=self.server_support,
            action_bonus=self.action_bonus,
        )
        self.members: dict[str, SearchBackend] = {
            member: load_backend(backend, **_constructor_options(self.member_options[member]))
            for member, backend in self.member_backends.items()
        }
        self._name_words = NameTable({})
        self._pool_position: dict[str, int] = {}

    def _set_tools(self, ordered: Sequence[Tool]) -> None:
        self._tools = {tool.name: tool for tool in ordered}
        # ties break by pool order: each tool's place in it, for sorting
        self._pool_position = {name: i for i, name in enumerate(self._tools)}
        words = self._name_words
        self._name_words = NameTable(
            {tool.name: words.get(tool.name) or name_words(tool) for tool in ordered}
        )

    def index(self, tools: Sequence[Tool]) -> None:
        ordered = sorted({tool.name: tool for tool in tools}.values(), key=pool_sort_key)
        self._name_words = NameTable({})
        self._set_tools(ordered)
        for name, member in self.members.items():
            self._update(name, member, partial(member.index, ordered))

    def _build(self, tools: list[Tool]) -> None:  # pragma: no cover - index() is overridden
        self.index(tools)

    def upsert(self, tools: Sequence[Tool]) -> None:
        incoming = {tool.name: tool for tool in tools}
        if not incoming:
            return
        self._name_words = NameTable(
            {name: found for name, found in self._name_words.items() if name not in incoming}
        )
        self._set_tools(sorted({**self._tools, **incoming}.values(), key=pool_sort_key))
        changed, everything = list(incoming.values()), list(self._tools.values())
        for name, member in self.members.items():
            if isinstance(member, IncrementalBackend):
                self._update(name, member, partial(member.upsert, changed))
            else:
                self._update(name, member, partial(member.index, everything))

    def remove(self, names: Iterable[str]) -> None:
        drop = set(names) & set(self._tools)
        if not drop:
            return
        self._set_tools([tool for name, tool in self._tools.items() if name not in drop])
        gone, everything = sorted(drop), list(self._tools.values())
        for name, member in self.members.items():
            if isinstance(member, IncrementalBackend):
                self._update(name, member, partial(member.remove, gone))
            else:
                self._update(name, member, partial(member.index, everything))

    # ------------------------------------------------------------------ warming

    def _update(self, name: str, member: SearchBackend, update: Callable[[], None]) -> None:
        """Apply ``update`` to ``member`` now, or queue it on the member's worker thread."""
        worker = self._warming.get(name)
        if worker is None and getattr(member, "warms", False) and self._in_background():
            worker = self._warming[name] = BackgroundUpdates(name)
        if worker is None:
            update()
        else:
            worker.submit(update)

    def _in_background(self) -> bool:
        if self.background is not None:
            return self.background
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return False
        return True

    def member_states(self) -> dict[str, str]:
        """Each member's state: ``ready``, ``warming`` (not ranking yet) or ``failed: ...``."""
        return {
            name: self._warming[name].state if name in self._warming else "ready"
            for name in self.members
        }

    def wait_ready(self, timeout: float | None = None) -> bool:
        """Block until background members are ready (or ``timeout`` s); True when all are."""
        return all(worker.wait(timeout) for worker in self._warming.values())

    def _ready(self) -> list[str]:
        """The members that rank now (not warming in the background), in member order."""
        return [m for m in self.members if m not in self._warming or self._warming[m].ready]

    def _member_search(self, member: str, query: ParsedQuery, depth: int) -> list[Hit]:
        return [hit for hit in self.members[member].search(query, depth) if hit.score > 0]

    def member_hits(self, query: ParsedQuery, depth: int) -> dict[str, list[Hit]]:
        """Each ready member's best ``depth`` hits (score > 0) for ``query``; a member still
        warming in the background is left out."""
        return {member: self._member_search(member, query, depth) for member in self._ready()}

    def fuse(
        self, query: ParsedQuery, hits: Mapping[str, Sequence[Hit]], k: int | None = None
    ) -> dict[str, float]:
        """Fused scores of the members' ``hits`` for ``query`` (tools not indexed left out):
        the whole ranking step after the members, public so benchmarks can replay cached
        member hits through exactly this code. With ``k``, only tools that can be among the
        best ``k`` (:meth:`Fuser.fuse`)."""
        fused = self.fuser.fuse(query, hits, self._name_words, k)
        return {name: score for name, score in fused.items() if name in self._tools}

    def abstains(self, hits: Mapping[str, Sequence[Hit]]) -> bool:
        """Whether no tool fits: every ranking member of ``min_member_score`` has its best raw
        score below its threshold (never when none of them is ranking)."""
        limits = {m: limit for m, limit in self.min_member_score.items() if m in hits}
        if not limits:  # none set, or every thresholded member is still warming
            return False
        return all(
            not hits.get(member) or hits[member][0].score < limit
            for member, limit in limits.items()
        )

    def search(self, query: ParsedQuery, k: int) -> list[Hit]:
        if k <= 0 or query.is_empty or not self._tools:
            return []
        depth = max(self.depth, k)
        steps = split_steps(query.raw) if self.multistep and not query.required else []
        parsed = [parse_query(step) for step in steps] if len(steps) > 1 else []
        with self._queries_ahead([query, *parsed] if parsed else []):
            hits = self.member_hits(query, depth)
            if self.abstains(hits):
                return []
            if not parsed:  # a one-step request is the whole ranking
                return self._ranked(query, hits, k)
            # The merge places no hit from deeper than k (+ the lead) of any ranking among its
            # first k, so the rankings are cut there (module multistep). A step always ranks
            # from step_depth hits per member, however many are asked for: scores are
            # normalised over a member's hits, so more of them would reorder the first ones.
            steps_ranked = [self._step_ranking(step, self.step_depth, k) for step in parsed]
            return merge_steps(self._ranking(query, hits, k + LEAD), steps_ranked, k)

    def _queries_ahead(self, queries: Sequence[ParsedQuery]) -> ExitStack:
        """Each ready member that can encode ``queries`` ahead of searching them (the embedding
        member: a request and its steps at once, over the cores) does so for the block."""
        stack = ExitStack()
        try:
            for name in self._ready() if queries else []:
                ahead = getattr(self.members[name], "queries_ahead", None)
                if ahead is not None:
                    stack.enter_context(ahead(queries))
        except BaseException:
            stack.close()
            raise
        return stack

    def _step_ranking(self, query: ParsedQuery, depth: int, k: int) -> Ranking:
        """A step's best ``k`` from ``depth`` hits per member: the leading member ranks at once
        (the step's confidence); the other members and the fusion run only if the merge keeps
        the step."""
        ready = self._ready()
        if not ready:
            return Ranking([], 0.0)
        leading = self._leading(ready)
        first = self._member_search(leading, query, depth)

        def ranked() -> list[Hit]:
            hits = {
                m: first if m == leading else self._member_search(m, query, depth) for m in ready
            }
            return self._ranked(query, hits, k)

        return Ranking(ranked, first[0].score if first else 0.0)

    def _leading(self, members: Iterable[str]) -> str:
        """The highest-weighted of ``members`` (the first of them on a tie)."""
        return sorted(members, key=lambda member: -self.weights.get(member, 0.0))[0]

    def _ranking(self, query: ParsedQuery, hits: Mapping[str, Sequence[Hit]], k: int) -> Ranking:
        """The fused ranking with its confidence for multi-step merging: the best raw score of
        the highest-weighted member that ranked (the embedding's cosine by default)."""
        leading = self._leading(hits) if hits else None
        confidence = hits[leading][0].score if leading is not None and hits[leading] else 0.0
        return Ranking(self._ranked(query, hits, k), confidence)

    def _ranked(self, query: ParsedQuery, hits: Mapping[str, Sequence[Hit]], k: int) -> list[Hit]:
        """The fused ranking of ``query`` from its member ``hits``."""
        if query.is_empty:
            return []
        fused = self.fuse(query, hits, k)
        position = self._pool_position
        ranked = heapq.nsmallest(k, fused, key=lambda name: (-fused[name], position[name]))
        return [Hit(name, fused[name]) for name in ranked if fused[name] > 0]

    def params(self) -> dict[str, object]:
        return {
            "members": list(self.weights),
            "member_backends": dict(self.member_backends),
            "weights": dict(self.weights),
            "fusion": self.fusion,
            "k": self.k,
            "depth": self.depth,
            "member_states": self.member_states(),
            "normalise": dict(self.normalise),
            "name_weight": self.name_weight,
            "exact_name_bonus": self.exact_name_bonus,
            "server_bonus": self.server_bonus,
            "server_support": self.server_support,
            "action_bonus": self.action_bonus,
            "multistep": self.multistep,
            "step_depth": self.step_depth,
            "min_member_score": dict(self.min_member_score),
            "member_params": {
                name: member.params() if hasattr(member, "params") else {}
                for name, member in self.members.items()
            },
        }
