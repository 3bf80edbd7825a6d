"""Fixtures the framework integration tests share: the bundled 495-tool catalogue, and what
each test agent's scripted model asks for."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from toolsearch.catalog import load_catalog
from toolsearch.datasets import bundled_dataset
from toolsearch.tool import Tool


@dataclass(frozen=True)
class Script:
    """The test agent's task: the query it searches with, the tool that must load, its
    arguments, and a tool that a deny rule removes (and the query that would find it)."""

    query: str = "send a message to a slack channel"
    wanted: str = "mcp__slack__send_message"
    arguments: tuple[tuple[str, str], ...] = (("channel", "#general"), ("text", "hello"))
    denied: str = "mcp__stripe__create_refund"
    denied_query: str = "refund a stripe payment"
    #: a whole server denied by one rule
    denied_server: str = "mcp__paypal"


@pytest.fixture(scope="session")
def workbench() -> list[Tool]:
    """The bundled mcp-workbench catalogue (495 tools)."""
    tools = load_catalog(bundled_dataset("mcp-workbench"))
    assert len(tools) == 495
    return tools


@pytest.fixture
def script() -> Script:
    return Script()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@dataclass(frozen=True)
class HubScript:
    """The MCP part of the test agent: tools of the ``many_tools`` test server, named
    ``mcp__workspace__<tool>``."""

    wanted: str = "mcp__workspace__jira_create_ticket"
    failing: str = "mcp__workspace__diagnostics_report_failure"
    denied: str = "mcp__workspace__stripe_create_refund"
    #: listed with ``anthropic/alwaysLoad``: sent from the first request
    always_loaded: str = "mcp__workspace__github_list_issue"

    @property
    def select(self) -> str:
        return f"select:{self.wanted},{self.failing},{self.denied}"


@pytest.fixture
def hub_script() -> HubScript:
    return HubScript()


@pytest.fixture
def workspace_config() -> object:
    """An MCP config with the ``many_tools`` test server (needs toolsearch[mcp])."""
    pytest.importorskip("mcp_types", reason="needs toolsearch[mcp]")
    from mcp_servers import support  # tests/mcp_servers (pytest pythonpath)

    from toolsearch.mcp.config import parse_mcp_config

    return parse_mcp_config(
        support.config(workspace=support.stdio("many_tools", "--page-size", "100"))
    )


@pytest.fixture
def documented() -> Any:
    """:func:`documented_figures`, for the tests that measure what the pages quote."""
    return documented_figures


def documented_figures(page: str, label: str) -> dict[str, object]:
    """The figures a docs/integrations page quotes on its ``<label>: {...}`` line, which the
    test that measures them compares against (so the page never holds stale figures)."""
    import ast
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "integrations" / page).read_text(
        encoding="utf-8"
    )
    for line in text.splitlines():
        if line.startswith(f"{label}: "):
            figures = ast.literal_eval(line[len(label) + 2 :])
            assert isinstance(figures, dict)
            return figures
    raise AssertionError(f"docs/integrations/{page} quotes no '{label}: ' line")
