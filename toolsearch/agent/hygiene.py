"""History hygiene before a request is sent (docs/reference-behaviour.md §5).

- Search off → every ``tool_reference`` is stripped; a result left empty reads
  ``[Tool references removed - tool search not enabled]``.
- References to tools that left the pool are stripped; a result left empty reads
  ``[Tool references removed - tools no longer available]``.
- References in the result of any tool but ToolSearch are stripped: only search results load
  tools (docs/security.md, "Tool references"); a result left empty reads
  ``[Tool references removed - only ToolSearch results load tools]``.
- A user message whose results still carry references gets one sibling text block
  ``Tool loaded.`` after its results — never inside a result.
- Server-side search blocks (``server_tool_use`` for a ``tool_search_tool_*`` tool and its
  ``tool_search_tool_result``) are kept only when the request uses server-side search; their
  references follow the same pool rule.

Calling a deferred tool that was never loaded fails validation with a hint to run ToolSearch
with ``select:<name>`` first (:func:`call_error`). Everything here returns new lists and never
mutates the history it is given.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

from toolsearch.agent.messages import Block, Message, text_block
from toolsearch.agent.state import loads_tools, search_call_ids
from toolsearch.tool import TOOL_SEARCH_NAME, Tool, is_deferred

__all__ = [
    "FOREIGN_REFERENCE_TEXT",
    "SEARCH_OFF_TEXT",
    "SERVER_SEARCH_TOOLS",
    "TOOL_LOADED_TEXT",
    "UNAVAILABLE_TEXT",
    "call_error",
    "clean_history",
    "not_loaded_hint",
    "unknown_tool_text",
]

SEARCH_OFF_TEXT = "[Tool references removed - tool search not enabled]"
UNAVAILABLE_TEXT = "[Tool references removed - tools no longer available]"
FOREIGN_REFERENCE_TEXT = "[Tool references removed - only ToolSearch results load tools]"
TOOL_LOADED_TEXT = "Tool loaded."
SERVER_SEARCH_TOOLS = frozenset({"tool_search_tool_regex", "tool_search_tool_bm25"})


def not_loaded_hint(name: str) -> str:
    """The validation error for a call to a deferred tool whose schema was never loaded."""
    return (
        f"Tool {name!r} is deferred and its schema has not been loaded, so it cannot be called "
        f'yet. Call {TOOL_SEARCH_NAME} with query "select:{name}" first, then call {name} again.'
    )


def unknown_tool_text(name: str) -> str:
    """The error for a call to a tool that is not available to this agent (denied tools
    included: the text does not tell a denied tool from one that never existed)."""
    return f"No such tool available: {name}"


def call_error(
    name: str,
    *,
    pool: Mapping[str, Tool],
    loaded: Collection[str],
    search_enabled: bool,
) -> str | None:
    """Why a model's call to ``name`` must not run, or None when it may.

    ``pool`` maps the agent's tool names to tools (after permissions and scoping); ``loaded``
    is the discovered set.
    """
    tool = pool.get(name)
    if tool is None or (name == TOOL_SEARCH_NAME and not search_enabled):
        return unknown_tool_text(name)
    if search_enabled and is_deferred(tool) and name not in loaded:
        return not_loaded_hint(name)
    return None


def _clean_result(
    block: Block, *, search_enabled: bool, pool_names: Collection[str], search_ids: Collection[str]
) -> tuple[Block, bool]:
    """The result with references stripped as needed, and whether references remain."""
    content = block.get("content")
    if not isinstance(content, list):
        return block, False
    refs = [b for b in content if isinstance(b, Mapping) and b.get("type") == "tool_reference"]
    if not refs:
        return block, False
    if not search_enabled or not loads_tools(block, search_ids):
        kept = [b for b in content if b not in refs]
        placeholder = SEARCH_OFF_TEXT if not search_enabled else FOREIGN_REFERENCE_TEXT
    else:
        kept = [
            b
            for b in content
            if not (
                isinstance(b, Mapping)
                and b.get("type") == "tool_reference"
                and b.get("tool_name") not in pool_names
            )
        ]
        placeholder = UNAVAILABLE_TEXT
    remaining = any(isinstance(b, Mapping) and b.get("type") == "tool_reference" for b in kept)
    if len(kept) == len(content):
        return block, remaining
    cleaned = dict(block)
    cleaned["content"] = [dict(b) for b in kept] if kept else [text_block(placeholder)]
    return cleaned, remaining


def _clean_server_result(block: Block, pool_names: Collection[str]) -> Block:
    content = block.get("content")
    if not isinstance(content, Mapping) or not isinstance(content.get("tool_references"), list):
        return block
    refs = content["tool_references"]
    kept = [r for r in refs if isinstance(r, Mapping) and r.get("tool_name") in pool_names]
    if len(kept) == len(refs):
        return block
    cleaned = dict(block)
    cleaned["content"] = {**content, "tool_references": [dict(r) for r in kept]}
    return cleaned


def _is_server_search(block: Mapping[str, Any]) -> bool:
    kind = block.get("type")
    if kind == "server_tool_use":
        return block.get("name") in SERVER_SEARCH_TOOLS
    return kind == "tool_search_tool_result"


def _is_sibling(block: Mapping[str, Any]) -> bool:
    return block.get("type") == "text" and block.get("text") == TOOL_LOADED_TEXT


def _clean_message(
    message: Message,
    *,
    search_enabled: bool,
    pool_names: Collection[str],
    server_side: bool,
    search_ids: Collection[str],
) -> Message:
    content = message.get("content")
    if not isinstance(content, list):
        return message
    out: list[Block] = []
    carrying = False
    has_results = False
    changed = False
    for block in content:
        if not isinstance(block, Mapping):
            out.append(block)
            continue
        if _is_server_search(block):
            if not (server_side and search_enabled):
                changed = True
                continue
            cleaned = _clean_server_result(dict(block), pool_names)
            changed |= cleaned is not block
            out.append(cleaned)
            continue
        if block.get("type") == "tool_result":
            has_results = True
            cleaned, remaining = _clean_result(
                dict(block),
                search_enabled=search_enabled,
                pool_names=pool_names,
                search_ids=search_ids,
            )
            changed |= cleaned.get("content") != block.get("content")
            carrying |= remaining
            out.append(cleaned)
            continue
        out.append(block)  # type: ignore[arg-type]
    if has_results:
        without = [b for b in out if not (isinstance(b, Mapping) and _is_sibling(b))]
        if carrying:
            last = max(i for i, b in enumerate(without) if b.get("type") == "tool_result")
            without.insert(last + 1, text_block(TOOL_LOADED_TEXT))
        if without != out:
            changed = True
            out = without
    if not out:
        out = [text_block(SEARCH_OFF_TEXT)]
        changed = True
    if not changed:
        return message
    cleaned_message = dict(message)
    cleaned_message["content"] = out
    return cleaned_message


def clean_history(
    messages: Sequence[Message],
    *,
    search_enabled: bool,
    pool_names: Collection[str],
    server_side: bool = False,
) -> list[Message]:
    """The history as it may be sent: references stripped per the rules above, ``Tool
    loaded.`` siblings in place. Unchanged messages are returned as the same objects."""
    search_ids = search_call_ids(messages)
    return [
        _clean_message(
            m,
            search_enabled=search_enabled,
            pool_names=pool_names,
            server_side=server_side,
            search_ids=search_ids,
        )
        for m in messages
    ]
