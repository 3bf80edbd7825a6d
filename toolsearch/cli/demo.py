"""``toolsearch demo``: the reference loop with a scripted model over a real catalogue.

For each task the scripted model searches with ToolSearch, calls the best tool it loaded (with
arguments made up from the tool's schema) and answers. Every turn prints what was sent — the
tools, the tokens of the request with tool search and of the same request without it (every
tool inline), both measured with :mod:`toolsearch.tokens` — and what was discovered. Nothing is
asserted: the saving is whatever the counts say.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from toolsearch.cli._output import console, print_json
from toolsearch.cli._scope import (
    CATALOG_HELP,
    add_backend_argument,
    add_defer_all_argument,
    add_mode_arguments,
    add_provider_argument,
    add_scope_arguments,
    build_settings,
    catalogue_as_deferred,
    load_scope,
)

if TYPE_CHECKING:
    from toolsearch.agent.assemble import NextRequest
    from toolsearch.agent.clients import Step
    from toolsearch.agent.loop import AgentLoop, Turn
    from toolsearch.agent.messages import Message
    from toolsearch.agent.mode import ModeSettings

__all__ = ["DEFAULT_TASKS", "default_catalog", "example_arguments", "register", "run_demo"]

#: (user task, ToolSearch query) pairs the scripted model works through.
DEFAULT_TASKS: tuple[tuple[str, str], ...] = (
    ("Email the team that the release is out.", "send email message"),
    ("How many orders were placed yesterday? Ask the database.", "run sql query database"),
    ("File an issue about the failing build.", "create issue"),
    ("Find the documentation page about webhooks.", "search documentation"),
)


def default_catalog() -> Path:
    """The bundled mcp-workbench catalogue (495 MCP tools over 36 servers), installed with the
    package, so the demo runs the same from any directory."""
    from toolsearch.datasets import bundled_dataset

    return Path(bundled_dataset("mcp-workbench"))


def example_arguments(schema: Mapping[str, Any]) -> dict[str, Any]:
    """Placeholder arguments for a schema's required properties (what a scripted model sends)."""
    properties = schema.get("properties")
    properties = properties if isinstance(properties, Mapping) else {}
    required = schema.get("required")
    names = required if isinstance(required, list) else []
    values: dict[str, Any] = {}
    for name in names:
        spec = properties.get(name, {})
        kind = spec.get("type") if isinstance(spec, Mapping) else None
        if isinstance(kind, list):
            kind = next((k for k in kind if k != "null"), "string")
        if isinstance(spec, Mapping) and isinstance(spec.get("enum"), list) and spec["enum"]:
            values[str(name)] = spec["enum"][0]
        elif kind in ("integer", "number"):
            values[str(name)] = 1
        elif kind == "boolean":
            values[str(name)] = True
        elif kind == "array":
            values[str(name)] = []
        elif kind == "object":
            values[str(name)] = {}
        else:
            values[str(name)] = "example"
    return values


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "demo",
        help="run the agent loop with a scripted model and show the token saving per turn",
        description="Run the reference agent loop with a scripted model over a catalogue and "
        "print, per turn, the tools sent, the request's tokens with and without tool search, "
        "and the tools discovered.",
    )
    parser.add_argument(
        "--catalog",
        help=f"{CATALOG_HELP} (default: mcp-workbench, 495 MCP tools)",
    )
    add_scope_arguments(parser)
    add_provider_argument(parser, help="request shape to render and measure (default: anthropic)")
    add_backend_argument(parser)
    parser.add_argument(
        "--task",
        action="append",
        default=[],
        metavar="QUERY",
        help="a ToolSearch query for one scripted task (repeatable; default: four tasks)",
    )
    add_mode_arguments(parser, tokenizer_help="tokenizer.json to count tokens exactly")
    add_defer_all_argument(parser)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(func=run)


