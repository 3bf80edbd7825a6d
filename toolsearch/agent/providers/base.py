"""What every provider adapter shares: the request parts it renders and its protocol.

They sit below the adapters and their package, so an adapter never imports the package that
imports it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from toolsearch.agent.messages import Message
from toolsearch.tool import Tool

__all__ = ["ProviderAdapter", "RequestParts", "SentTool"]


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
