"""MCP servers the benchmarks start as subprocesses."""
