"""Provider adapters: the neutral request (tools to send, cleaned history) in one API's shape.

An adapter is anything with a ``name``, a ``server_side`` flag (True when the provider runs the
search itself and must receive every deferred tool) and ``render(parts) -> dict``. Built in:

- ``anthropic`` — Messages API; ``defer_loading`` on sent deferred tools, ToolSearch results as
  ``tool_reference`` blocks; or the server-side regex / BM25 search tools.
- ``openai`` — Responses API; ``tool_search`` with ``execution: "client"``,
  ``tool_search_call`` / ``tool_search_output`` items, ``defer_loading`` on functions.
- ``plain`` — Chat Completions-style function calling, understood by most other APIs;
  ToolSearch results as text with the loaded tools' schemas.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from toolsearch.agent.messages import Message
from toolsearch.errors import ConfigError
from toolsearch.tool import Tool

__all__ = [
    "PROVIDERS",
    "ProviderAdapter",
    "RequestParts",
    "SentTool",
    "get_adapter",
]

#: Names accepted by :func:`get_adapter` (and ``--provider``).
PROVIDERS: tuple[str, ...] = ("anthropic", "openai", "plain")


@dataclass(frozen=True, slots=True)
class SentTool:
    """A tool definition in the next request; ``defer_loading`` marks a deferred tool that is
    sent but stays unloaded until a reference (or search output) loads it."""

    tool: Tool
    defer_loading: bool = False

    @property
    def name(self) -> str:
        """The tool's name."""
        return self.tool.name


@dataclass(frozen=True, slots=True)
class RequestParts:
    """What an adapter renders: the tools to send, the cleaned neutral history, the system
    prompt, whether search is on, and the agent's pool by name (to expand references)."""

    tools: tuple[SentTool, ...]
    messages: tuple[Message, ...]
    search_enabled: bool
    pool: Mapping[str, Tool] = field(default_factory=dict)
    system: str | None = None


@runtime_checkable
class ProviderAdapter(Protocol):
    """Turns :class:`RequestParts` into one provider's request payload."""

    @property
    def name(self) -> str:
        """The provider's name, as reported in requests."""
        ...

    @property
    def server_side(self) -> bool:
        """True when the provider runs the search itself (every deferred tool is sent)."""
        ...

    def render(self, parts: RequestParts) -> dict[str, Any]:
        """The provider payload: ``{"tools": [...], "messages" | "input": [...], ...}``."""
        ...


def get_adapter(provider: str | ProviderAdapter, **options: Any) -> ProviderAdapter:
    """The adapter for ``provider`` (a name from :data:`PROVIDERS` or an adapter instance)."""
    if not isinstance(provider, str):
        if options:
            raise ConfigError("adapter options apply only when the provider is given by name")
        return provider
    if provider == "anthropic":
        from toolsearch.agent.providers.anthropic import AnthropicAdapter

        return AnthropicAdapter(**options)
    if provider == "openai":
        from toolsearch.agent.providers.openai import OpenAIResponsesAdapter

        return OpenAIResponsesAdapter(**options)
    if provider == "plain":
        from toolsearch.agent.providers.plain import PlainAdapter

        return PlainAdapter(**options)
    raise ConfigError(f"unknown provider {provider!r}; available: {', '.join(PROVIDERS)}")
