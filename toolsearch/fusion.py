"""Score fusion for the ``hybrid`` backend: normalised convex combination, RRF and name match.

Convex combination (Bruch, Gai and Ingber, "An Analysis of Fusion Functions for Hybrid
Retrieval", TOIS 2023): every member's scores are normalised per query to ``[0, 1]`` and a
tool's fused score is ``Σ w_m · norm_m(tool) / Σ w_m`` over the members (a member that did not
return the tool adds 0). Unlike reciprocal rank fusion it keeps how *sure* each member is: an
exact lexical hit that stands far above the rest keeps its lead instead of counting only as
"rank 1", so a dense model's near misses cannot crowd it out. Normalisations:

``max``      ``s / max s`` — for scores bounded below by 0 (BM25 and the other lexical
             members): the theoretical minimum is 0, the observed maximum the top
``minmax``   ``(s - min s) / (max s - min s)`` over the member's returned hits — for cosine
             similarities, whose useful range in one query is narrow and far from 0

A hit a member returned keeps at least :data:`FLOOR` of its weight, so everything a member
returns stays a positive-score hit.

Name match (:func:`name_coverage`): the share of a query's content words that are words of a
tool's name or server. Added with a small weight, it puts the tool whose name *is* the request
("create a github pull request" → ``mcp__github__create_pull_request``) ahead of paraphrases.
Exact name (:func:`names_whole_name`): when every word of a tool's own name (at least
``exact_name_min_words`` of them) is a content word of the query, the tool gets
``exact_name_bonus``. The hybrid's small default settles close calls ("create a github pull
request" puts ``create_pull_request`` ahead of ``create_pull_request_review``, whose ``review``
the query does not say); a bonus above the largest fused score would make it a tier, which
measured worse.
Server named (:func:`names_server`): when every word of a tool's server is a content word of the
query ("... drop the link in #deploys on Slack"), the tool gets ``server_bonus``: a request that
names a service wants that service's tools, not the same action on another service.
Server support: every tool gains ``server_support`` times the best score among its own server's
tools (a tool with no server is a server of its own). Within a server nothing moves; across
servers, the tools of a server whose best tool ranks far down are pulled further down — a soft
form of ranking servers first and then their tools (MCP-Zero), which matters most when many
servers offer similar tools.
Action agreement: when the name of a tool with a server shares an action class with the query
(:mod:`toolsearch.actions`: "post a status update" asks to create or send, ``create_status``
creates, ``get_status`` reads), the tool gets ``action_bonus``, added after the server support so
that it tells a server's tools apart; a catalogue without servers keeps its order.

The measurements behind all six are in ``lab/retrieval.md``.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from toolsearch.actions import action_classes
from toolsearch.backend import Hit
from toolsearch.query import ParsedQuery
from toolsearch.stemming import STOPWORDS
from toolsearch.tokenize import query_tokens, tool_fields
from toolsearch.tool import Tool

__all__ = [
    "FLOOR",
    "NORMALISERS",
    "Fuser",
    "NameTable",
    "NameWords",
    "convex_fuse",
    "name_coverage",
    "name_table",
    "name_words",
    "names_server",
    "names_whole_name",
    "normalise",
    "query_words",
    "rrf_fuse",
    "vocabulary",
]

#: The per-query score normalisations :func:`normalise` knows.
NORMALISERS: tuple[str, ...] = ("max", "minmax")
#: The least share of its weight a member gives a tool it returned.
FLOOR = 0.01

# Fused sums of the same numbers added in a different member order can differ in the last bit;
# rounding makes them tie exactly, so the tie-break is pool order.
_SCORE_DECIMALS = 12


def normalise(hits: Sequence[Hit], method: str) -> dict[str, float]:
    """``{tool: score in [FLOOR, 1]}`` of one member's hits by ``method`` (see the module)."""
    if method not in NORMALISERS:
        raise ValueError(f"unknown normalisation {method!r}; choose from {NORMALISERS}")
    if not hits:
        return {}
    scores = [hit.score for hit in hits]
    high = max(scores)
    low = min(scores) if method == "minmax" else 0.0
    span = high - low
    out: dict[str, float] = {}
    for hit in hits:
        share = (hit.score - low) / span if span > 0 else 1.0
        out[hit.name] = FLOOR + (1 - FLOOR) * share
    return out


