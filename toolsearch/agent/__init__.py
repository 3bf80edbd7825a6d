"""The agent-loop layer: tool-search mode, subagents, conversation state, request assembly.

The common names are importable from here (``from toolsearch.agent import AgentLoop``); each is
imported on first use, so ``import toolsearch.agent`` loads nothing heavy. The modules, by
concept: ``mode`` (when search is on), ``pool`` (permissions and subagent scoping),
``subagents`` (definitions), ``state`` (the discovered set), ``announce`` (deferred names),
``hygiene`` (history cleaning), ``assemble`` (the next request), ``providers`` (request shapes),
``clients`` (model clients) and ``loop`` (the reference loop).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from toolsearch._lazy import lazy_exports

if TYPE_CHECKING:
    from toolsearch.agent.assemble import NextRequest, assemble_request
    from toolsearch.agent.clients import (
        AnthropicClient,
        ChatCompletionsClient,
        ModelClient,
        ModelReply,
        OpenAIClient,
        ScriptedClient,
    )
    from toolsearch.agent.loop import AgentLoop, LoopResult, ToolOutput, Turn, echo_runner
    from toolsearch.agent.messages import load_history
    from toolsearch.agent.mode import ModeDecision, ModeSettings, resolve_mode
    from toolsearch.agent.pool import ResolvedTools, resolve_tools
    from toolsearch.agent.providers import get_adapter
    from toolsearch.agent.state import compact, discovered_tools
    from toolsearch.agent.subagents import AgentDefinition, load_agent, parse_agent

__all__ = [
    "AgentDefinition",
    "AgentLoop",
    "AnthropicClient",
    "ChatCompletionsClient",
    "LoopResult",
    "ModeDecision",
    "ModeSettings",
    "ModelClient",
    "ModelReply",
    "NextRequest",
    "OpenAIClient",
    "ResolvedTools",
    "ScriptedClient",
    "ToolOutput",
    "Turn",
    "assemble_request",
    "compact",
    "discovered_tools",
    "echo_runner",
    "get_adapter",
    "load_agent",
    "load_history",
    "parse_agent",
    "resolve_mode",
    "resolve_tools",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "AgentLoop": "loop",
        "LoopResult": "loop",
        "Turn": "loop",
        "ToolOutput": "loop",
        "echo_runner": "loop",
        "NextRequest": "assemble",
        "assemble_request": "assemble",
        "ModeDecision": "mode",
        "ModeSettings": "mode",
        "resolve_mode": "mode",
        "ResolvedTools": "pool",
        "resolve_tools": "pool",
        "AgentDefinition": "subagents",
        "load_agent": "subagents",
        "parse_agent": "subagents",
        "AnthropicClient": "clients",
        "ChatCompletionsClient": "clients",
        "ModelClient": "clients",
        "ModelReply": "clients",
        "OpenAIClient": "clients",
        "ScriptedClient": "clients",
        "compact": "state",
        "discovered_tools": "state",
        "load_history": "messages",
        "get_adapter": "providers",
    },
)
