"""Anthropic Messages API requests, with client-side or server-side tool search.

Client-side (default): the request carries the non-deferred tools, ToolSearch and the deferred
tools discovered so far with ``defer_loading: true``; ToolSearch results are ``tool_result``
blocks whose content is ``tool_reference`` blocks, which the API expands into the referenced
definitions. The neutral history is already in this shape, so rendering only drops the
``toolsearch`` markers.

Server-side (``server_search="regex"`` or ``"bm25"``): the API runs the search. The request
carries ``tool_search_tool_regex_20251119`` or ``tool_search_tool_bm25_20251119`` instead of
ToolSearch and *every* deferred tool with ``defer_loading: true``. The API's limits are checked
here so a bad request fails with a clear :class:`~toolsearch.errors.QueryError` instead of an
HTTP 400: a regex pattern of at most 200 characters, a BM25 query of at most 500, ``limit``
between 1 and 10 000 (default 5), at least one non-deferred tool, at most 10 000 deferred tools,
and no ``cache_control`` on a deferred tool (that last one in client-side mode too).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from toolsearch.agent.messages import META_KEY, Message, blocks
from toolsearch.agent.providers.base import RequestParts, SentTool
from toolsearch.errors import ConfigError, QueryError

__all__ = [
    "BM25_QUERY_MAX_CHARS",
    "LIMIT_DEFAULT",
    "LIMIT_MAX",
    "MAX_DEFERRED_TOOLS",
    "REGEX_MAX_CHARS",
    "SERVER_TOOLS",
    "AnthropicAdapter",
    "check_server_search_input",
    "check_tools",
    "render_messages",
    "tool_param",
]

REGEX_MAX_CHARS = 200
BM25_QUERY_MAX_CHARS = 500
LIMIT_DEFAULT = 5
LIMIT_MAX = 10_000
MAX_DEFERRED_TOOLS = 10_000

ServerVariant = Literal["regex", "bm25"]

#: variant → (tool type, tool name)
SERVER_TOOLS: dict[str, tuple[str, str]] = {
    "regex": ("tool_search_tool_regex_20251119", "tool_search_tool_regex"),
    "bm25": ("tool_search_tool_bm25_20251119", "tool_search_tool_bm25"),
}
_SERVER_NAMES = {name: variant for variant, (_, name) in SERVER_TOOLS.items()}
_EPHEMERAL = {"type": "ephemeral"}


def tool_param(sent: SentTool, *, cache_control: bool = False) -> dict[str, Any]:
    """One custom tool definition (``anthropic.types.ToolParam``)."""
    tool = sent.tool
    schema = dict(tool.definition()["input_schema"])
    schema.setdefault("type", "object")
    param: dict[str, Any] = {"name": tool.name, "input_schema": schema}
    if tool.description:
        param["description"] = tool.description
    if sent.defer_loading:
        param["defer_loading"] = True
    if cache_control:
        param["cache_control"] = dict(_EPHEMERAL)
    return param


def render_messages(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Neutral messages as ``MessageParam`` dicts, the ``toolsearch`` markers dropped.

    Adjacent same-role messages (a tool result followed by a persisted delta) are left apart:
    the API combines consecutive turns itself, and keeping them apart keeps every earlier
    message byte-identical when a delta is appended.
    """
    out: list[dict[str, Any]] = []
    for message in messages:
        rendered = {k: v for k, v in message.items() if k != META_KEY}
        content = message["content"]
        rendered["content"] = content if isinstance(content, str) else [dict(b) for b in content]
        out.append(rendered)
    return out


