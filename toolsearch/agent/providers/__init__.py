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

from typing import Any

from toolsearch.agent.providers.base import ProviderAdapter, RequestParts, SentTool
from toolsearch.errors import ConfigError

__all__ = [
    "PROVIDERS",
    "ProviderAdapter",
    "RequestParts",
    "SentTool",
    "get_adapter",
]

#: Names accepted by :func:`get_adapter` (and ``--provider``).
PROVIDERS: tuple[str, ...] = ("anthropic", "openai", "plain")


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
