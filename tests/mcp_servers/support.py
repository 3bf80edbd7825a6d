"""Helpers the MCP tests share: config entries that start the test servers with this Python.

Imported as ``mcp_servers.support``: pytest puts ``tests`` on the import path
(``pythonpath`` in pyproject.toml), since the suite runs in importlib mode and ``tests`` is not
a package.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
EXAMPLE_CONFIG = HERE / "example_mcp.json"


def stdio(script: str, *args: str, **extra: Any) -> dict[str, Any]:
    """A ``mcpServers`` entry running ``tests/mcp_servers/<script>.py`` over stdio."""
    return {"command": sys.executable, "args": [str(HERE / f"{script}.py"), *args], **extra}


def config(**servers: dict[str, Any]) -> dict[str, Any]:
    """A whole MCP config from ``name=entry`` pairs."""
    return {"mcpServers": servers}


def gateway_command(config_path: Path | str, *args: str) -> tuple[str, list[str]]:
    """``(command, args)`` that run ``toolsearch serve --config <path> <args>``."""
    code = "import sys; from toolsearch.cli import main; sys.exit(main())"
    return sys.executable, ["-c", code, "serve", "--config", str(config_path), *args]