def _tokens(counter: Any, payload: Any) -> int:
    text = json.dumps(payload, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return int(counter.count(text))


def _describe(message: Mapping[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return f"answer: {content[:60]}"
    actions = []
    for block in content or []:
        if block.get("type") == "tool_use":
            if block["name"] == "ToolSearch":
                actions.append(f"ToolSearch({block['input'].get('query')!r})")
            else:
                actions.append(f"call {block['name']}")
        elif block.get("type") == "text":
            actions.append(f"answer: {str(block.get('text'))[:60]}")
    return "; ".join(actions)


def _call_best(request: NextRequest) -> Message:
    """The scripted model's second step: call the best tool the latest ToolSearch loaded
    (arguments made up from its schema), or give up in words."""
    from toolsearch.agent.messages import assistant_message, tool_use_block
    from toolsearch.agent.state import referenced_names

    names: list[str] = []
    for message in reversed(request.messages):
        results = [b for b in message.get("content") or [] if isinstance(b, dict)]
        results = [b for b in results if b.get("type") == "tool_result"]
        if results:
            names = [n for b in results for n in referenced_names(b)]
            break
    tool = request.pool.get(names[0]) if names else None
    if tool is None:
        return assistant_message("I could not find a tool for that.")
    call_id = f"call_{len(request.messages)}"
    return assistant_message(
        [tool_use_block(call_id, tool.name, example_arguments(tool.input_schema))]
    )


def _tasks(args: argparse.Namespace) -> list[tuple[str, str]]:
    """(user prompt, ToolSearch query) pairs: ``--task`` queries, else :data:`DEFAULT_TASKS`."""
    if args.task:
        return [(f"Task {i + 1}: {query}", query) for i, query in enumerate(args.task)]
    return list(DEFAULT_TASKS)


def _script(number: int, query: str) -> list[Step]:
    """The scripted model's replies for one task: search, call the best tool, answer."""
    from toolsearch.agent.messages import assistant_message, tool_use_block

    search = {"query": query, "max_results": 3}
    return [
        assistant_message([tool_use_block(f"search_{number}", "ToolSearch", search)]),
        _call_best,
        assistant_message(f"Done with task {number}."),
    ]


def _measure(
    loop: AgentLoop, turn: Turn, before: list[Message], off: ModeSettings, counter: Any
) -> dict[str, Any]:
    """One turn's measurements: what was sent, and the same request with search off."""
    from toolsearch.agent.assemble import assemble_request
    from toolsearch.tokens import tool_tokens

    without = assemble_request(
        loop.pool, before, provider=loop.provider, settings=off, counter=counter
    )
    request = turn.request
    return {
        "action": _describe(turn.reply.message),
        "search_enabled": request.search_enabled,
        "tools_sent": len(request.tools),
        "tools_without_search": len(without.tools),
        "tool_tokens": tool_tokens([s.tool for s in request.tools], counter),
        "tool_tokens_without_search": tool_tokens([s.tool for s in without.tools], counter),
        "request_tokens": _tokens(counter, request.payload),
        "request_tokens_without_search": _tokens(counter, without.payload),
        "announced": len(request.delta.added) if request.delta else 0,
        "newly_discovered": list(turn.newly_discovered),
        "discovered": sorted(request.loaded | set(turn.newly_discovered)),
    }


def _totals(turns: list[dict[str, Any]]) -> dict[str, Any]:
    with_search = sum(t["request_tokens"] for t in turns)
    without_search = sum(t["request_tokens_without_search"] for t in turns)
    saving = round(100 * (1 - with_search / without_search), 1) if without_search else 0.0
    return {
        "request_tokens": with_search,
        "request_tokens_without_search": without_search,
        "saved_tokens": without_search - with_search,
        "saving_percent": saving,
    }


def run_demo(args: argparse.Namespace) -> dict[str, Any]:
    """Run the scripted conversation and return every turn's measurements."""
    from toolsearch.agent.clients import ScriptedClient
    from toolsearch.agent.loop import AgentLoop, echo_runner
    from toolsearch.agent.messages import user_message
    from toolsearch.catalog import load_nonempty_catalog

    catalog = Path(args.catalog) if args.catalog else default_catalog()
    tools = load_nonempty_catalog(catalog)
    if args.defer_all:
        tools = catalogue_as_deferred(tools)
    settings = build_settings(args)
    counter = settings.counter()
    off = replace(settings, enable_tool_search="false")
    loop = AgentLoop(
        ScriptedClient([], provider=args.provider),
        tools,
        runner=echo_runner,
        deny=args.deny,
        agent=load_scope(args),
        backend=args.backend,
        settings=settings,
        counter=counter,
    )
    history: list[Message] = []
    turns: list[dict[str, Any]] = []
    for number, (prompt, query) in enumerate(_tasks(args), start=1):
        steps = _script(number, query)
        loop.client = ScriptedClient(steps, provider=args.provider)
        history.append(user_message(prompt))
        for _ in steps:
            before = [dict(m) for m in history]
            turn = loop.step(history, len(turns))
            measured = _measure(loop, turn, before, off, counter)
            turns.append({"turn": len(turns) + 1, "task": number, **measured})
            if not turn.calls:
                break
    return {
        "catalog": str(catalog),
        "provider": args.provider,
        "backend": getattr(loop.engine.backend, "name", type(loop.engine.backend).__name__),
        "counter": repr(counter),
        "pool": {"tools": len(loop.pool.tools), "deferred": len(loop.pool.deferred)},
        "turns": turns,
        "totals": _totals(turns),
    }


def run(args: argparse.Namespace) -> int:
    from rich.table import Table

    report = run_demo(args)
    if args.json:
        print_json(report)
        return 0
    out = console()
    pool = report["pool"]
    out.print(
        f"catalogue {report['catalog']}: {pool['tools']} tools, {pool['deferred']} deferred; "
        f"provider {report['provider']}, backend {report['backend']}, tokens by {report['counter']}"
    )
    table = Table(title="per turn: what was sent (tokens of the whole request)")
    for column in (
        "turn",
        "model did",
        "tools sent",
        "tokens",
        "without search",
        "saved",
        "loaded",
    ):
        if column == "model did":
            table.add_column(column, overflow="fold")
        else:
            table.add_column(column, justify="right", no_wrap=True)
    for turn in report["turns"]:
        saved = turn["request_tokens_without_search"] - turn["request_tokens"]
        new = len(turn["newly_discovered"])
        table.add_row(
            str(turn["turn"]),
            turn["action"],
            f"{turn['tools_sent']}/{turn['tools_without_search']}",
            f"{turn['request_tokens']:,}",
            f"{turn['request_tokens_without_search']:,}",
            f"{saved:,}",
            (f"+{new} → " if new else "") + str(len(turn["discovered"])),
        )
    out.print(table)
    for turn in report["turns"]:
        if turn["newly_discovered"]:
            out.print(f"turn {turn['turn']} loaded: {', '.join(turn['newly_discovered'])}")
    totals = report["totals"]
    out.print(
        f"total request tokens: {totals['request_tokens']:,} with tool search, "
        f"{totals['request_tokens_without_search']:,} without — "
        f"{totals['saved_tokens']:,} saved ({totals['saving_percent']}%)"
    )
    return 0
