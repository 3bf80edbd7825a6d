"""Exceptions raised by toolsearch.

Every error the library raises on bad input derives from one root, so callers can catch
``ToolSearchError`` and show its message::

    ToolSearchError
     ├── LocatedError          an input file is invalid at a path, line and field
     │    └── CatalogError     a tool catalogue or dataset file is unreadable or invalid
     ├── QueryError            a ToolSearch call has invalid arguments (e.g. max_results)
     ├── ConfigError           a configuration file or environment variable is invalid
     └── BackendError          a search backend cannot be found, loaded or used
          ├── UnknownBackendError   no backend is registered under that name
          └── MissingExtraError     the backend's optional dependencies are not installed

Messages carry the offending value and, where there is one, the next step.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

__all__ = [
    "BackendError",
    "CatalogError",
    "ConfigError",
    "LocatedError",
    "MissingExtraError",
    "QueryError",
    "ToolSearchError",
    "UnknownBackendError",
]


class ToolSearchError(Exception):
    """Root of every error toolsearch raises on bad input or configuration."""


class LocatedError(ToolSearchError):
    """An error about one place in an input file: ``path``, ``line`` and ``field`` locate it,
    and the message names each of them that is known."""

    def __init__(
        self,
        message: str,
        *,
        path: str | Path | None = None,
        line: int | None = None,
        field: str | None = None,
    ) -> None:
        self.path = str(path) if path is not None else None
        self.line = line
        self.field = field
        where = []
        if self.path is not None:
            where.append(self.path)
        if line is not None:
            where.append(f"line {line}")
        if field is not None:
            where.append(f"field '{field}'")
        super().__init__(f"{', '.join(where)}: {message}" if where else message)


class CatalogError(LocatedError, ValueError):
    """A catalogue or dataset file could not be loaded."""


class QueryError(ToolSearchError, ValueError):
    """A ToolSearch call carried invalid arguments."""


class ConfigError(ToolSearchError, ValueError):
    """Configuration (file, environment or keyword arguments) is invalid."""


class BackendError(ToolSearchError):
    """A search backend could not be found, built or queried."""


class UnknownBackendError(BackendError, LookupError):
    """No backend is registered under the requested name."""

    def __init__(self, name: str, available: Sequence[str]) -> None:
        self.name = name
        self.available = list(available)
        listing = ", ".join(sorted(self.available)) or "none"
        super().__init__(f"unknown backend {name!r}; available: {listing}")


class MissingExtraError(BackendError, ImportError):
    """A backend's optional dependencies are missing; the message has the install line."""

    def __init__(
        self, backend: str, extra: str, missing: Sequence[str], *, what: str | None = None
    ) -> None:
        self.backend = backend
        self.extra = extra
        self.missing = list(missing)
        self.install_command = f"pip install 'toolsearch[{extra}]'"
        subject = what or f"backend {backend!r}"  # ``what`` names a feature that is no backend
        super().__init__(
            f"{subject} needs {', '.join(self.missing)}; install it with: {self.install_command}"
        )
