"""Deny rules: tools removed from the pool before anything else sees them.

A rule is an exact tool name (``mcp__github__delete_repo``, ``WebFetch``) or a whole MCP server
(``mcp__github`` or ``mcp__github__*``). Filtering comes first — permissions → deferral →
searchable set — so a denied tool is never announced, searched, selected or sent.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from toolsearch.errors import ConfigError
from toolsearch.tool import MCP_PREFIX, Tool

__all__ = ["DenyRule", "filter_denied", "is_denied", "parse_rules"]


@dataclass(frozen=True, slots=True)
class DenyRule:
    """One parsed rule: ``server`` set for whole-server rules, else an exact ``name``."""

    text: str
    name: str | None = None
    server: str | None = None

    @classmethod
    def parse(cls, text: str) -> DenyRule:
        """Parse ``text``; anything but a name or ``mcp__server[__*]`` is a :class:`ConfigError`."""
        if not isinstance(text, str) or not text.strip():
            raise ConfigError(f"a permission rule must be a non-empty string, got {text!r}")
        rule = text.strip()
        if rule.startswith(MCP_PREFIX):
            rest = rule[len(MCP_PREFIX) :]
            if rest.endswith("__*"):
                server = rest[: -len("__*")]
                if not server or "*" in server:
                    raise ConfigError(f"invalid rule {text!r}: expected mcp__<server>__*")
                return cls(rule, server=server)
            if "*" in rest:
                raise ConfigError(f"invalid rule {text!r}: '*' is only allowed as mcp__<server>__*")
            if "__" not in rest:
                if not rest:
                    raise ConfigError(f"invalid rule {text!r}: missing the server name")
                return cls(rule, server=rest)
            return cls(rule, name=rule)
        if "*" in rule:
            raise ConfigError(f"invalid rule {text!r}: '*' is only allowed as mcp__<server>__*")
        return cls(rule, name=rule)

    def matches(self, tool: Tool) -> bool:
        """Whether this rule denies ``tool``."""
        if self.server is not None:
            return tool.name.startswith(f"{MCP_PREFIX}{self.server}__")
        return tool.name == self.name


def parse_rules(rules: Iterable[str | DenyRule]) -> list[DenyRule]:
    """Parse every rule, failing on the first invalid one."""
    return [r if isinstance(r, DenyRule) else DenyRule.parse(r) for r in rules]


def is_denied(tool: Tool, rules: Sequence[DenyRule]) -> bool:
    """Whether any rule denies ``tool``."""
    return any(rule.matches(tool) for rule in rules)


def filter_denied(tools: Iterable[Tool], rules: Iterable[str | DenyRule]) -> list[Tool]:
    """``tools`` without the denied ones, order kept."""
    parsed = parse_rules(rules)
    return [tool for tool in tools if not is_denied(tool, parsed)]
