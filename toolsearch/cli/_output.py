"""Shared terminal output helpers for CLI commands."""

from __future__ import annotations

import json
import sys
from typing import Any

from rich.console import Console

__all__ = ["console", "print_json"]


def console() -> Console:
    """A console on stdout (plain text when stdout is not a terminal)."""
    return Console(highlight=False, soft_wrap=False)


def print_json(data: Any) -> None:
    """Exactly one JSON document on stdout."""
    sys.stdout.write(json.dumps(data, ensure_ascii=False, indent=2) + "\n")
