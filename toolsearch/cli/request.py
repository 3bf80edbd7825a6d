"""``toolsearch request``: print the tools and the announcement of an agent's next request.

Integrators use it to see what the model is shown for a catalogue, deny rules, a subagent
definition and a conversation so far — without calling any model.
"""

from __future__ import annotations

import argparse
from typing import Any

from toolsearch.cli._output import print_json
from toolsearch.cli._scope import (
    CATALOG_HELP,
    add_defer_all_argument,
    add_mode_arguments,
    add_provider_argument,
    add_scope_arguments,
    build_settings,
    catalogue_as_deferred,
    load_scope,
)

__all__ = ["register"]


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "request",
        help="print the tools and announcement of the next request an agent would send",
        description="Assemble the next request for a catalogue (ToolSearch added as a "
        "built-in), deny rules, an optional subagent and an optional history, and print its "
        "tools, announcement and tool-search decision as JSON.",
    )
    parser.add_argument("--catalog", required=True, help=CATALOG_HELP)
    add_scope_arguments(parser)
    add_provider_argument(parser, help="request shape (default: anthropic)")
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
    add_mode_arguments(parser, tokenizer_help="tokenizer.json for exact counts in auto mode")
    parser.add_argument("--model", help="model name (checked against unsupported models)")
    parser.add_argument(
        "--pending", action="append", default=[], metavar="SERVER", help="a server still connecting"
    )
    add_defer_all_argument(parser)
    parser.add_argument(
        "--messages", action="store_true", help="also print the request's rendered messages"
    )
    parser.add_argument("--system", help="system prompt to include")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from toolsearch.agent.assemble import assemble_request
    from toolsearch.agent.messages import load_history
    from toolsearch.agent.providers import get_adapter
    from toolsearch.catalog import load_nonempty_catalog
    from toolsearch.errors import ConfigError

    tools = load_nonempty_catalog(args.catalog)
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
