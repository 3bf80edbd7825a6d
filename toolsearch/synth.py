"""Deterministic large catalogues for scale benchmarks, grown from real tool definitions.

Real catalogues top out at a few hundred tools; latency curves need 1k-100k. The generator
keeps every real description and schema and varies what differs between real deployments of
the same servers: the server's instance name (``github`` → ``github_eu2``), and a short note on
the instance in the description. The same ``(base, n, seed)`` always gives the same catalogue.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import replace

from toolsearch.tool import MCP_PREFIX, Tool, mcp_tool_name

__all__ = ["scale_catalog"]

_INSTANCE_WORDS = (
    "eu", "us", "apac", "staging", "prod", "dev", "internal", "partner", "legacy", "sandbox",
    "west", "east", "backup", "mirror", "team", "ops", "analytics", "billing", "support", "lab",
)  # fmt: skip


def _split(tool: Tool) -> tuple[str, str]:
    """(server, tool part) of a tool name; non-MCP tools get a server from their name."""
    if tool.name.startswith(MCP_PREFIX) and "__" in tool.name[len(MCP_PREFIX) :]:
        server, rest = tool.name[len(MCP_PREFIX) :].split("__", 1)
        return server, rest
    head = tool.name.replace(".", "_").split("_", 1)[0] or "tools"
    return (tool.server or head), tool.name


def scale_catalog(base: Sequence[Tool], n: int, *, seed: int = 0) -> list[Tool]:
    """``n`` tools: the base catalogue (sampled when ``n`` is smaller) plus renamed instances
    of its servers, all MCP-named and unique."""
    if n < 0:
        raise ValueError(f"n must not be negative, got {n}")
    if not base:
        raise ValueError("scale_catalog needs at least one base tool")
    rng = random.Random(seed)
    originals = [
        tool
        if tool.name.startswith(MCP_PREFIX)
        else replace(tool, name=mcp_tool_name(*_split(tool)), server=None, is_mcp=None)
        for tool in base
    ]
    if n <= len(originals):
        return sorted(rng.sample(originals, n), key=lambda t: t.name)
    out = list(originals)
    seen = {tool.name for tool in out}
    copy = 0
    while len(out) < n:
        copy += 1
        order = list(range(len(originals)))
        rng.shuffle(order)
        word_for: dict[str, str] = {}
        for index in order:
            if len(out) >= n:
                break
            tool = originals[index]
            server, rest = _split(tool)
            word = word_for.setdefault(server, rng.choice(_INSTANCE_WORDS))
            instance = f"{server}_{word}{copy}"
            name = mcp_tool_name(instance, rest)
            if name in seen:
                continue
            seen.add(name)
            note = f" ({word} instance {copy} of {server})"
            out.append(
                replace(
                    tool,
                    name=name,
                    server=instance,
                    is_mcp=True,
                    description=tool.description + note,
                )
            )
    return out
