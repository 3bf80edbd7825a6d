"""The provider-neutral conversation format every agent-layer module reads and writes.

A history is a list of plain JSON-ready dicts, shaped like Anthropic's Messages API because that
is the API whose blocks the rules talk about (``tool_reference`` inside ``tool_result``)::

    {"role": "user" | "assistant", "content": str | [block, ...], "toolsearch": {...}?}

Blocks: ``{"type": "text", "text"}``, ``{"type": "tool_use", "id", "name", "input"}``,
``{"type": "tool_result", "tool_use_id", "content": str | [text | tool_reference],
"is_error"?}`` and ``{"type": "tool_reference", "tool_name"}`` (only inside a result). The
server-side Anthropic search adds ``server_tool_use`` and ``tool_search_tool_result`` blocks.

The optional ``toolsearch`` key marks the two messages this layer persists itself: a compaction
boundary (``{"kind": "compaction_boundary", "discovered_tools": [...]}``) and an announcement
delta (``{"kind": "deferred_tools_delta", "added": [...], "removed": [...]}``). Provider
adapters drop the key; everything else in a message is sent as it is. Keeping the history
neutral means the discovered set, announcements and hygiene are computed once, the same way for
every provider, and a conversation can move between providers.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from toolsearch.errors import ToolSearchError

__all__ = [
    "BOUNDARY_KIND",
    "DELTA_KIND",
    "META_KEY",
    "Block",
    "HistoryError",
    "Message",
    "ToolCall",
    "assistant_message",
    "blocks",
    "iter_blocks",
    "load_history",
    "meta_kind",
    "reference_block",
    "text_block",
    "text_of",
    "tool_calls",
    "tool_result_block",
    "tool_use_block",
    "user_message",
    "validate_history",
]

Message = dict[str, Any]
Block = dict[str, Any]

META_KEY = "toolsearch"
BOUNDARY_KIND = "compaction_boundary"
DELTA_KIND = "deferred_tools_delta"

_ROLES = ("user", "assistant")


class HistoryError(ToolSearchError, ValueError):
    """A conversation history is not in the neutral format (the message says where)."""


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One ``tool_use`` block of an assistant message, as the loop runs it."""

    id: str
    name: str
    input: Mapping[str, Any] = field(default_factory=dict)


def text_block(text: str) -> Block:
    """A text block."""
    return {"type": "text", "text": text}


def reference_block(name: str) -> Block:
    """A ``tool_reference`` block: loads ``name``'s definition where it appears."""
    return {"type": "tool_reference", "tool_name": name}


def tool_use_block(call_id: str, name: str, arguments: Mapping[str, Any]) -> Block:
    """A ``tool_use`` block (what an assistant message carries to call a tool)."""
    return {"type": "tool_use", "id": call_id, "name": name, "input": dict(arguments)}


def tool_result_block(
    call_id: str, content: str | Sequence[Block], *, is_error: bool = False
) -> Block:
    """A ``tool_result`` block answering the ``tool_use`` with id ``call_id``."""
    block: Block = {
        "type": "tool_result",
        "tool_use_id": call_id,
        "content": content if isinstance(content, str) else [dict(b) for b in content],
    }
    if is_error:
        block["is_error"] = True
    return block


def user_message(content: str | Sequence[Block]) -> Message:
    """A user message (a prompt, or tool results)."""
    return {"role": "user", "content": content if isinstance(content, str) else list(content)}


def assistant_message(content: str | Sequence[Block]) -> Message:
    """An assistant message (text and tool calls)."""
    return {
        "role": "assistant",
        "content": content if isinstance(content, str) else list(content),
    }


def blocks(message: Mapping[str, Any]) -> list[Block]:
    """A message's content as a list of blocks (a string becomes one text block)."""
    content = message.get("content", "")
    if isinstance(content, str):
        return [text_block(content)] if content else []
    return [b for b in content if isinstance(b, Mapping)]  # type: ignore[misc]


def text_of(content: str | Sequence[Mapping[str, Any]]) -> str:
    """The text of a result's or message's content: strings and text blocks, newline-joined."""
    if isinstance(content, str):
        return content
    return "\n".join(
        str(b.get("text", ""))
        for b in content
        if isinstance(b, Mapping) and b.get("type") == "text"
    )


