"""MCP integration: server configs, client connections, and the tool-search gateway server."""