def check_server_search_input(name: str, arguments: Mapping[str, Any]) -> None:
    """Check a server-side search call against the API's limits; raise :class:`QueryError`."""
    variant = _SERVER_NAMES.get(name)
    if variant is None:
        raise QueryError(f"{name!r} is not a server-side tool search tool")
    if variant == "regex":
        text = arguments.get("pattern", arguments.get("query"))
        field, limit = "pattern", REGEX_MAX_CHARS
    else:
        text = arguments.get("query")
        field, limit = "query", BM25_QUERY_MAX_CHARS
    if not isinstance(text, str):
        raise QueryError(f"{name}: '{field}' must be a string, got {text!r}")
    if len(text) > limit:
        raise QueryError(f"{name}: the {field} is {len(text)} characters; the limit is {limit}")
    count = arguments.get("limit", LIMIT_DEFAULT)
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= LIMIT_MAX:
        raise QueryError(f"{name}: 'limit' must be an integer from 1 to {LIMIT_MAX}, got {count!r}")


def check_tools(tools: Sequence[Mapping[str, Any]], *, server_side: bool) -> None:
    """Check a rendered tools list against the deferral rules; raise :class:`QueryError`.

    Always: no ``cache_control`` on a deferred tool. Server-side: exactly one search tool; at
    least one non-deferred tool (the search tool counts); the search tool not deferred; at most
    10 000 deferred tools.
    """
    deferred = [t for t in tools if t.get("defer_loading") is True]
    for tool in deferred:
        if tool.get("cache_control"):
            raise QueryError(
                f"tool {tool.get('name')!r} has both defer_loading and cache_control; "
                "a deferred tool cannot carry a cache breakpoint — put it on a non-deferred tool"
            )
    if not server_side:
        return
    search = [t for t in tools if t.get("name") in _SERVER_NAMES]
    if len(search) != 1:
        raise QueryError(
            f"server-side tool search needs exactly one search tool, found {len(search)}"
        )
    if len(deferred) == len(tools):
        raise QueryError(
            "server-side tool search needs at least one non-deferred tool "
            "(the search tool itself counts, so it must not be deferred)"
        )
    if search[0].get("defer_loading") is True:
        raise QueryError(f"the search tool {search[0]['name']!r} itself cannot be deferred")
    if len(deferred) > MAX_DEFERRED_TOOLS:
        raise QueryError(
            f"{len(deferred)} deferred tools; server-side tool search takes at most "
            f"{MAX_DEFERRED_TOOLS} — deny whole servers or use client-side search"
        )


@dataclass(frozen=True, slots=True)
class AnthropicAdapter:
    """Renders Messages API requests (``{"tools", "messages", "system"?}``).

    ``server_search`` picks the server-side variant; ``cache_tools`` puts a cache breakpoint
    on the last non-deferred tool, which keeps the tool list cached across turns.
    """

    server_search: ServerVariant | None = None
    cache_tools: bool = False
    name: str = "anthropic"

    def __post_init__(self) -> None:
        if self.server_search is not None and self.server_search not in SERVER_TOOLS:
            raise ConfigError(
                f"unknown server-side search {self.server_search!r}; use 'regex' or 'bm25'"
            )

    @property
    def server_side(self) -> bool:
        """Whether the API runs the search (every deferred tool is then sent)."""
        return self.server_search is not None

    def render(self, parts: RequestParts) -> dict[str, Any]:
        """The request payload for ``client.messages.create(**payload, model=...)``."""
        last_plain = max(
            (i for i, s in enumerate(parts.tools) if not s.defer_loading), default=None
        )
        tools: list[dict[str, Any]] = []
        if self.server_search is not None and parts.search_enabled:
            kind, name = SERVER_TOOLS[self.server_search]
            tools.append({"type": kind, "name": name})
        for index, sent in enumerate(parts.tools):
            tools.append(tool_param(sent, cache_control=self.cache_tools and index == last_plain))
        check_tools(tools, server_side=self.server_side and parts.search_enabled)
        messages = render_messages(parts.messages)
        for message in messages:
            for block in blocks(message):
                if block.get("type") == "server_tool_use" and block.get("name") in _SERVER_NAMES:
                    check_server_search_input(str(block["name"]), block.get("input") or {})
        payload: dict[str, Any] = {"tools": tools, "messages": messages}
        if parts.system:
            payload["system"] = parts.system
        return payload