def meta_kind(message: Mapping[str, Any]) -> str | None:
    """The ``toolsearch`` marker kind of a message this layer persisted, else None."""
    meta = message.get(META_KEY)
    if isinstance(meta, Mapping):
        kind = meta.get("kind")
        return kind if isinstance(kind, str) else None
    return None


def tool_calls(message: Mapping[str, Any]) -> list[ToolCall]:
    """The tool calls of an assistant message, in order."""
    if message.get("role") != "assistant":
        return []
    return [
        ToolCall(str(b["id"]), str(b["name"]), dict(b.get("input") or {}))
        for b in blocks(message)
        if b.get("type") == "tool_use"
    ]


def _where(index: int, detail: str = "") -> str:
    return f"message {index}" + (f", {detail}" if detail else "")


def validate_history(messages: Iterable[Any]) -> list[Message]:
    """Check that ``messages`` is a neutral history and return it as a list.

    Raises :class:`HistoryError` naming the message (and block) that is wrong. Unknown block
    types are allowed — they pass through to providers that know them.
    """
    checked: list[Message] = []
    for index, message in enumerate(messages):
        if not isinstance(message, Mapping):
            raise HistoryError(f"{_where(index)}: expected an object, got {type(message).__name__}")
        role = message.get("role")
        if role not in _ROLES:
            raise HistoryError(f"{_where(index)}: role must be 'user' or 'assistant', got {role!r}")
        content = message.get("content")
        if not isinstance(content, str | list):
            raise HistoryError(f"{_where(index)}: content must be a string or a list of blocks")
        if isinstance(content, list):
            for position, block in enumerate(content):
                _check_block(block, index, position, role)
        meta = message.get(META_KEY)
        if meta is not None and not isinstance(meta, Mapping):
            raise HistoryError(f"{_where(index)}: '{META_KEY}' must be an object")
        checked.append(dict(message))
    return checked


def _check_block(block: Any, index: int, position: int, role: str) -> None:
    where = _where(index, f"block {position}")
    if not isinstance(block, Mapping) or not isinstance(block.get("type"), str):
        raise HistoryError(f"{where}: a block must be an object with a string 'type'")
    kind = block["type"]
    required: dict[str, tuple[str, ...]] = {
        "text": ("text",),
        "tool_use": ("id", "name", "input"),
        "tool_result": ("tool_use_id",),
    }
    for key in required.get(kind, ()):
        if key not in block:
            raise HistoryError(f"{where}: a {kind} block needs '{key}'")
    if kind == "tool_use" and role != "assistant":
        raise HistoryError(f"{where}: tool_use blocks belong to assistant messages")
    if kind == "tool_result":
        if role != "user":
            raise HistoryError(f"{where}: tool_result blocks belong to user messages")
        content = block.get("content", "")
        if not isinstance(content, str | list):
            raise HistoryError(f"{where}: tool_result content must be a string or a list")
        if isinstance(content, list):
            for inner in content:
                if not isinstance(inner, Mapping) or not isinstance(inner.get("type"), str):
                    raise HistoryError(f"{where}: tool_result content blocks need a 'type'")
                if inner["type"] == "tool_reference" and not isinstance(
                    inner.get("tool_name"), str
                ):
                    raise HistoryError(f"{where}: a tool_reference needs a string 'tool_name'")


def load_history(path: str) -> list[Message]:
    """Read a history file: a JSON array of messages, ``{"messages": [...]}``, or JSONL with
    one message a line."""
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except OSError as exc:
        raise HistoryError(f"{path}: cannot read history: {exc}") from exc
    stripped = text.strip()
    if not stripped:
        return []
    try:
        data: Any = json.loads(stripped)
    except json.JSONDecodeError as whole:
        if stripped.startswith("["):
            raise HistoryError(f"{path}: invalid JSON: {whole}") from whole
        try:
            data = [json.loads(line) for line in stripped.splitlines() if line.strip()]
        except json.JSONDecodeError as exc:
            raise HistoryError(f"{path}: invalid JSON: {exc}") from exc
    if isinstance(data, Mapping):
        data = data.get("messages", [data])
    try:
        return validate_history(data)
    except HistoryError as exc:
        raise HistoryError(f"{path}: {exc}") from exc


def iter_blocks(messages: Iterable[Mapping[str, Any]]) -> Iterator[tuple[int, Block]]:
    """Every block of every message with the message's index (strings count as text)."""
    for index, message in enumerate(messages):
        for block in blocks(message):
            yield index, block
