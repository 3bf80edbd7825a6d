"""Backend ``hybrid``: reciprocal rank fusion (RRF) of any registered backends.

Each member ranks the query on its own (its best ``depth`` hits); a tool's fused score is

    score(tool) = Σ_members  weight_m / (k + rank_m(tool))

over the members that returned it, ``rank`` counting from 1 (Cormack, Clarke and Büttcher,
"Reciprocal rank fusion outperforms Condorcet and individual rank learning methods", SIGIR
2009; ``k = 60`` is their constant). RRF reads ranks only, so members with incomparable score
scales (BM25 sums, cosines, keyword points) combine without calibration.

Members are loaded by name through :func:`toolsearch.registry.load_backend`, so a third-party
backend can be fused like a built-in one. The default members and weights,
:data:`DEFAULT_MEMBERS` and :data:`DEFAULT_K`, are the best configuration that
``benchmarks/tune_hybrid.py`` measured among the installed backends on the public dev sets
(results in ``benchmarks/results/tune_hybrid.json``).

A member that may take long to index (``warms = True``, the embedding backend) can be updated
in the background (``background``; by default when called from a thread running an asyncio
event loop, such as the MCP gateway's): the other members rank at once and the slow one joins
when its vectors are ready (:meth:`HybridBackend.member_states`, logs; docs/speed.md).
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import partial
from typing import Any, ClassVar

from toolsearch.backend import BaseBackend, Hit, IncrementalBackend, SearchBackend
from toolsearch.errors import ConfigError
from toolsearch.query import ParsedQuery
from toolsearch.tool import Tool, pool_sort_key

from .warming import BackgroundUpdates

__all__ = ["DEFAULT_DEPTH", "DEFAULT_K", "DEFAULT_MEMBERS", "HybridBackend", "rrf_fuse"]

#: Members and weights used when none are configured (measured, see the module docstring).
DEFAULT_MEMBERS: Mapping[str, float] = {"embedding": 1.0, "fts5": 0.5}
#: The RRF constant used when none is configured.
DEFAULT_K = 5
#: How many hits each member contributes when ``depth`` is not configured.
DEFAULT_DEPTH = 50

# Fused sums of the same ranks added in a different member order can differ in the last bit;
# rounding makes them tie exactly, so the tie-break is pool order.
_SCORE_DECIMALS = 12


def rrf_fuse(
    rankings: Mapping[str, Sequence[str]],
    weights: Mapping[str, float],
    k: float = DEFAULT_K,
) -> dict[str, float]:
    """Weighted reciprocal-rank-fusion scores: ``Σ weights[m] / (k + rank)`` per tool, where
    ``rankings[m]`` lists member ``m``'s tools best first (rank 1 first). Members without a
    weight count 1. Scores are rounded to 12 decimals so equal rank patterns tie exactly."""
    fused: dict[str, float] = {}
    for member, names in rankings.items():
        weight = float(weights.get(member, 1.0))
        for rank, name in enumerate(names, start=1):
            fused[name] = fused.get(name, 0.0) + weight / (k + rank)
    return {name: round(score, _SCORE_DECIMALS) for name, score in fused.items()}


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
            raise ConfigError(f"hybrid member names must be backend names, got {name!r}")
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


class HybridBackend(BaseBackend):
    """Reciprocal rank fusion of other backends (weights, ``k`` and ``depth`` by config).

    ``members``: backend names (weight 1 each) or ``{name: weight}``; default
    :data:`DEFAULT_MEMBERS`. ``k``: the RRF constant (larger flattens the rank discount).
    ``depth``: hits taken from each member (at least the requested ``k`` of a search).
    ``member_options``: constructor options per member, e.g. ``{"embedding": {"model": ...}}``.
    ``background``: update slow members (``warms = True``) on a worker thread and rank without
    them until they are ready; None = only when called inside a running asyncio event loop.

    It is incremental when every member is (updates are forwarded to the members); ``requires``
    and ``extra`` describe the default members, so the registry's install hint names the
    extras those need.
    """

    name: ClassVar[str] = "hybrid"
    incremental = _AllMembersIncremental()
    persistent: ClassVar[bool] = False
    extra: ClassVar[str | None] = "embedding,fts5"
    requires: ClassVar[tuple[str, ...]] = ("sqlite_utils", "numpy", "sentence_transformers")

    def __init__(
        self,
        members: Mapping[str, float] | Sequence[str] | None = None,
        k: int = DEFAULT_K,
        depth: int = DEFAULT_DEPTH,
        member_options: Mapping[str, Mapping[str, Any]] | None = None,
        background: bool | None = None,
    ) -> None:
        super().__init__()
        if isinstance(k, bool) or not isinstance(k, int | float) or not 0 <= k < math.inf:
            raise ConfigError(f"hybrid k must be a non-negative number, got {k!r}")
        if isinstance(depth, bool) or not isinstance(depth, int) or depth < 1:
            raise ConfigError(f"hybrid depth must be a positive integer, got {depth!r}")
        self.weights = _check_members(members)
        options = dict(member_options or {})
        stray = sorted(set(options) - set(self.weights))
        if stray:
            raise ConfigError(
                f"hybrid member_options name backends that are not members: {stray}; "
                f"members: {sorted(self.weights)}"
            )
        for member, opts in options.items():
            if not isinstance(opts, Mapping):
                raise ConfigError(
                    f"hybrid member_options[{member!r}] must be a table of options, got {opts!r}"
                )
        if background is not None and not isinstance(background, bool):
            raise ConfigError(f"hybrid background must be true, false or None, got {background!r}")
        from toolsearch.registry import load_backend

        self.background = background
        self._warming: dict[str, BackgroundUpdates] = {}

        self.k = k
        self.depth = depth
        self.members: dict[str, SearchBackend] = {
            member: load_backend(member, **dict(options.get(member, {}))) for member in self.weights
        }

    def index(self, tools: Sequence[Tool]) -> None:
        ordered = sorted({tool.name: tool for tool in tools}.values(), key=pool_sort_key)
        self._tools = {tool.name: tool for tool in ordered}
        for name, member in self.members.items():
            self._update(name, member, partial(member.index, ordered))

    def _build(self, tools: list[Tool]) -> None:  # pragma: no cover - index() is overridden
        self.index(tools)

    def upsert(self, tools: Sequence[Tool]) -> None:
        incoming = {tool.name: tool for tool in tools}
        if not incoming:
            return
        self._tools = {
            tool.name: tool
            for tool in sorted({**self._tools, **incoming}.values(), key=pool_sort_key)
        }
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
        self._tools = {name: tool for name, tool in self._tools.items() if name not in drop}
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

    def search(self, query: ParsedQuery, k: int) -> list[Hit]:
        if k <= 0 or query.is_empty or not self._tools:
            return []
        depth = max(self.depth, k)
        ready = [n for n in self.members if n not in self._warming or self._warming[n].ready]
        rankings = {
            name: [hit.name for hit in self.members[name].search(query, depth) if hit.score > 0]
            for name in ready
        }
        fused = rrf_fuse(rankings, self.weights, self.k)
        tools = self._tools
        ranked = sorted(
            (name for name in fused if name in tools),
            key=lambda name: (-fused[name], pool_sort_key(tools[name])),
        )
        return [Hit(name, fused[name]) for name in ranked[:k]]

    def params(self) -> dict[str, object]:
        return {
            "members": list(self.weights),
            "weights": dict(self.weights),
            "k": self.k,
            "depth": self.depth,
            "member_states": self.member_states(),
            "member_params": {
                name: member.params() if hasattr(member, "params") else {}
                for name, member in self.members.items()
            },
        }
