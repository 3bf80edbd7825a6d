"""toolsearch: dynamic tool loading for LLM agent loops.

Core tools stay loaded; the long tail is *deferred* (the model sees only names) and the
read-only ToolSearch tool finds and loads full definitions on demand, ranked by a pluggable
search backend.
"""

from __future__ import annotations

from toolsearch.backend import BaseBackend, Hit, IncrementalBackend, SearchBackend
from toolsearch.catalog import load_catalog, tool_from_dict, tools_from_mcp_result
from toolsearch.config import load_settings, resolve_backend
from toolsearch.dataset import Dataset, Query, load_dataset
from toolsearch.engine import Match, SearchResult, ToolSearch, tool_search_tool
from toolsearch.errors import (
    BackendError,
    CatalogError,
    ConfigError,
    MissingExtraError,
    QueryError,
    ToolSearchError,
    UnknownBackendError,
)
from toolsearch.query import ParsedQuery, parse_query
from toolsearch.registry import available_backends, load_backend
from toolsearch.tool import TOOL_SEARCH_NAME, Tool, is_deferred, mcp_tool_name, pool_order

__version__ = "0.1.0"

__all__ = [
    "TOOL_SEARCH_NAME",
    "BackendError",
    "BaseBackend",
    "CatalogError",
    "ConfigError",
    "Dataset",
    "Hit",
    "IncrementalBackend",
    "Match",
    "MissingExtraError",
    "ParsedQuery",
    "Query",
    "QueryError",
    "SearchBackend",
    "SearchResult",
    "Tool",
    "ToolSearch",
    "ToolSearchError",
    "UnknownBackendError",
    "__version__",
    "available_backends",
    "is_deferred",
    "load_backend",
    "load_catalog",
    "load_dataset",
    "load_settings",
    "mcp_tool_name",
    "parse_query",
    "pool_order",
    "resolve_backend",
    "tool_from_dict",
    "tool_search_tool",
    "tools_from_mcp_result",
]
