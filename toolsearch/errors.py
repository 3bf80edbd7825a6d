"""Exceptions raised by toolsearch.

Every error the library raises on bad input derives from one root, so callers can catch
``ToolSearchError`` and show its message::

    ToolSearchError
     ├── LocatedError          an input file is invalid at a path, line and field
     │    ├── CatalogError     a tool catalogue or dataset file is unreadable or invalid
     │    └── McpConfigError   an MCP server config (toolsearch.mcp.config; also a ConfigError)
     ├── QueryError            a ToolSearch call has invalid arguments (e.g. max_results)
     ├── ConfigError           a configuration file or environment variable is invalid
     └── BackendError          a search backend cannot be found, loaded or used
          ├── UnknownBackendError   no backend is registered under that name
          └── MissingExtraError     a backend's or feature's optional dependencies are missing

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
    """An error about one place in an input file: ``path``, ``line``, ``entry`` (a named entry
    of the file, e.g. ``server 'notes'``) and ``field`` locate it, and the message names each
    of them that is known."""

    def __init__(
        self,
        message: str,
        *,
        path: str | Path | None = None,
        line: int | None = None,
        field: str | None = None,
        entry: str | None = None,
    ) -> None:
        self.path = str(path) if path is not None else None
        self.line = line
        self.field = field
        self.entry = entry
        where = []
        if self.path is not None:
            where.append(self.path)
        if line is not None:
            where.append(f"line {line}")
        if entry is not None:
            where.append(entry)
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
    """A feature's optional dependencies are missing; the message has the install line.

    ``feature`` says in words what needs them (``"backend 'bm25'"``, ``"bench"``,
    ``"tokenizer counter"``); it starts the message as given.
    """

    def __init__(self, feature: str, extra: str, missing: Sequence[str]) -> None:
        self.feature = feature
        self.extra = extra
        self.missing = list(missing)
        self.install_command = f"pip install 'toolsearch[{extra}]'"
        super().__init__(
            f"{feature} needs {', '.join(self.missing)}; install it with: {self.install_command}"
        )
