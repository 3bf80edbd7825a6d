"""Importing ranx lazily and quietly (it is heavy and compiles with numba on first use)."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from toolsearch.errors import MissingExtraError

__all__ = ["NO_RESULT", "import_ranx", "quiet"]

#: A stand-in result for runs where no query retrieved anything (ranx cannot build such a
#: run). It contains a space, so it can never be a tool's name, and is never judged relevant.
NO_RESULT = "(no result)"


def import_ranx() -> Any:
    """The ranx module, or :class:`MissingExtraError` naming the ``bench`` extra."""
    try:
        import ranx
    except ImportError as exc:
        raise MissingExtraError("bench", "bench", [exc.name or "ranx"]) from exc
    return ranx


@contextmanager
def quiet() -> Iterator[None]:
    """Silence numba's compile-time type-safety notes: they are about ranx's internals, not
    about the caller's data."""
    with warnings.catch_warnings():
        try:
            from numba.core.errors import NumbaWarning
        except ImportError:  # pragma: no cover - numba is a ranx dependency
            pass
        else:
            warnings.simplefilter("ignore", NumbaWarning)
        yield
