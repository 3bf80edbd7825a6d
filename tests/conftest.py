"""Shared fixtures: small catalogues that exercise the reference rules."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolsearch.catalog import load_catalog
from toolsearch.tool import Tool

STARTER = Path(__file__).resolve().parents[1] / "datasets" / "starter"


@pytest.fixture
def starter_tools() -> list[Tool]:
    """The bundled starter catalogue (built-ins and seven MCP servers)."""
    return load_catalog(STARTER)
