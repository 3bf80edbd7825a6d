"""A ``+`` followed only by digits (a phone number) in a request: required under the reference
rules (backend ``keyword``), an ordinary term on every other backend, decided once by the
engine (docs/reference-behaviour.md §2, step 4)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from keyword_reference import naive_keyword_search

from toolsearch import ToolSearch
from toolsearch.query import parse_query
from toolsearch.tool import Tool

REQUEST = "text +447700900123 that the build is green"

TOOLS = [
    Tool("mcp__sms__send_text", "Send a text message (SMS) to a phone number."),
    Tool("mcp__ci__build_status", "Whether the latest build is green or red."),
    Tool("mcp__mail__send_email", "Send an email to an address."),
]


@pytest.mark.parametrize("backend", ["bm25", "fts5", "hybrid"])
def test_a_phone_number_does_not_empty_a_ranked_search(backend: str) -> None:
    if backend == "hybrid":
        pytest.importorskip("onnxruntime")
    result = ToolSearch(TOOLS, backend=backend).search(REQUEST)
    assert "mcp__sms__send_text" in result.names


def test_the_keyword_backend_keeps_the_reference_rule() -> None:
    assert ToolSearch(TOOLS, backend="keyword").search(REQUEST).names == []
    assert naive_keyword_search(TOOLS, REQUEST, 5) == []


@pytest.mark.parametrize("backend", ["bm25", "keyword"])
def test_a_plus_word_is_still_required_everywhere(backend: str) -> None:
    engine = ToolSearch(TOOLS, backend=backend)
    assert engine.search("+sms send").names == ["mcp__sms__send_text"]
    assert engine.search("+1st send").names == []  # digits and letters: a word to require


def test_the_parser_reads_digits_by_the_rule_it_is_given() -> None:
    reference = parse_query(REQUEST)
    assert reference.required == ("447700900123",)
    ranked = parse_query(REQUEST, digits_required=False)
    assert ranked.required == ()
    assert ranked.optional == tuple(REQUEST.split())
    assert parse_query("+slack +44 send", digits_required=False).required == ("slack",)
    assert parse_query("+", digits_required=False).optional == ("+",)


@given(st.text())
def test_only_plus_digit_terms_change(raw: str) -> None:
    reference, ranked = parse_query(raw), parse_query(raw, digits_required=False)
    assert reference.terms == ranked.terms
    moved = set(reference.required) - set(ranked.required)
    assert all(term.isdecimal() for term in moved)
    assert set(ranked.required) <= set(reference.required)
