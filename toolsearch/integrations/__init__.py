"""Deferred tools and ToolSearch inside agent frameworks (docs/integrations/index.md).

One module per framework, each behind its own extra, over the framework-neutral
:mod:`toolsearch.integrations.deferred`:

- :mod:`toolsearch.integrations.langchain` — LangChain agents (a middleware) and
  ``langgraph-bigtool`` (a ``retrieve_tools`` function); ``toolsearch[langchain]``;
- :mod:`toolsearch.integrations.openai_agents` — the OpenAI Agents SDK (tools enabled as they
  are found); ``toolsearch[openai-agents]``;
- :mod:`toolsearch.integrations.pydantic_ai` — PydanticAI (a toolset that grows);
  ``toolsearch[pydantic-ai]``;
- :mod:`toolsearch.integrations.google_adk` — Google ADK (a toolset listed per request, the
  found tools in the session state, deny rules in the agent's callbacks);
  ``toolsearch[google-adk]``;
- :mod:`toolsearch.integrations.crewai` — CrewAI (the run's tools set by CrewAI's hooks before
  each model call); ``toolsearch[crewai]``.

Importing this package loads no framework.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from toolsearch._lazy import lazy_exports

if TYPE_CHECKING:
    from toolsearch.integrations.deferred import (
        DeferredPool,
        DenyRuleWarning,
        FoundTools,
        Savings,
        SearchAnswer,
        framework_tool,
        loaded_names,
    )

__all__ = [
    "DeferredPool",
    "DenyRuleWarning",
    "FoundTools",
    "Savings",
    "SearchAnswer",
    "framework_tool",
    "loaded_names",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "DeferredPool": "deferred",
        "DenyRuleWarning": "deferred",
        "FoundTools": "deferred",
        "loaded_names": "deferred",
        "Savings": "deferred",
        "SearchAnswer": "deferred",
        "framework_tool": "deferred",
    },
)