def convex_fuse(
    hits: Mapping[str, Sequence[Hit]],
    weights: Mapping[str, float],
    methods: Mapping[str, str],
) -> dict[str, float]:
    """``Σ w_m · normalise(hits[m], methods[m])(tool) / Σ w_m`` for every tool any member
    returned (members without a weight count 1; ``methods`` must name every member)."""
    total = sum(float(weights.get(member, 1.0)) for member in hits) or 1.0
    fused: dict[str, float] = {}
    for member, member_hits in hits.items():
        share = float(weights.get(member, 1.0)) / total
        for name, value in normalise(member_hits, methods[member]).items():
            fused[name] = fused.get(name, 0.0) + share * value
    return {name: round(score, _SCORE_DECIMALS) for name, score in fused.items()}


def rrf_fuse(
    rankings: Mapping[str, Sequence[str]],
    weights: Mapping[str, float],
    k: float = 60.0,
) -> dict[str, float]:
    """Weighted reciprocal-rank-fusion scores: ``Σ weights[m] / (k + rank)`` per tool, where
    ``rankings[m]`` lists member ``m``'s tools best first (rank 1 first). Members without a
    weight count 1 (Cormack, Clarke and Büttcher, SIGIR 2009)."""
    fused: dict[str, float] = {}
    for member, names in rankings.items():
        weight = float(weights.get(member, 1.0))
        for rank, name in enumerate(names, start=1):
            fused[name] = fused.get(name, 0.0) + weight / (k + rank)
    return {name: round(score, _SCORE_DECIMALS) for name, score in fused.items()}


def name_coverage(query: Collection[str], name: Collection[str]) -> float:
    """How well a query's content words and a tool's name words agree: the Dice coefficient
    ``2 |Q ∩ N| / (|Q| + |N|)``, 1 when they are the same words. It rewards a name that says
    all of the query (query coverage) and nothing else (so ``create_pull_request`` beats
    ``create_pull_request_review`` for "create a github pull request")."""
    if not query or not name:
        return 0.0
    if isinstance(query, set | frozenset) and isinstance(name, set | frozenset):
        shared = len(query & name)  # walks the smaller set: a long request has many words
    else:
        shared = sum(1 for word in query if word in name)
    return 2 * shared / (len(query) + len(name))


def names_whole_name(query: Collection[str], own: Collection[str], min_words: int) -> bool:
    """Whether the query says every word of a tool's own name (server words not needed), and
    the name has at least ``min_words`` words."""
    return len(own) >= min_words and all(word in query for word in own)


def names_server(query: Collection[str], found: NameWords) -> bool:
    """Whether the query says every word of the tool's server (a tool with no server: no)."""
    return _says_server(query, found.server)


def _says_server(query: Collection[str], server: frozenset[str]) -> bool:
    """Whether the query says every word of ``server`` (no words: no)."""
    return bool(server) and server.issubset(query)


def _server_leads(scored: Mapping[str, float], names: Mapping[str, NameWords]) -> dict[str, float]:
    """The best of ``scored`` per server (tools with no server, or not in ``names``, left out)."""
    leads: dict[str, float] = {}
    for name, score in scored.items():
        home = _home(names, name)
        if home and score > leads.get(home, -math.inf):
            leads[home] = score
    return leads


def _home(names: Mapping[str, NameWords], name: str) -> str:
    """The server a tool comes from, as written (``""``: none, or not in ``names``)."""
    found = names.get(name)
    return found.home if found is not None else ""


@dataclass(frozen=True, slots=True)
class NameWords:
    """The words of a tool's name: with its server (``words``), without (``own``), and of its
    server alone (``server``); ``home`` is the server as written (``""``: none); ``actions``
    the action classes of its own words (:func:`toolsearch.actions.action_classes`)."""

    words: frozenset[str]
    own: frozenset[str]
    server: frozenset[str] = frozenset()
    home: str = ""
    actions: frozenset[str] = frozenset()


def name_words(tool: Tool) -> NameWords:
    """The words of a tool's name and server, as the lexical backends tokenise them."""
    fields = tool_fields(tool)
    own, server = frozenset(fields.name), frozenset(fields.server)
    return NameWords(server | own, own, server, tool.server or "", action_classes(own))


