"""Shared terminal output helpers for CLI commands."""

from __future__ import annotations

import json
import sys
from typing import Any

from rich.console import Console

__all__ = ["console", "print_json", "shorten"]

#: Characters of user input echoed in a title before it is cut.
ECHO_LIMIT = 80


def console() -> Console:
    """A console on stdout (plain text when stdout is not a terminal)."""
    return Console(highlight=False, soft_wrap=False)


def print_json(data: Any) -> None:
    """Exactly one JSON document on stdout."""
    sys.stdout.write(json.dumps(data, ensure_ascii=False, indent=2) + "\n")


def shorten(text: str, limit: int = ECHO_LIMIT) -> str:
    """``text`` cut to ``limit`` characters (an ellipsis and the full length marking the cut),
    so a huge input is not echoed whole."""
    if len(text) <= limit:
        return text
    return f"{text[: limit - 1]}… ({len(text):,} characters)"
