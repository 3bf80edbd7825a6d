"""Checking an optional extra before the work that needs it starts.

A command that would import an extra's modules only deep into its run (``toolsearch bench``
after the backends ran; ``toolsearch serve`` at its first MCP import) checks them up front, so a
missing extra is one line with its pip command, never a traceback or a wasted run.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterable

from toolsearch.errors import MissingExtraError

__all__ = ["missing_modules", "require_extra"]


def missing_modules(modules: Iterable[str]) -> list[str]:
    """The top-level ``modules`` that cannot be imported here, in the order given."""
    missing: list[str] = []
    for module in modules:
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):  # a blocked or half-imported module
            found = False
        if not found:
            missing.append(module)
    return missing


def require_extra(feature: str, extra: str, modules: Iterable[str]) -> None:
    """Raise :class:`MissingExtraError` (with ``pip install 'toolsearch[extra]'``) when any
    of ``modules`` is missing."""
    missing = missing_modules(modules)
    if missing:
        raise MissingExtraError(feature, extra, missing)
