"""The tool model, MCP name normalisation, the deferral rule and the tool-pool order.

A :class:`Tool` is what an agent could call: name, description, JSON-Schema input and the
hints that decide whether its definition is sent up front or deferred until searched for.
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "MAX_JSON_DEPTH",
    "MAX_TOOL_NAME",
    "MCP_PREFIX",
    "SURROGATE_HINT",
    "TOOL_SEARCH_NAME",
    "Tool",
    "comes_from_mcp",
    "drop_format_characters",
    "is_deferred",
    "json_depth",
    "lone_surrogate",
    "mcp_tool_name",
    "normalize_name_part",
    "pool_order",
    "pool_sort_key",
    "server_of_name",
    "shorten_tool_name",
]

MCP_PREFIX = "mcp__"
TOOL_SEARCH_NAME = "ToolSearch"

_INVALID_NAME_CHARS = re.compile(r"[^A-Za-z0-9_-]")
#: Deepest nesting of objects and arrays in a tool's input schema: JSON Schemas in the wild stay
#: far below it, and deeper ones cannot be serialised or sent to a model safely.
MAX_JSON_DEPTH = 100


def json_depth(value: Any, limit: int = MAX_JSON_DEPTH) -> int:
    """How deeply objects and arrays nest in ``value``, counted iteratively (no recursion
    limit); stops counting once past ``limit``."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, Mapping):
            children: Iterable[Any] = item.values()
        elif isinstance(item, list | tuple):
            children = item
        else:
            continue
        level += 1
        deepest = max(deepest, level)
        if deepest > limit:
            return deepest
        stack.extend((child, level) for child in children)
    return deepest


_SURROGATE = re.compile("[\ud800-\udfff]")


def _children(item: Any) -> Iterable[tuple[str, Any]]:
    """``(step, child)`` of an object's values (``.key``) or an array's items (``[i]``)."""
    if isinstance(item, Mapping):
        return ((f".{key}", child) for key, child in item.items())
    if isinstance(item, list | tuple):
        return ((f"[{index}]", child) for index, child in enumerate(item))
    return ()


def _has_surrogate(value: Any) -> bool:
    """Whether a lone surrogate is anywhere in ``value``: every string of JSON-like data
    gathered in one pass and searched once (the check runs for every tool made)."""
    strings: list[str] = []
    stack = [value]
    visited = 0
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is str:
            strings.append(item)
        elif kind is dict or isinstance(item, Mapping):
            strings.extend(key for key in item if type(key) is str)
            stack.extend(item.values())
        elif kind is list or kind is tuple:
            stack.extend(item)
        elif isinstance(item, str):
            strings.append(str(item))
        visited += 1
        if visited > _MAX_NODES:  # a cycle (no tool data is this large)
            return _walk_has_surrogate(value)
    return _SURROGATE.search("".join(strings)) is not None


_MAX_NODES = 10_000_000


def _walk_has_surrogate(value: Any) -> bool:
    seen: set[int] = set()
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if _SURROGATE.search(item):
                return True
        elif isinstance(item, Mapping | list | tuple) and id(item) not in seen:
            seen.add(id(item))
            stack.extend(item.keys() if isinstance(item, Mapping) else ())
            stack.extend(item.values() if isinstance(item, Mapping) else item)
    return False


def lone_surrogate(value: Any, path: str = "") -> tuple[str, str] | None:
    """``(path, what)`` of the first lone surrogate in ``value`` (a string or JSON-like data),
    e.g. ``("input_schema.properties.p", "a lone surrogate U+DFFF at character 13")``, or None.
    Such a character (a JSON escape such as ``\\udfff`` decodes to one) is not Unicode text:
    nothing can encode it as UTF-8."""
    if not _has_surrogate(value):  # the common case: one pass, no paths built
        return None
    stack: list[tuple[str, Any]] = [(path, value)]
    while stack:
        where, item = stack.pop()
        text = item if isinstance(item, str) else None
        if isinstance(item, Mapping):
            text = next((k for k in item if isinstance(k, str) and _SURROGATE.search(k)), None)
        found = _SURROGATE.search(text) if text is not None else None
        if found is not None:
            what = "a key with a lone surrogate" if text is not item else "a lone surrogate"
            return where, f"{what} U+{ord(found.group()):04X} at character {found.start()}"
        stack.extend((where + step, child) for step, child in reversed(list(_children(item))))
    return None


