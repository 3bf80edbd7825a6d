"""Subagent definitions and the tools a subagent may use.

A definition is a small file in the style agent tools use — Markdown with YAML front matter
(the body is the agent's prompt), YAML, or TOML::

    ---
    name: triage
    description: Files and labels issues
    tools: ToolSearch, Read, mcp__github     # absent or "*" = everything left
    disallowed_tools: mcp__github__delete_repo
    ---
    You triage incoming bug reports...

``tools`` and ``disallowed_tools`` take a list or a comma-separated string; ``disallowedTools``
is accepted too. Each entry is an exact tool name or a whole MCP server (``mcp__server`` or
``mcp__server__*``), the same syntax as deny rules. Keys this project does not use (``model``,
``color``...) are kept in ``metadata``.

Resolution order (docs/reference-behaviour.md §6): the global denylist, then the allowlist,
then ``disallowed_tools`` — see :func:`toolsearch.agent.pool.resolve_tools`. A subagent whose
tools leave out ToolSearch has search off and gets its tools inline.
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toolsearch.errors import ConfigError, MissingExtraError
from toolsearch.permissions import DenyRule, parse_rules
from toolsearch.tool import Tool

__all__ = [
    "AgentDefinition",
    "load_agent",
    "parse_agent",
]

_DISALLOWED_KEYS = ("disallowed_tools", "disallowedTools", "disallowed-tools")
_PROMPT_KEYS = ("prompt", "system_prompt", "systemPrompt")


@dataclass(frozen=True, slots=True)
class AgentDefinition:
    """A subagent: its name, its prompt and which tools it may use.

    ``tools`` is None for "every tool left after the denylist" (absent or ``*``); otherwise
    the allowlist rules. ``disallowed_tools`` are removed after the allowlist.
    """

    name: str
    description: str = ""
    tools: tuple[DenyRule, ...] | None = None
    disallowed_tools: tuple[DenyRule, ...] = ()
    prompt: str = ""
    model: str | None = None
    source: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict, compare=False)

    def allows(self, tool: Tool) -> bool:
        """Whether this agent's allowlist and disallowed list keep ``tool``."""
        if self.tools is not None and not any(rule.matches(tool) for rule in self.tools):
            return False
        return not any(rule.matches(tool) for rule in self.disallowed_tools)

    def unknown_entries(self, pool: Sequence[Tool]) -> list[str]:
        """Allowlist entries that match no tool of ``pool`` (usually a server not connected)."""
        if self.tools is None:
            return []
        return [rule.text for rule in self.tools if not any(rule.matches(t) for t in pool)]

    def to_json(self) -> dict[str, Any]:
        """JSON-ready form (rules as the text they were written as)."""
        return {
            "name": self.name,
            "description": self.description,
            "tools": None if self.tools is None else [r.text for r in self.tools],
            "disallowed_tools": [r.text for r in self.disallowed_tools],
            "model": self.model,
            "source": self.source,
        }


def _rule_list(value: Any, key: str, where: str) -> list[str]:
    if isinstance(value, str):
        items = value.split(",")
    elif isinstance(value, list | tuple):
        if not all(isinstance(v, str) for v in value):
            raise ConfigError(f"{where}: '{key}' entries must be strings, got {value!r}")
        items = list(value)
    else:
        raise ConfigError(
            f"{where}: '{key}' must be a list or a comma-separated string, got {value!r}"
        )
    return [item.strip() for item in items if item.strip()]


def _rules(texts: Iterable[str], key: str, where: str) -> tuple[DenyRule, ...]:
    try:
        return tuple(parse_rules(texts))
    except ConfigError as exc:
        raise ConfigError(f"{where}: '{key}': {exc}") from exc


def parse_agent(
    data: Mapping[str, Any], *, body: str = "", source: str | None = None
) -> AgentDefinition:
    """Build an :class:`AgentDefinition` from parsed front matter / YAML / TOML data."""
    where = source or "agent definition"
    if not isinstance(data, Mapping):
        raise ConfigError(f"{where}: expected a table of settings, got {type(data).__name__}")
    name = data.get("name")
    if not isinstance(name, str) or not name.strip():
        raise ConfigError(f"{where}: 'name' is required and must be a non-empty string")
    description = data.get("description", "")
    if not isinstance(description, str):
        raise ConfigError(f"{where}: 'description' must be a string, got {description!r}")
    tools: tuple[DenyRule, ...] | None = None
    if data.get("tools") is not None:
        entries = _rule_list(data["tools"], "tools", where)
        if "*" in entries:
            if len(entries) > 1:
                raise ConfigError(f"{where}: 'tools' mixes '*' with other entries: {entries!r}")
        else:
            tools = _rules(entries, "tools", where)
    disallowed: tuple[DenyRule, ...] = ()
    present = [k for k in _DISALLOWED_KEYS if k in data]
    if len(present) > 1:
        raise ConfigError(f"{where}: give only one of {', '.join(present)}")
    if present and data[present[0]] is not None:
        disallowed = _rules(_rule_list(data[present[0]], present[0], where), present[0], where)
    prompt = body.strip()
    for key in _PROMPT_KEYS:
        if key in data:
            if not isinstance(data[key], str):
                raise ConfigError(f"{where}: '{key}' must be a string")
            if prompt:
                raise ConfigError(f"{where}: the prompt is given both as '{key}' and as the body")
            prompt = data[key].strip()
    model = data.get("model")
    if model is not None and not isinstance(model, str):
        raise ConfigError(f"{where}: 'model' must be a string, got {model!r}")
    known = {"name", "description", "tools", "model", *_DISALLOWED_KEYS, *_PROMPT_KEYS}
    extra = {k: v for k, v in data.items() if k not in known}
    return AgentDefinition(
        name=name.strip(),
        description=description,
        tools=tools,
        disallowed_tools=disallowed,
        prompt=prompt,
        model=model,
        source=source,
        metadata=extra,
    )


def _yaml(text: str, where: str) -> Any:
    try:
        import yaml
    except ImportError as exc:  # pragma: no cover - pyyaml ships with the agents extra
        raise MissingExtraError("agent definitions in YAML", "agents", ["pyyaml"]) from exc
    try:
        return yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"{where}: invalid YAML: {exc}") from exc


def _front_matter(text: str, where: str) -> tuple[str, str]:
    lines = text.lstrip("\ufeff").splitlines()
    if not lines or lines[0].strip() != "---":
        raise ConfigError(f"{where}: a Markdown agent file must start with a '---' front matter")
    for end in range(1, len(lines)):
        if lines[end].strip() == "---":
            return "\n".join(lines[1:end]), "\n".join(lines[end + 1 :])
    raise ConfigError(f"{where}: the front matter has no closing '---'")


def load_agent(path: str | Path) -> AgentDefinition:
    """Read an agent definition: ``.md`` (front matter), ``.yaml`` / ``.yml`` or ``.toml``."""
    file = Path(path)
    where = str(file)
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{where}: cannot read agent definition: {exc}") from exc
    suffix = file.suffix.lower()
    if suffix in {".md", ".markdown"}:
        header, body = _front_matter(text, where)
        return parse_agent(_yaml(header, where), body=body, source=where)
    if suffix in {".yaml", ".yml"}:
        return parse_agent(_yaml(text, where), source=where)
    if suffix == ".toml":
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{where}: invalid TOML: {exc}") from exc
        return parse_agent(data, source=where)
    raise ConfigError(
        f"{where}: unknown agent file type {suffix or '(none)'!r}; use .md, .yaml, .yml or .toml"
    )
