"""What the agent-facing commands (``search``, ``request``, ``demo``, ``serve``) share: the
tool scope (``--deny``, ``--agent``, deferral of a plain catalogue), the ranking backend, the
request shape (``--provider``) and the mode settings (``--mode`` and its companions), each
declared once so the commands cannot drift apart."""

from __future__ import annotations

import argparse
from dataclasses import replace
from typing import Any

from toolsearch.config import ENABLE_VALUES, is_enable_value
from toolsearch.errors import ConfigError
from toolsearch.tool import TOOL_SEARCH_NAME, Tool

__all__ = [
    "CATALOG_HELP",
    "MODE_VALUES",
    "add_backend_argument",
    "add_defer_all_argument",
    "add_deny_argument",
    "add_mode_arguments",
    "add_provider_argument",
    "add_scope_arguments",
    "build_settings",
    "catalogue_as_deferred",
    "load_scope",
    "mode_value",
    "positive_int",
    "scoped_tools",
]

#: What ``--catalog`` takes, in every command's help.
CATALOG_HELP = (
    "JSONL/JSON catalogue, dataset folder, or the name of a dataset installed with toolsearch "
    "(starter, mcp-workbench); a path that exists wins over a name"
)

#: The ``ENABLE_TOOL_SEARCH`` values ``--mode`` accepts (case ignored).
MODE_VALUES = ENABLE_VALUES


def mode_value(text: str) -> str:
    """``--mode``'s argparse type: a recognised ``ENABLE_TOOL_SEARCH`` value, else an error
    listing the valid ones (the rule config files follow, :func:`is_enable_value`)."""
    if is_enable_value(text):
        return text
    raise argparse.ArgumentTypeError(
        f"invalid mode {text!r}; valid: {', '.join(MODE_VALUES)} (N a whole percent 0-100)"
    )


def positive_int(text: str) -> int:
    """An argparse type: a whole number of at least 1, else an error naming the value."""
    stripped = text.strip()
    if stripped.isdigit() and int(stripped) >= 1:
        return int(stripped)
    raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, got {text!r}")


def add_mode_arguments(parser: argparse.ArgumentParser, *, tokenizer_help: str) -> None:
    """``--mode``, ``--context-window`` and ``--tokenizer`` (read by :func:`build_settings`)."""
    parser.add_argument(
        "--mode",
        type=mode_value,
        help=f"ENABLE_TOOL_SEARCH value: {', '.join(MODE_VALUES)} (default: config/environment)",
    )
    parser.add_argument(
        "--context-window", type=positive_int, help="context window for auto mode (tokens)"
    )
    parser.add_argument("--tokenizer", help=tokenizer_help)


def add_provider_argument(parser: argparse.ArgumentParser, *, help: str) -> None:
    """``--provider``: the request shape."""
    parser.add_argument(
        "--provider", choices=("anthropic", "openai", "plain"), default="anthropic", help=help
    )


def add_backend_argument(parser: argparse.ArgumentParser) -> None:
    """``--backend``: the ranking backend."""
    parser.add_argument("--backend", help="ranking backend (default: configured or measured best)")


def add_defer_all_argument(parser: argparse.ArgumentParser) -> None:
    """``--defer-all`` (applied by :func:`catalogue_as_deferred`)."""
    parser.add_argument(
        "--defer-all",
        action="store_true",
        help="also defer the catalogue's tools marked should_defer: false (always_load tools "
        "stay loaded)",
    )


def add_deny_argument(parser: argparse.ArgumentParser) -> None:
    """``--deny`` (repeatable)."""
    parser.add_argument(
        "--deny",
        action="append",
        default=[],
        metavar="RULE",
        help="deny a tool (exact name) or a server (mcp__server, mcp__server__*); repeatable",
    )


def add_scope_arguments(parser: argparse.ArgumentParser) -> None:
    """``--deny`` (repeatable) and ``--agent``, shared by the agent-facing commands."""
    add_deny_argument(parser)
    parser.add_argument(
        "--agent",
        metavar="FILE",
        help="a subagent definition (.md front matter, .yaml or .toml) scoping the tools",
    )


def load_scope(args: argparse.Namespace) -> Any:
    """The agent definition named by ``--agent``, or None."""
    if not getattr(args, "agent", None):
        return None
    from toolsearch.agent.subagents import load_agent

    return load_agent(args.agent)


def build_settings(args: argparse.Namespace) -> Any:
    """Mode settings from config and environment, with ``--mode``, ``--context-window`` and
    ``--tokenizer`` on top."""
    from toolsearch.agent.mode import ModeSettings

    return ModeSettings.load(
        enable_tool_search=getattr(args, "mode", None),
        context_window=getattr(args, "context_window", None),
        tokenizer=getattr(args, "tokenizer", None),
    )


def catalogue_as_deferred(tools: list[Tool]) -> list[Tool]:
    """Every tool counts as deferred unless it is ``always_load``, even one whose record says
    ``should_defer: false`` (``--defer-all``)."""
    return [
        t if t.always_load or t.mcp or t.should_defer else replace(t, should_defer=True)
        for t in tools
    ]


def scoped_tools(tools: list[Tool], args: argparse.Namespace) -> list[Tool]:
    """The tools ``--deny`` and ``--agent`` leave searchable (ToolSearch itself left out).

    Raises :class:`ConfigError` when they take ToolSearch away: search is then off and the
    agent's tools would be sent inline instead.
    """
    deny = getattr(args, "deny", None) or []
    if not deny and not getattr(args, "agent", None):
        return tools
    from toolsearch.agent.pool import resolve_tools

    agent = load_scope(args)
    resolved = resolve_tools(tools, deny=deny, agent=agent)
    if not resolved.has_tool_search:
        who = f"agent {agent.name!r}" if agent is not None else "these deny rules"
        raise ConfigError(
            f"{TOOL_SEARCH_NAME} is not available to {who}: tool search is off and its "
            f"{len(resolved.tools)} tools are sent inline (see 'toolsearch request')"
        )
    return [t for t in resolved.tools if t.name != TOOL_SEARCH_NAME]
