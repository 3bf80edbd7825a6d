"""The tool pool an agent works with: permissions first, then subagent scoping
(docs/reference-behaviour.md §6).

Order: the runtime's tools (ToolSearch added as a built-in unless the caller brings its own) →
global deny rules → the subagent's allowlist → its ``disallowed_tools`` → pool order. Everything
downstream — the mode decision, announcements, the ToolSearch engine, request tools, tool
execution — sees only this pool, so a tool removed here has no path back.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from toolsearch.agent.subagents import AgentDefinition
from toolsearch.engine import DEFAULT_MAX_RESULTS_CAP, tool_search_tool
from toolsearch.errors import ConfigError
from toolsearch.permissions import DenyRule, filter_denied, is_denied, parse_rules
from toolsearch.tool import MAX_TOOL_NAME, TOOL_SEARCH_NAME, Tool, is_deferred, pool_order

__all__ = ["ResolvedTools", "resolve_tools"]


@dataclass(frozen=True, slots=True)
class ResolvedTools:
    """The pool after permissions and scoping, and what was taken out (for reports).

    ``denied`` were removed by the global deny rules, ``excluded`` by the subagent's lists;
    ``unknown`` are allowlist entries that matched nothing.
    """

    tools: tuple[Tool, ...]
    denied: tuple[str, ...] = ()
    excluded: tuple[str, ...] = ()
    unknown: tuple[str, ...] = ()
    agent: AgentDefinition | None = None

    @property
    def names(self) -> frozenset[str]:
        """Names of the tools in the pool."""
        return frozenset(tool.name for tool in self.tools)

    @property
    def has_tool_search(self) -> bool:
        """Whether ToolSearch survived permissions and scoping."""
        return any(tool.name == TOOL_SEARCH_NAME for tool in self.tools)

    @property
    def deferred(self) -> tuple[Tool, ...]:
        """The deferred tools of the pool, in pool order."""
        return tuple(tool for tool in self.tools if is_deferred(tool))

    def get(self, name: str) -> Tool | None:
        """The pool's tool called ``name`` (exact), or None."""
        for tool in self.tools:
            if tool.name == name:
                return tool
        return None


def resolve_tools(
    tools: Iterable[Tool],
    *,
    deny: Iterable[str | DenyRule] = (),
    agent: AgentDefinition | None = None,
    include_tool_search: bool = True,
    max_results_cap: int = DEFAULT_MAX_RESULTS_CAP,
) -> ResolvedTools:
    """Apply deny rules, then ``agent``'s allowlist and disallowed list, to ``tools``.

    ``include_tool_search`` adds the built-in ToolSearch tool when ``tools`` has none, as an
    agent runtime does; deny rules and allowlists can still take it out.
    """
    rules = parse_rules(deny)
    base = list(tools)
    _refuse_long_names(base)
    if include_tool_search and not any(t.name == TOOL_SEARCH_NAME for t in base):
        base.append(tool_search_tool(max_results_cap))
    ordered = pool_order(base)
    kept = filter_denied(ordered, rules)
    denied = tuple(tool.name for tool in ordered if is_denied(tool, rules))
    if agent is None:
        return ResolvedTools(tuple(kept), denied=denied)
    scoped = [tool for tool in kept if agent.allows(tool)]
    excluded = tuple(tool.name for tool in kept if not agent.allows(tool))
    return ResolvedTools(
        tuple(scoped),
        denied=denied,
        excluded=excluded,
        unknown=tuple(agent.unknown_entries(kept)),
        agent=agent,
    )


def _refuse_long_names(tools: list[Tool]) -> None:
    """A name over 64 characters is refused here, at load: model APIs reject it, and a
    ``tool_reference`` to it would fail every later request of the conversation. (An MCP
    hub lists such tools under a shortened name: :func:`~toolsearch.tool.shorten_tool_name`.)"""
    long = [tool.name for tool in tools if len(tool.name) > MAX_TOOL_NAME]
    if long:
        shown = ", ".join(repr(name) for name in long[:3])
        more = f" and {len(long) - 3} more" if len(long) > 3 else ""
        raise ConfigError(
            f"tool names must be at most {MAX_TOOL_NAME} characters, which model APIs accept; "
            f"{shown}{more} {'is' if len(long) == 1 else 'are'} longer: rename "
            f"{'it' if len(long) == 1 else 'them'} (e.g. "
            f"toolsearch.tool.shorten_tool_name(name))"
        )