#: Why a lone surrogate is refused, for error messages.
SURROGATE_HINT = "not Unicode text (often a broken \\u escape); fix the text"


def _empty_schema() -> Mapping[str, Any]:
    return {"type": "object", "properties": {}}


def drop_format_characters(text: str) -> str:
    """``text`` without Unicode format characters (category Cf: zero-width spaces and joiners,
    bidi controls, soft hyphens), which render as nothing: a name holding one reads as the name
    without it, so names are compared, and MCP names made, without them."""
    if text.isascii():
        return text
    return "".join(ch for ch in text if unicodedata.category(ch) != "Cf")


def normalize_name_part(text: str) -> str:
    """Drop format characters (:func:`drop_format_characters`), then replace every character
    outside ``[A-Za-z0-9_-]`` with ``_``, as MCP clients do."""
    return _INVALID_NAME_CHARS.sub("_", drop_format_characters(text))


def mcp_tool_name(server: str, tool: str) -> str:
    """The agent-facing name of an MCP server's tool: ``mcp__<server>__<tool>``, shortened
    to :data:`MAX_TOOL_NAME` characters when longer (:func:`shorten_tool_name`)."""
    return shorten_tool_name(
        f"{MCP_PREFIX}{normalize_name_part(server)}__{normalize_name_part(tool)}"
    )


#: The longest tool name model APIs accept (Anthropic and OpenAI: ``^[a-zA-Z0-9_-]{1,64}$``).
MAX_TOOL_NAME = 64
_DIGEST_CHARS = 8


def shorten_tool_name(name: str) -> str:
    """``name`` itself when at most :data:`MAX_TOOL_NAME` characters; else its first 55
    characters, ``_`` and 8 hex digits of a hash of the whole name (lower-cased and
    MCP-normalised, so a deny rule written in another case maps to the same name)."""
    if len(name) <= MAX_TOOL_NAME:
        return name
    folded = normalize_name_part(name.lower())
    digest = hashlib.sha256(folded.encode("utf-8")).hexdigest()[:_DIGEST_CHARS]
    return f"{name[: MAX_TOOL_NAME - _DIGEST_CHARS - 1]}_{digest}"


def server_of_name(name: str) -> str | None:
    """The server part of an ``mcp__<server>__<tool>`` name (up to the first ``__``), if any."""
    if not name.startswith(MCP_PREFIX):
        return None
    server = name[len(MCP_PREFIX) :].split("__", 1)[0]
    return server or None


def comes_from_mcp(name: str, server: str | None, is_mcp: bool | None = None) -> bool:
    """Whether a tool is an MCP tool: ``is_mcp`` when given, else an ``mcp__`` name or a
    server."""
    if is_mcp is not None:
        return is_mcp
    return name.startswith(MCP_PREFIX) or server is not None


