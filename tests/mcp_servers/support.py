"""Helpers the MCP tests share: config entries that start the test servers with this Python.

Imported as ``mcp_servers.support``: pytest puts ``tests`` on the import path
(``pythonpath`` in pyproject.toml), since the suite runs in importlib mode and ``tests`` is not
a package.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
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


@contextmanager
def http_server(script: str, *args: str) -> Iterator[str]:
    """Run ``tests/mcp_servers/<script>.py --http <args>`` (streamable HTTP on a free
    127.0.0.1 port) for the block; yields the URL it prints once its socket listens."""
    process = subprocess.Popen(
        [sys.executable, str(HERE / f"{script}.py"), "--http", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert process.stdout is not None
        url = process.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:"), url
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
        if process.stdout is not None:
            process.stdout.close()
