"""A naive, line-by-line transcription of the reference keyword scorer.

Deliberately slow and obvious: it re-parses every name and compiles every pattern per tool per
term, exactly as the rules read. Tests and benchmarks compare the fast ``keyword`` backend
against it; it lives with the tests, outside the package.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from toolsearch.backend import Hit
from toolsearch.tool import Tool

__all__ = ["naive_keyword_search"]


def _parse_name(name: str) -> tuple[list[str], str, bool]:
    if name.startswith("mcp__"):
        rest = name[5:].lower()
        parts = []
        for chunk in rest.split("__"):
            for piece in chunk.split("_"):
                if piece != "":
                    parts.append(piece)
        full = rest.replace("__", " ").replace("_", " ")
        return parts, full, True
    spaced = re.sub(r"([a-z])([A-Z])", r"\1 \2", name)
    spaced = spaced.replace("_", " ").lower()
    parts = [p for p in re.split(r"\s+", spaced) if p != ""]
    return parts, " ".join(parts), False


def naive_keyword_search(tools: Sequence[Tool], raw_query: str, k: int) -> list[Hit]:
    """Score ``tools`` (in pool order) for ``raw_query`` by the rules, first ``k`` hits."""
    terms = [t for t in re.split(r"\s+", raw_query.lower().strip()) if t != ""]
    required = []
    optional = []
    for term in terms:
        if term.startswith("+") and len(term) > 1:
            required.append(term[1:])
        else:
            optional.append(term)
    scoring = required + optional if required else terms

    candidates = []
    for tool in tools:
        parts, _full, _mcp = _parse_name(tool.name)
        description = tool.description.lower()
        hint = (tool.search_hint or "").lower()
        ok = True
        for term in required:
            pattern = re.compile(r"\b" + re.escape(term) + r"\b")
            if not (
                term in parts
                or any(term in part for part in parts)
                or pattern.search(description)
                or (hint != "" and pattern.search(hint))
            ):
                ok = False
        if ok:
            candidates.append(tool)

    scored = []
    for position, tool in enumerate(candidates):
        parts, full, is_mcp = _parse_name(tool.name)
        description = tool.description.lower()
        hint = (tool.search_hint or "").lower()
        score = 0
        for term in scoring:
            pattern = re.compile(r"\b" + re.escape(term) + r"\b")
            if term in parts:
                score += 12 if is_mcp else 10
            elif any(term in part for part in parts):
                score += 6 if is_mcp else 5
            if term in full and score == 0:
                score += 3
            if hint != "" and pattern.search(hint):
                score += 4
            if pattern.search(description):
                score += 2
        if score > 0:
            scored.append((score, position, tool.name))
    scored.sort(key=lambda item: (-item[0], item[1]))
    return [Hit(name, float(score)) for score, _pos, name in scored[:k]]
