"""The text the embedding backend encodes for a tool (docs/backends.md).

A tool becomes one short text: by default its name split into words, its search hint, its
description, its parameter names and their descriptions, in that order (the combination that
scored best on the public dev sets, see ``lab/retrieval.md``). The most informative
parts come first, so capping the text at ``max_words`` (docs/speed.md) drops parameter detail
before it touches the name or the description.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from toolsearch.errors import ConfigError
from toolsearch.tokenize import service_words
from toolsearch.tool import MCP_PREFIX, Tool

__all__ = [
    "CAMEL_BOUNDARY",
    "DEFAULT_FIELDS",
    "TEXT_FIELDS",
    "TEXT_VERSION",
    "cap_words",
    "check_fields",
    "name_words",
    "param_descriptions_text",
    "server_text",
    "tool_name_text",
    "tool_text",
]

#: Bumped whenever :func:`tool_text` reads a tool differently (2: server names without their
#: packaging words), so rankings stored under a backend's ``params()`` are not reused.
TEXT_VERSION = 2

#: Parts of a tool that :func:`tool_text` can put into its embedded text.
TEXT_FIELDS: tuple[str, ...] = (
    "name",
    "server",
    "hint",
    "description",
    "params",
    "param_descriptions",
)

#: The fields embedded by default (measured, see ``lab/retrieval.md``).
DEFAULT_FIELDS: tuple[str, ...] = (
    "name",
    "hint",
    "description",
    "params",
    "param_descriptions",
)

#: Where camelCase and ABBRWord names split into words.
CAMEL_BOUNDARY = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_NON_WORD = re.compile(r"[\W_]+")


def name_words(name: str) -> str:
    """``mcp__slack__send_message`` → ``slack send message``; ``getUserByID`` → ``get user by id``;
    ``ChaDri.change_drink`` → ``cha dri change drink``."""
    if name.startswith(MCP_PREFIX):
        name = name[len(MCP_PREFIX) :]
    spaced = CAMEL_BOUNDARY.sub(" ", name)
    return " ".join(_NON_WORD.sub(" ", spaced).lower().split())


def server_text(server: str) -> str:
    """A server name as the words of its service (``okta-mcp-server`` → ``okta``; the packaging
    words of :data:`toolsearch.tokenize.GENERIC_SERVER_WORDS` say nothing about a request)."""
    return " ".join(service_words(name_words(server).split()))


def tool_name_text(name: str) -> str:
    """A tool's name as words, its server part (``mcp__<server>__``) read by :func:`server_text`:
    ``mcp__okta-mcp-server__list_users`` → ``okta list users``."""
    if name.startswith(MCP_PREFIX):
        server, sep, own = name[len(MCP_PREFIX) :].partition("__")
        if sep:
            return " ".join(part for part in (server_text(server), name_words(own)) if part)
    return name_words(name)


def _properties(tool: Tool) -> Mapping[str, Any]:
    props = tool.input_schema.get("properties")
    return props if isinstance(props, Mapping) else {}


def param_descriptions_text(tool: Tool) -> str:
    """The descriptions of ``tool``'s top-level parameters, in schema order, joined by spaces
    (the ``param_descriptions`` field; what ``bm25`` counts as description words)."""
    texts = [
        " ".join(str(spec.get("description", "")).split())
        for spec in _properties(tool).values()
        if isinstance(spec, Mapping)
    ]
    return " ".join(text for text in texts if text)


def _field_text(tool: Tool, field: str) -> str:
    if field == "name":
        return tool_name_text(tool.name)
    if field == "server":
        return server_text(tool.server or "")
    if field == "hint":
        return tool.search_hint or ""
    if field == "description":
        return " ".join(tool.description.split())
    if field == "params":
        names = [name_words(str(key)) for key in _properties(tool)]
        return ("parameters: " + ", ".join(names)) if names else ""
    if field == "param_descriptions":
        return param_descriptions_text(tool)
    raise ConfigError(f"unknown embedding text field {field!r}; choose from {TEXT_FIELDS}")


def tool_text(
    tool: Tool, fields: Sequence[str] = DEFAULT_FIELDS, max_words: int | None = None
) -> str:
    """The text embedded for ``tool``: the chosen ``fields`` joined into short sentences.

    ``name``: the tool's own name split into words (without the ``mcp__`` prefix; the server
    part stays, since it is part of the name, without its packaging words: see
    :func:`tool_name_text`); ``server``: the MCP server name (:func:`server_text`);
    ``hint``: the search hint; ``description``: the description;
    ``params``: the parameter names split into words; ``param_descriptions``: each
    parameter's description. Empty fields are skipped. ``max_words`` keeps the first that many
    words (None: all).
    """
    text = _sentences(_field_text(tool, field).strip() for field in fields)
    return cap_words(text, max_words)


def cap_words(text: str, max_words: int | None) -> str:
    """The first ``max_words`` whitespace-separated words of ``text`` (all when None)."""
    if max_words is None:
        return text
    words = text.split()
    return text if len(words) <= max_words else " ".join(words[:max_words])


def _sentences(pieces: Iterable[str]) -> str:
    """Non-empty pieces as sentences: a full stop is added only where one is missing."""
    out = ""
    for piece in pieces:
        if not piece:
            continue
        if out:
            out += " " if out[-1] in ".!?;:" else ". "
        out += piece
    return out


def check_fields(fields: Iterable[str]) -> tuple[str, ...]:
    """``fields`` as a tuple, or a :class:`ConfigError` naming the unknown or missing ones."""
    if isinstance(fields, str):
        fields = [fields]
    chosen = tuple(fields)
    unknown = [f for f in chosen if f not in TEXT_FIELDS]
    if unknown:
        raise ConfigError(
            f"unknown embedding text field(s) {unknown}; choose from {', '.join(TEXT_FIELDS)}"
        )
    if not chosen:
        raise ConfigError(f"embedding needs at least one text field; choose from {TEXT_FIELDS}")
    return chosen
