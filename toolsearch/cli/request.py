"""``toolsearch request``: print the tools and the announcement of an agent's next request.

Integrators use it to see what the model is shown for a catalogue, deny rules, a subagent
definition and a conversation so far — without calling any model.
"""

from __future__ import annotations

import argparse
from typing import Any

from toolsearch.cli._output import print_json

__all__ = ["add_scope_arguments", "build_settings", "load_scope", "register"]


def add_scope_arguments(parser: argparse.ArgumentParser) -> None:
    """``--deny`` (repeatable) and ``--agent``, shared by the agent-facing commands."""
    parser.add_argument(
        "--deny",
        action="append",
        default=[],
        metavar="RULE",
        help="deny a tool (exact name) or a server (mcp__server, mcp__server__*); repeatable",
    )
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


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "request",
        help="print the tools and announcement of the next request an agent would send",
        description="Assemble the next request for a catalogue (ToolSearch added as a "
        "built-in), deny rules, an optional subagent and an optional history, and print its "
        "tools, announcement and tool-search decision as JSON.",
    )
    parser.add_argument("--catalog", required=True, help="JSONL/JSON catalogue or dataset folder")
    add_scope_arguments(parser)
    parser.add_argument(
        "--provider",
        choices=("anthropic", "openai", "plain"),
        default="anthropic",
        help="request shape (default: anthropic)",
    )
    parser.add_argument(
        "--server-search",
        choices=("regex", "bm25"),
        help="anthropic only: the server-side tool search variant instead of ToolSearch",
    )
    parser.add_argument(
        "--history",
        metavar="FILE",
        help="the conversation so far: a JSON array or JSONL of messages",
    )
    parser.add_argument(
        "--announce",
        choices=("delta", "block"),
        default="delta",
        help="announce deferred tools as a persisted delta (default) or a prepended block",
    )
    parser.add_argument("--mode", help="ENABLE_TOOL_SEARCH value (default: config/environment)")
    parser.add_argument("--model", help="model name (checked against unsupported models)")
    parser.add_argument("--context-window", type=int, help="context window for auto mode")
    parser.add_argument("--tokenizer", help="tokenizer.json for exact counts in auto mode")
    parser.add_argument(
        "--pending", action="append", default=[], metavar="SERVER", help="a server still connecting"
    )
    parser.add_argument(
        "--defer-all",
        action="store_true",
        help="treat every catalogue tool as deferred unless it is marked always_load",
    )
    parser.add_argument(
        "--messages", action="store_true", help="also print the request's rendered messages"
    )
    parser.add_argument("--system", help="system prompt to include")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from toolsearch.agent.assemble import assemble_request
    from toolsearch.agent.messages import load_history
    from toolsearch.agent.providers import get_adapter
    from toolsearch.catalog import load_catalog
    from toolsearch.cli.search import catalogue_as_deferred
    from toolsearch.errors import ConfigError

    tools = load_catalog(args.catalog)
    if args.defer_all:
        tools = catalogue_as_deferred(tools)
    if args.server_search and args.provider != "anthropic":
        raise ConfigError("--server-search applies only to --provider anthropic")
    options = {"server_search": args.server_search} if args.server_search else {}
    history = load_history(args.history) if args.history else []
    request = assemble_request(
        tools,
        history,
        provider=get_adapter(args.provider, **options),
        deny=args.deny,
        agent=load_scope(args),
        settings=build_settings(args),
        model=args.model,
        pending_servers=args.pending,
        announce=args.announce,
        system=args.system,
    )
    data = request.to_json()
    if args.messages:
        key = "input" if "input" in request.payload else "messages"
        data["messages"] = request.payload[key]
    print_json(data)
    return 0
