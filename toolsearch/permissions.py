"""Deny rules: tools removed from the pool before anything else sees them.

A rule is an exact tool name (``mcp__github__delete_repo``, ``WebFetch``) or a whole MCP server
(``mcp__github`` or ``mcp__github__*``). Filtering comes first — permissions → deferral →
searchable set — so a denied tool is never announced, searched, selected or sent.

Rules match the way lookup finds tools (docs/security.md, "Permission rules"): rule and tool
name both go through :func:`name_key` — lower case (exact-name and prefix search ignore case),
Unicode folding (format characters such as the zero-width space U+200B dropped, then NFKC +
casefold: ``Tas\u212a`` with a Kelvin sign is ``task``, ``Task\u200b`` is ``task``), then the MCP
name normalisation every ``mcp__<server>__<tool>`` name went through. So
``mcp__My Files``, ``mcp__my.fs`` and ``mcp__FILES__read_file`` deny what a user means by them.
A server name may itself contain ``__``: ``mcp__a__b`` denies the tool named ``mcp__a__b`` *and*
every tool of a server called ``a__b``. Over-denying an ambiguous rule is the safe direction.
A permitted tool keeps no alias that a rule denies, so an alias cannot stand in for a denied tool.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from toolsearch.errors import ConfigError
from toolsearch.tool import (
    MCP_PREFIX,
    Tool,
    drop_format_characters,
    normalize_name_part,
    server_of_name,
    shorten_tool_name,
)

__all__ = [
    "DenyRule",
    "filter_denied",
    "is_denied",
    "name_key",
    "parse_rules",
    "unmatched_rules",
]

_STAR_ERROR = "'*' is only allowed as mcp__<server>__*"


def name_key(text: str) -> str:
    """The form in which tool names, server names and rules are compared: format characters
    (Unicode category Cf: zero-width spaces and joiners, bidi controls, soft hyphens) dropped,
    since they are invisible and a name with one reads as the name without it; lower-cased as
    exact-name lookup compares names, folded (NFKC, case folding, NFKC again) so that
    look-alikes such as the Kelvin sign or fullwidth letters become the letters they imitate,
    then MCP-normalised (:func:`~toolsearch.tool.normalize_name_part`).

    Folding what lookup lower-cases means any two names lookup treats as one name have one key,
    so a rule denies everything an exact-name or prefix query could find for it."""
    visible = drop_format_characters(text)
    folded = unicodedata.normalize(
        "NFKC", unicodedata.normalize("NFKC", visible.lower()).casefold()
    )
    return normalize_name_part(folded)


@dataclass(frozen=True, slots=True)
class DenyRule:
    """One parsed rule. ``name`` is the key of an exact tool name, ``server`` the key of a whole
    server; ``mcp__x`` sets both (it is the tool ``mcp__x`` and the server ``x``)."""

    text: str
    name: str | None = None
    server: str | None = None
    #: For an ``mcp__`` name over 64 characters: the key of the name it is listed under.
    short_name: str | None = None

    @classmethod
    def parse(cls, text: str) -> DenyRule:
        """Parse ``text``; anything but a name or ``mcp__server[__*]`` is a :class:`ConfigError`."""
        if not isinstance(text, str) or not text.strip():
            raise ConfigError(f"a permission rule must be a non-empty string, got {text!r}")
        rule = text.strip()
        if not rule.lower().startswith(MCP_PREFIX):
            if "*" in rule:
                raise ConfigError(f"invalid rule {text!r}: {_STAR_ERROR}")
            return cls(rule, name=name_key(rule))
        rest = rule[len(MCP_PREFIX) :]
        wildcard = rest.endswith("__*")
        server = rest[: -len("__*")] if wildcard else rest
        if "*" in server:
            raise ConfigError(f"invalid rule {text!r}: {_STAR_ERROR}")
        if not server.strip("_"):
            raise ConfigError(f"invalid rule {text!r}: missing the server name")
        if wildcard:
            return cls(rule, server=name_key(server))
        short = name_key(shorten_tool_name(normalize_name_part(drop_format_characters(rule))))
        key = name_key(rule)
        return cls(
            rule, name=key, server=name_key(server), short_name=short if short != key else None
        )

    def matches(self, tool: Tool) -> bool:
        """Whether this rule denies ``tool``."""
        return self.matches_name(tool.name, tool.server)

    def matches_name(self, name: str, server: str | None = None) -> bool:
        """Whether this rule denies a tool called ``name`` of ``server`` (derived from the
        name when not given)."""
        key = name_key(name)
        if self.name is not None and key in (self.name, self.short_name):
            return True
        if self.server is None:
            return False
        derived = server_of_name(name)
        if server is not None and server != derived:
            return name_key(server) == self.server
        # The server part of an mcp__ name is ambiguous when server names contain "__" or end
        # in "_": mcp__a__b__x may be tool b__x of server a or tool x of server a__b.
        return (derived is not None and name_key(derived) == self.server) or key.startswith(
            f"{MCP_PREFIX}{self.server}__"
        )

    def could_match_server(self, server: str) -> bool:
        """Whether this rule can deny tools of a server called ``server`` (for start-up checks,
        before the server has listed its tools)."""
        key = name_key(server)
        prefix = f"{MCP_PREFIX}{key}__"
        return (
            self.server == key
            or (self.name is not None and self.name.startswith(prefix))
            or (self.server is not None and self.server.startswith(f"{key}__"))
        )


def parse_rules(rules: Iterable[str | DenyRule]) -> list[DenyRule]:
    """Parse every rule, failing on the first invalid one."""
    return [r if isinstance(r, DenyRule) else DenyRule.parse(r) for r in rules]


def is_denied(tool: Tool, rules: Sequence[DenyRule]) -> bool:
    """Whether any rule denies ``tool``."""
    return any(rule.matches(tool) for rule in rules)


def filter_denied(tools: Iterable[Tool], rules: Iterable[str | DenyRule]) -> list[Tool]:
    """``tools`` without the denied ones, order kept; a kept tool loses every alias a rule
    denies, so it cannot be selected under a denied tool's name."""
    parsed = parse_rules(rules)
    if not parsed:
        return list(tools)
    kept: list[Tool] = []
    for tool in tools:
        if is_denied(tool, parsed):
            continue
        aliases = tuple(a for a in tool.aliases if not any(r.matches_name(a) for r in parsed))
        kept.append(tool if aliases == tool.aliases else replace(tool, aliases=aliases))
    return kept


def unmatched_rules(
    rules: Iterable[DenyRule], *, tools: Iterable[Tool] = (), servers: Iterable[str] = ()
) -> list[DenyRule]:
    """The rules that match none of ``tools`` and no tool ``servers`` could offer: usually a
    typo, worth a warning at start-up."""
    tool_list, server_list = list(tools), list(servers)
    return [
        rule
        for rule in rules
        if not any(rule.matches(t) for t in tool_list)
        and not any(rule.could_match_server(s) for s in server_list)
    ]
