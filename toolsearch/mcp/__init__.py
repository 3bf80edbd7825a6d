"""MCP integration: server configs, client connections, and the tool-search gateway server.

- :mod:`toolsearch.mcp.config` reads ``{"mcpServers": {...}}`` files (Claude Desktop, Claude
  Code, Cursor) into :class:`ServerConfig` values;
- :mod:`toolsearch.mcp.client` is one connection to one server through the official ``mcp``
  SDK (stdio or streamable HTTP), over :mod:`toolsearch.mcp.stdio` for stdio servers (bounded
  messages, strict UTF-8);
- :mod:`toolsearch.mcp.hub` puts every configured server behind one searchable, callable pool
  (:class:`McpHub`, :class:`BlockingMcpHub` for synchronous code);
- :mod:`toolsearch.mcp.gateway` serves that pool as an MCP server (``toolsearch serve``),
  over HTTP behind :mod:`toolsearch.mcp.http_security` (Host/Origin allow-lists, bearer token).

Names are imported on first use, so ``import toolsearch.mcp`` needs neither the SDK nor anyio.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from toolsearch._lazy import lazy_exports

if TYPE_CHECKING:
    from toolsearch.mcp.client import McpServerConnection, ToolCallResult
    from toolsearch.mcp.config import (
        McpConfig,
        McpConfigError,
        ServerConfig,
        load_mcp_config,
        parse_mcp_config,
    )
    from toolsearch.mcp.gateway import Gateway, serve
    from toolsearch.mcp.hub import BlockingMcpHub, HubSearchResult, McpHub, ServerState, ToolChange

__all__ = [
    "BlockingMcpHub",
    "Gateway",
    "HubSearchResult",
    "McpConfig",
    "McpConfigError",
    "McpHub",
    "McpServerConnection",
    "ServerConfig",
    "ServerState",
    "ToolCallResult",
    "ToolChange",
    "load_mcp_config",
    "parse_mcp_config",
    "serve",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "McpConfig": "config",
        "McpConfigError": "config",
        "ServerConfig": "config",
        "load_mcp_config": "config",
        "parse_mcp_config": "config",
        "McpServerConnection": "client",
        "ToolCallResult": "client",
        "BlockingMcpHub": "hub",
        "HubSearchResult": "hub",
        "McpHub": "hub",
        "ServerState": "hub",
        "ToolChange": "hub",
        "Gateway": "gateway",
        "serve": "gateway",
    },
)