class NameTable(Mapping[str, NameWords]):
    """Tools' :class:`NameWords` by tool name, and ``vocabulary``, every word of their names
    and servers: a query's camel-case word the catalogue names whole is read whole
    (:func:`query_words`). Built once per catalogue state, never changed."""

    def __init__(self, words: Mapping[str, NameWords]) -> None:
        self._words = dict(words)
        self.vocabulary: frozenset[str] = frozenset().union(*(w.words for w in words.values()))

    def __getitem__(self, name: str) -> NameWords:
        return self._words[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._words)

    def __len__(self) -> int:
        return len(self._words)


def name_table(tools: Sequence[Tool]) -> NameTable:
    """The :class:`NameTable` of ``tools``."""
    return NameTable({tool.name: name_words(tool) for tool in tools})


def vocabulary(names: Mapping[str, NameWords]) -> frozenset[str]:
    """Every word of the names and servers of ``names`` (kept by a :class:`NameTable`)."""
    if isinstance(names, NameTable):
        return names.vocabulary
    return frozenset().union(*(found.words for found in names.values()))


def query_words(query: ParsedQuery, known: Collection[str] = frozenset()) -> frozenset[str]:
    """The distinct content words of a query (stop-words dropped); a camel-case word whose
    lower-cased form is in ``known`` (a catalogue's :func:`vocabulary`) counts whole, not by its
    parts: "GitHub" names a server ``github``, not a server ``git``."""
    return frozenset(t for t in query_tokens(query, whole=known) if t not in STOPWORDS)


