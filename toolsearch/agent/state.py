"""Discovered-tool state, rebuilt from the history, and the compaction boundary that keeps it.

A deferred tool is *discovered* once its name appears in a ``tool_reference`` block of the
result of a ToolSearch call (client-side search) or of a server-side
``tool_search_tool_result``. A reference in any other tool's result loads nothing: a tool (a
web page it fetched, a hostile MCP server) could otherwise hand the model a tool it never
searched for (docs/security.md, "Tool references"). Nothing is kept outside the history: the
discovered set is always recomputed from it, so it cannot drift from what the model has
actually seen.

Compaction replaces old messages by a summary and so drops their reference blocks. The
compaction boundary — the summary message written by :func:`compact` — records the discovered
set under ``toolsearch.discovered_tools``, and :func:`discovered_tools` reads it back, so
discovered tools survive any number of compactions.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

from toolsearch.agent.messages import (
    BOUNDARY_KIND,
    DELTA_KIND,
    META_KEY,
    HistoryError,
    Message,
    blocks,
    meta_kind,
)
from toolsearch.tool import TOOL_SEARCH_NAME

__all__ = [
    "boundary_message",
    "compact",
    "discovered_tools",
    "last_boundary_index",
    "loads_tools",
    "referenced_names",
    "search_call_ids",
]


def referenced_names(block: Mapping[str, Any]) -> list[str]:
    """Tool names a result block references (``tool_result`` or ``tool_search_tool_result``)."""
    kind = block.get("type")
    if kind == "tool_result":
        content = block.get("content")
        if isinstance(content, list):
            return [
                str(b["tool_name"])
                for b in content
                if isinstance(b, Mapping) and b.get("type") == "tool_reference"
            ]
    elif kind == "tool_search_tool_result":
        content = block.get("content")
        if isinstance(content, Mapping):
            refs = content.get("tool_references")
            if isinstance(refs, list):
                return [str(r["tool_name"]) for r in refs if isinstance(r, Mapping)]
    return []


def search_call_ids(messages: Iterable[Mapping[str, Any]]) -> frozenset[str]:
    """Ids of the ToolSearch calls (``tool_use`` blocks of the model): the only tool results
    whose references load tools."""
    return frozenset(
        str(block.get("id"))
        for message in messages
        if message.get("role") == "assistant"
        for block in blocks(message)
        if block.get("type") == "tool_use" and block.get("name") == TOOL_SEARCH_NAME
    )


def loads_tools(block: Mapping[str, Any], search_ids: Collection[str]) -> bool:
    """Whether ``block`` is a result whose references may load tools: a ToolSearch call's
    ``tool_result`` or a server-side ``tool_search_tool_result``."""
    kind = block.get("type")
    if kind == "tool_result":
        return str(block.get("tool_use_id")) in search_ids
    return kind == "tool_search_tool_result"


def _carried(message: Mapping[str, Any]) -> list[str]:
    meta = message.get(META_KEY)
    if isinstance(meta, Mapping) and meta.get("kind") == BOUNDARY_KIND:
        names = meta.get("discovered_tools", [])
        if isinstance(names, list):
            return [str(n) for n in names]
    return []


def discovered_tools(messages: Iterable[Mapping[str, Any]]) -> frozenset[str]:
    """Every tool name referenced by a search result in ``messages`` or carried by a
    boundary."""
    messages = list(messages)
    search_ids = search_call_ids(messages)
    found: set[str] = set()
    for message in messages:
        found.update(_carried(message))
        for block in blocks(message):
            if loads_tools(block, search_ids):
                found.update(referenced_names(block))
    return frozenset(found)


def last_boundary_index(messages: Sequence[Mapping[str, Any]]) -> int | None:
    """Index of the last compaction boundary, or None when the history was never compacted."""
    for index in range(len(messages) - 1, -1, -1):
        if meta_kind(messages[index]) == BOUNDARY_KIND:
            return index
    return None


def boundary_message(summary: str, discovered: Iterable[str]) -> Message:
    """The summary message that opens a compacted history and carries the discovered set."""
    if not isinstance(summary, str) or not summary.strip():
        raise HistoryError("a compaction summary must be a non-empty string")
    return {
        "role": "user",
        "content": summary,
        META_KEY: {"kind": BOUNDARY_KIND, "discovered_tools": sorted(set(discovered))},
    }


def _has_results(message: Mapping[str, Any]) -> bool:
    return message.get("role") == "user" and any(
        b.get("type") == "tool_result" for b in blocks(message)
    )


def _safe_cut(messages: Sequence[Message], keep_last: int) -> int:
    cut = max(0, len(messages) - keep_last)
    # never start the kept tail with results whose tool calls were summarised away
    while 0 < cut < len(messages) and _has_results(messages[cut]):
        cut -= 1
    return cut


def compact(messages: Sequence[Message], summary: str, *, keep_last: int = 0) -> list[Message]:
    """Replace all but the last ``keep_last`` messages by a boundary carrying ``summary``.

    The boundary records every tool discovered so far (including what earlier boundaries
    carried). Announcement deltas in the kept tail are dropped, so the next request
    announces the deferred tools in full. The cut moves earlier rather than separate tool
    results from their calls. Inputs are not mutated.
    """
    if isinstance(keep_last, bool) or not isinstance(keep_last, int) or keep_last < 0:
        raise HistoryError(f"keep_last must be a non-negative integer, got {keep_last!r}")
    cut = _safe_cut(messages, keep_last)
    tail = messages[cut:]
    discovered = discovered_tools(messages)
    kept = [dict(m) for m in tail if meta_kind(m) != DELTA_KIND]
    return [boundary_message(summary, discovered), *kept]
