"""The scale generator is deterministic and realistic; token counting is what it says."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolsearch.catalog import load_catalog
from toolsearch.synth import scale_catalog
from toolsearch.tokens import CharEstimate, definition_text, tool_tokens
from toolsearch.tool import Tool

STARTER = Path(__file__).resolve().parents[1] / "datasets" / "starter"


def test_scale_catalog_is_deterministic_unique_and_keeps_real_text() -> None:
    base = load_catalog(STARTER)
    big = scale_catalog(base, 500, seed=3)
    assert big == scale_catalog(base, 500, seed=3)
    assert big != scale_catalog(base, 500, seed=4)
    assert len(big) == 500
    assert len({t.name for t in big}) == 500
    assert all(t.name.startswith("mcp__") and t.mcp for t in big)
    descriptions = {t.description for t in base}
    assert all(any(t.description.startswith(d) for d in descriptions) for t in big)


def test_scale_catalog_samples_when_smaller() -> None:
    base = load_catalog(STARTER)
    small = scale_catalog(base, 5)
    assert len(small) == 5
    assert small == scale_catalog(base, 5)


def test_scale_catalog_rejects_bad_sizes() -> None:
    with pytest.raises(ValueError, match="negative"):
        scale_catalog([Tool("a")], -1)
    with pytest.raises(ValueError, match="base tool"):
        scale_catalog([], 10)


def test_char_estimate_counts_definition_text() -> None:
    tool = Tool("mcp__a__b", "abcde", {"type": "object"})
    text = definition_text(tool)
    assert text == 'mcp__a__babcde{"type":"object"}'
    assert CharEstimate().count(text) == 13  # ceil(31 / 2.5)
    assert tool_tokens([tool, tool]) == 26
    with pytest.raises(ValueError, match="positive"):
        CharEstimate(0)