@dataclass(frozen=True, slots=True)
class Tool:
    """One callable tool.

    ``server`` and ``is_mcp`` are derived from the ``mcp__<server>__<tool>`` name unless given.
    ``metadata`` keeps any extra fields a catalogue carried, untouched.
    """

    name: str
    description: str = ""
    input_schema: Mapping[str, Any] = field(default_factory=_empty_schema, hash=False)
    search_hint: str | None = None
    always_load: bool = False
    should_defer: bool = False
    aliases: tuple[str, ...] = ()
    server: str | None = None
    is_mcp: bool | None = None  # derived in __post_init__ unless given
    metadata: Mapping[str, Any] = field(default_factory=dict, hash=False, compare=False)
    _content_hash: str | None = field(
        default=None, init=False, repr=False, hash=False, compare=False
    )

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise ValueError(f"tool name must be a non-empty string, got {self.name!r}")
        if any(ch.isspace() for ch in self.name):
            raise ValueError(f"tool name {self.name!r} contains whitespace")
        if not isinstance(self.input_schema, Mapping):
            raise ValueError(
                f"tool {self.name!r}: input_schema must be a JSON object, "
                f"got {type(self.input_schema).__name__}"
            )
        if json_depth(self.input_schema) > MAX_JSON_DEPTH:
            raise ValueError(
                f"tool {self.name!r}: input_schema nests deeper than {MAX_JSON_DEPTH} levels"
            )
        self._refuse_surrogates()
        hint = self.search_hint
        if hint is not None:
            hint = " ".join(hint.split()) or None
            object.__setattr__(self, "search_hint", hint)
        object.__setattr__(self, "aliases", tuple(self.aliases))
        server = self.server if self.server is not None else server_of_name(self.name)
        object.__setattr__(self, "server", server)
        if self.is_mcp is None:
            object.__setattr__(self, "is_mcp", comes_from_mcp(self.name, self.server))

    def _refuse_surrogates(self) -> None:
        """A lone surrogate anywhere is a ``ValueError``: hashing, indexing or printing the tool
        would fail later, in every backend (docs/security.md, "Files and catalogues")."""
        fields = {
            "name": self.name,
            "description": self.description,
            "search_hint": self.search_hint,
            "aliases": self.aliases,
            "server": self.server,
            "input_schema": self.input_schema,
            "metadata": self.metadata,
        }
        if not _has_surrogate(list(fields.values())):
            return
        for field_name, value in fields.items():
            found = lone_surrogate(value, field_name)
            if found is not None:
                where, what = found
                raise ValueError(f"tool {self.name!r}: {where} has {what}, {SURROGATE_HINT}")

    @property
    def mcp(self) -> bool:
        """Whether this tool comes from an MCP server (``is_mcp`` with its type settled)."""
        return bool(self.is_mcp)

    def content_hash(self) -> str:
        """A stable hash of everything a search index reads; unchanged tools keep it. Computed
        once per tool object (the tool is immutable)."""
        if self._content_hash is not None:
            return self._content_hash
        payload = {
            "name": self.name,
            "description": self.description,
            "input_schema": self.input_schema,
            "search_hint": self.search_hint,
            "aliases": list(self.aliases),
            "server": self.server,
        }
        blob = json.dumps(payload, sort_keys=True, ensure_ascii=False, default=_json_default)
        digest = hashlib.sha256(blob.encode("utf-8")).hexdigest()
        object.__setattr__(self, "_content_hash", digest)
        return digest

    def definition(self) -> dict[str, Any]:
        """The tool as a plain provider-neutral definition (name, description, input_schema)."""
        return {
            "name": self.name,
            "description": self.description,
            "input_schema": _plain(self.input_schema),
        }

    def to_dict(self) -> dict[str, Any]:
        """Every field as JSON-ready data, the inverse of :func:`toolsearch.catalog.tool_from_dict`.

        A plain tool that is not deferred says ``should_defer: false``, as a catalogue record
        of a plain tool without the field is deferred (docs/getting-started.md)."""
        data: dict[str, Any] = dict(_plain(self.metadata))
        data.update(self.definition())
        if self.search_hint is not None:
            data["search_hint"] = self.search_hint
        if self.always_load:
            data["always_load"] = True
        if self.should_defer:
            data["should_defer"] = True
        elif not (self.mcp or self.always_load):
            data["should_defer"] = False
        if self.aliases:
            data["aliases"] = list(self.aliases)
        if self.server is not None:
            data["server"] = self.server
        return data


def _json_default(value: object) -> object:
    if isinstance(value, Mapping):
        return dict(value)
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def is_deferred(tool: Tool) -> bool:
    """Whether a tool's definition waits for ToolSearch (first rule that applies wins).

    ``always_load`` → no; MCP tool → yes; the ToolSearch tool itself → never;
    otherwise the tool's own ``should_defer``.
    """
    if tool.always_load:
        return False
    if tool.mcp:
        return True
    if tool.name == TOOL_SEARCH_NAME:
        return False
    return tool.should_defer


def pool_sort_key(tool: Tool) -> tuple[bool, str]:
    """Position of a tool in the pool: non-MCP tools by name, then MCP tools by name."""
    return (tool.mcp, tool.name)


def pool_order(tools: Iterable[Tool]) -> list[Tool]:
    """The tool pool: deduplicated by name (a built-in wins a clash with an MCP tool, else the
    first seen), then ordered by :func:`pool_sort_key`. This order breaks every ranking tie."""
    by_name: dict[str, Tool] = {}
    for tool in tools:
        kept = by_name.get(tool.name)
        if kept is None or (kept.mcp and not tool.mcp):
            by_name[tool.name] = tool
    return sorted(by_name.values(), key=pool_sort_key)
