"""Multi-step requests: split a task into its steps, rank each step, merge the rankings.

"Read Jira issue OPS-200 and create a matching Linear issue" needs two tools, and one search
for the whole sentence tends to return five Jira tools. Per-step retrieval (as in MCP-Zero and
the per-step retrieval studies of multi-tool agents) searches each step on its own and merges
the rankings round-robin, so every step's best tool reaches the first few results.

:func:`split_steps` cuts a request at sentence ends, semicolons, "then" and at "and" between
two clauses of at least :data:`MIN_CLAUSE_WORDS` words each; a request shorter than
:data:`MIN_SPLIT_WORDS` words, or with no such boundary, is one step (short queries are never
changed). :func:`merge_round_robin` interleaves several rankings: first the whole request's
best, then each step's best, then the second of each, and so on, each tool once; merged hits
carry strictly decreasing rank-derived scores below the first ranking's top score. The same
merge serves callers that pass several queries at once (:meth:`ToolSearch.search_many`).
Measurements: ``docs/retrieval.md``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from toolsearch.backend import Hit

__all__ = [
    "MIN_CLAUSE_WORDS",
    "MIN_SPLIT_WORDS",
    "merge_matches",
    "merge_round_robin",
    "search_steps",
    "split_steps",
]

#: Requests shorter than this many words are never split.
MIN_SPLIT_WORDS = 8
#: Each side of an "and" must have this many words for the "and" to separate two steps.
MIN_CLAUSE_WORDS = 3
#: At most this many steps are searched (a pasted document is not a task list).
MAX_STEPS = 6

_HARD = re.compile(r"(?:[.!?;]+\s+|\s*\n+\s*|,?\s+(?:and\s+)?then\s+|,?\s+after\s+that\s+)", re.I)
_AND = re.compile(r",?\s+(?:and|&)\s+|,\s+(?:also\s+)?", re.I)


def _words(text: str) -> int:
    return len(text.split())


def _split_and(clause: str) -> list[str]:
    """Cut a clause at "and" (or a comma) where both neighbours are clauses of their own."""
    parts = [p.strip() for p in _AND.split(clause) if p.strip()]
    steps: list[str] = []
    for part in parts:
        if steps and (_words(part) < MIN_CLAUSE_WORDS or _words(steps[-1]) < MIN_CLAUSE_WORDS):
            steps[-1] = f"{steps[-1]} and {part}"
        else:
            steps.append(part)
    return steps


def split_steps(text: str) -> list[str]:
    """The steps of a request, in order; ``[text]`` when it is short or a single step."""
    if not isinstance(text, str) or _words(text) < MIN_SPLIT_WORDS:
        return [text]
    steps: list[str] = []
    for clause in _HARD.split(text):
        clause = clause.strip(" .,;!?")
        if clause:
            steps.extend(_split_and(clause))
    steps = [s for s in steps if s.strip()]
    if len(steps) < 2:
        return [text]
    return steps[:MAX_STEPS]


def merge_round_robin(rankings: Sequence[Sequence[Hit]], k: int) -> list[Hit]:
    """Interleave ``rankings`` (the first one leads each round), each tool once, at most ``k``
    hits, with scores ``top · (n - i) / n`` (``top`` = the best score of all the rankings,
    ``n`` = the number of merged hits) so the order survives any re-sort by score."""
    seen: set[str] = set()
    order: list[str] = []
    depth = max((len(r) for r in rankings), default=0)
    for position in range(depth):
        for ranking in rankings:
            if position < len(ranking) and ranking[position].name not in seen:
                seen.add(ranking[position].name)
                order.append(ranking[position].name)
    order = order[: max(k, 0)]
    top = max((r[0].score for r in rankings if r), default=1.0)
    n = len(order)
    return [Hit(name, round(top * (n - i) / n, 12)) for i, name in enumerate(order)]


def search_steps(
    search: Callable[[str, int], list[Hit]], text: str, k: int, *, depth: int
) -> list[Hit]:
    """``search(text, k)`` for a one-step request; for several steps, the whole request's and
    each step's ``depth`` best merged round-robin (at most ``k``)."""
    steps = split_steps(text)
    if len(steps) < 2:
        return search(text, k)
    rankings = [search(text, depth)] + [search(step, depth) for step in steps]
    return merge_round_robin(rankings, k)


def merge_matches(results: Sequence[Sequence[Any]], k: int) -> list[Any]:
    """Round-robin merge of several calls' matches (first call first), each tool once, at most
    ``k``: what :meth:`toolsearch.engine.ToolSearch.search_many` returns."""
    seen: set[str] = set()
    merged: list[Any] = []
    depth = max((len(r) for r in results), default=0)
    for position in range(depth):
        for matches in results:
            if position < len(matches) and matches[position].name not in seen:
                seen.add(matches[position].name)
                merged.append(matches[position])
    return merged[: max(k, 0)]