@dataclass(frozen=True)
class Fuser:
    """One fusion configuration: how member hits become one ranking (see the module).

    ``methods`` gives each member's normalisation (convex fusion), ``k`` the RRF constant,
    ``name_weight`` the weight of :func:`name_coverage`, ``exact_name_bonus`` what a tool whose
    whole name (``exact_name_min_words`` words or more) the query says gains, ``server_bonus``
    what a tool whose server the query names gains (:func:`names_server`; convex fusion only),
    ``server_support`` the share of its server's best score each tool gains (convex fusion only),
    ``action_bonus`` what a tool with a server whose name shares an action class with the query
    gains (:mod:`toolsearch.actions`; convex fusion only).
    """

    weights: Mapping[str, float]
    fusion: str = "convex"
    methods: Mapping[str, str] = field(default_factory=dict)
    k: float = 60.0
    name_weight: float = 0.0
    exact_name_bonus: float = 0.0
    exact_name_min_words: int = 2
    server_bonus: float = 0.0
    server_support: float = 0.0
    action_bonus: float = 0.0

    def fuse(
        self,
        query: ParsedQuery,
        hits: Mapping[str, Sequence[Hit]],
        names: Mapping[str, NameWords],
        k: int | None = None,
    ) -> dict[str, float]:
        """Fused scores of the members' ``hits``; ``names`` maps tools to their
        :func:`name_words`. With ``k``, only the tools of ``names`` that can still be among
        the best ``k`` once their name bonus, server support and action bonus are added (see
        :meth:`_reachable`)."""
        if self.fusion == "rrf":
            rankings = {m: [hit.name for hit in found] for m, found in hits.items()}
            return rrf_fuse(rankings, self.weights, self.k)
        fused = convex_fuse(hits, self.weights, self.methods)
        if not (
            self.name_weight
            or self.exact_name_bonus
            or self.server_bonus
            or self.server_support
            or self.action_bonus
        ):
            return fused
        words = query_words(query, vocabulary(names))
        wanted = action_classes(words) if self.action_bonus else frozenset()
        lifted = self._server_named(fused, words, names)
        if k is None:
            kept = needed = list(fused)
        else:
            kept, needed = self._reachable(fused, lifted, words, names, k, bool(wanted))
        scored = {
            name: fused[name] + self._bonus(words, names.get(name), name in lifted)
            for name in needed
        }
        if self.server_support:
            scored = self._supported(scored, names)
        if wanted:
            scored = {
                name: score + self._action(names.get(name), wanted)
                for name, score in scored.items()
            }
        return {name: round(scored[name], _SCORE_DECIMALS) for name in kept}

    def _supported(
        self, scored: Mapping[str, float], names: Mapping[str, NameWords]
    ) -> dict[str, float]:
        """``scored`` plus ``server_support`` times the best score among each tool's server's
        tools (a tool with no server is a server of its own: its own score)."""
        leads = _server_leads(scored, names)
        return {
            name: score + self.server_support * leads.get(_home(names, name), score)
            for name, score in scored.items()
        }

    def _reachable(
        self,
        fused: Mapping[str, float],
        lifted: Collection[str],
        words: frozenset[str],
        names: Mapping[str, NameWords],
        k: int,
        acting: bool = False,
    ) -> tuple[list[str], list[str]]:
        """The tools of ``fused`` (those in ``names``) that can still be among the best ``k``,
        and the tools whose name bonus must be known to score them: those, plus any tool that
        could lead a kept tool's server. Both in ``fused``'s order, which breaks ties.

        A tool's name bonus is at most ``spread``, so its score after bonuses lies in
        ``[low, low + spread]`` (``low``: fused score plus server bonus, for the tools of
        ``lifted``). The Dice coefficient
        of the query's words with a name of at most ``W`` words is at most ``2W / (|Q| + W)``,
        so for a long request the spread, and the work, is small. A server's lead lies in the
        same band, so with server support ``μ`` the final score lies in
        ``[floor, floor + (1 + μ) · spread]``, ``floor`` being the score with every name bonus
        0. The ``k`` best floors are reached by ``k`` tools; a tool whose upper end falls short
        of the ``k``-th floor cannot pass them. When the query asks for an action (``acting``),
        the action bonus, added after the server support, widens the band by itself."""
        low = {
            name: score + (self.server_bonus if name in lifted else 0.0)
            for name, score in fused.items()
            if name in names
        }
        if len(low) <= k:
            return list(low), list(low)
        longest = max(len(names[name].words) for name in low)
        dice = min(1.0, 2 * longest / (len(words) + longest)) if longest else 0.0
        spread = self.name_weight * dice + self.exact_name_bonus + 1e-9
        floor = self._supported(low, names) if self.server_support else low
        kth = heapq.nlargest(k, floor.values())[-1]
        reach = (1 + self.server_support) * spread + (self.action_bonus if acting else 0.0)
        kept = [name for name, score in floor.items() if score + reach >= kth]
        if not self.server_support:
            return kept, kept
        leads = _server_leads(low, names)
        homes = {_home(names, name) for name in kept} - {""}
        chosen = set(kept)
        needed = [  # the kept tools and those that could lead a kept tool's server
            name
            for name, score in low.items()
            if name in chosen
            or (_home(names, name) in homes and score + spread >= leads[_home(names, name)])
        ]
        return kept, needed

    def _server_named(
        self, fused: Mapping[str, float], words: frozenset[str], names: Mapping[str, NameWords]
    ) -> set[str]:
        """The tools of ``fused`` whose server the query names (:func:`names_server`, tested
        once per server): those that get the server bonus."""
        if not self.server_bonus:
            return set()
        servers = {names[name].server for name in fused if name in names}
        named = {server for server in servers if _says_server(words, server)}
        return {name for name in fused if name in names and names[name].server in named}

    def _bonus(self, words: frozenset[str], found: NameWords | None, lifted: bool) -> float:
        """What a tool's name adds to its fused score for a query of content ``words`` (a tool
        without name words: nothing): name match, exact-name bonus, and the server bonus when
        ``lifted`` (:meth:`_server_named`)."""
        if found is None:
            return 0.0
        bonus = self.name_weight * name_coverage(words, found.words)
        if self.exact_name_bonus and names_whole_name(words, found.own, self.exact_name_min_words):
            bonus += self.exact_name_bonus
        if lifted:
            bonus += self.server_bonus
        return bonus

    def _action(self, found: NameWords | None, wanted: frozenset[str]) -> float:
        """The action bonus of a tool with a server whose name shares a class with the query's
        ``wanted`` actions. It tells a server's tools apart: added after the server support, it
        does not lift the whole server, and a tool without a server has no siblings."""
        if found is None or not found.home:
            return 0.0
        return self.action_bonus if found.actions & wanted else 0.0
