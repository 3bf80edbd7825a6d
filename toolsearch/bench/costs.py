"""What a backend costs: per-query latency percentiles and the tokens a request carries.

Tokens compare two ways of sending a catalogue to the model (docs/reference-behaviour.md §5):

``all_tools``    every tool definition sent up front (tool search off);
``with_search``  the ToolSearch tool's definition, the ``<available-deferred-tools>`` block
                 announcing every deferred name (one a line), and the definitions of the
                 tools the query loaded — its first ``k`` matches (``k`` = ToolSearch's
                 default ``max_results``, 5) — averaged over the queries and rounded.

Both are counted with the same :class:`toolsearch.tokens.TokenCounter` (by default the 2.5
characters-a-token estimate).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from toolsearch.engine import DEFAULT_MAX_RESULTS, tool_search_tool
from toolsearch.tokens import TokenCounter, default_counter, definition_text
from toolsearch.tool import Tool

__all__ = [
    "LATENCY_PERCENTILES",
    "TOKEN_K",
    "announcement_text",
    "latency_summary",
    "percentile",
    "request_tokens",
]

#: Tools a query loads in the ``with_search`` token count: ToolSearch's default max_results.
TOKEN_K = DEFAULT_MAX_RESULTS

LATENCY_PERCENTILES = (50, 95, 99)


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100) with linear interpolation between closest ranks (the
    method numpy calls ``"linear"``); 0.0 for no values."""
    if not 0 <= q <= 100:
        raise ValueError(f"percentile must be between 0 and 100, got {q}")
    if not values:
        return 0.0
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    low, high = math.floor(position), math.ceil(position)
    fraction = position - low
    return float(ordered[low] + (ordered[high] - ordered[low]) * fraction)


def latency_summary(latencies_ms: Sequence[float]) -> dict[str, float]:
    """``{"p50", "p95", "p99"}`` in milliseconds, rounded to microseconds."""
    return {f"p{q}": round(percentile(latencies_ms, q), 3) for q in LATENCY_PERCENTILES}


def announcement_text(names: Sequence[str]) -> str:
    """The ``<available-deferred-tools>`` block a request carries: sorted names, one a line."""
    body = "\n".join(sorted(names))
    return f"<available-deferred-tools>\n{body}\n</available-deferred-tools>"


def request_tokens(
    tools: Sequence[Tool],
    loaded: Mapping[str, Sequence[str]],
    *,
    k: int = TOKEN_K,
    counter: TokenCounter | None = None,
) -> dict[str, int]:
    """``{"all_tools", "with_search"}`` for a catalogue whose tools are all deferred.

    ``loaded[qid]`` is the list of tool names a query's ToolSearch call returned, best first;
    its first ``k`` count as loaded.
    """
    counter = counter or default_counter()
    per_tool = {tool.name: counter.count(definition_text(tool)) for tool in tools}
    all_tools = sum(per_tool.values())
    fixed = counter.count(definition_text(tool_search_tool()))
    fixed += counter.count(announcement_text(list(per_tool)))
    if loaded:
        total = sum(sum(per_tool.get(n, 0) for n in names[:k]) for names in loaded.values())
        average = total / len(loaded)
    else:
        average = 0.0
    return {"all_tools": all_tools, "with_search": round(fixed + average)}
