"""Shared terminal output helpers for CLI commands.

Every JSON document the CLI prints is strict JSON (RFC 8259): ``NaN`` and ``Infinity`` have no
JSON spelling, and strict parsers (``jq``, ``JSON.parse``, most other languages) reject them. A
value that cannot be written is an :class:`OutputError` naming where it is, and nothing is
printed — no value is silently changed (docs/security.md, "Files and catalogues").
"""

from __future__ import annotations

import json
import math
import sys
from typing import Any

from rich.console import Console

from toolsearch.errors import ToolSearchError

__all__ = ["OutputError", "console", "print_json", "shorten", "strict_json"]

#: Characters of user input echoed in a title before it is cut.
ECHO_LIMIT = 80


def console() -> Console:
    """A console on stdout (plain text when stdout is not a terminal)."""
    return Console(highlight=False, soft_wrap=False)


class OutputError(ToolSearchError, ValueError):
    """What the CLI was about to print cannot be written as strict JSON."""


def strict_json(data: Any) -> str:
    """``data`` as strict, indented JSON; :class:`OutputError` for a NaN or infinite number."""
    try:
        return json.dumps(data, ensure_ascii=False, indent=2, allow_nan=False)
    except ValueError as exc:
        where, value = _non_finite(data) or ("a value", math.nan)
        raise OutputError(
            f"cannot print strict JSON: {where} is {value!r}, which JSON cannot represent; "
            "remove it from the input it came from"
        ) from exc


def print_json(data: Any) -> None:
    """Exactly one strict JSON document on stdout."""
    sys.stdout.write(strict_json(data) + "\n")


def _non_finite(data: Any) -> tuple[str, float] | None:
    """Where the first NaN or infinite float in ``data`` is (``messages[1].input.x``)."""
    stack: list[tuple[str, Any]] = [("$", data)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, float) and not math.isfinite(value):
            return path.removeprefix("$."), value
        if isinstance(value, dict):
            stack.extend((f"{path}.{key}", item) for key, item in reversed(value.items()))
        elif isinstance(value, list | tuple):
            stack.extend((f"{path}[{i}]", item) for i, item in reversed(list(enumerate(value))))
    return None


def shorten(text: str, limit: int = ECHO_LIMIT) -> str:
    """``text`` cut to ``limit`` characters (an ellipsis and the full length marking the cut),
    so a huge input is not echoed whole."""
    if len(text) <= limit:
        return text
    return f"{text[: limit - 1]}… ({len(text):,} characters)"
