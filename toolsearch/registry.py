"""Backends are found through the ``toolsearch.backends`` entry-point group.

The project's own backends are registered in its ``pyproject.toml`` exactly as a third-party
package registers one::

    [project.entry-points."toolsearch.backends"]
    mybackend = "my_package.module:MyBackend"

Entry points are read once and each backend class is imported only when asked for. A backend
class must be constructible with keyword options and satisfy :class:`SearchBackend`.
"""

from __future__ import annotations

import importlib.util
import inspect
import os
import re
from dataclasses import dataclass
from functools import cache
from importlib.metadata import EntryPoint, entry_points
from typing import Any

from toolsearch.backend import SearchBackend
from toolsearch.errors import BackendError, MissingExtraError, UnknownBackendError

__all__ = [
    "GROUP",
    "BackendInfo",
    "available_backends",
    "backend_info",
    "backend_options",
    "load_backend",
]

GROUP = "toolsearch.backends"


@dataclass(frozen=True, slots=True)
class BackendInfo:
    """What the registry knows of one backend without building it."""

    name: str
    target: str
    extra: str | None
    missing: tuple[str, ...]
    incremental: bool
    persistent: bool
    summary: str
    server_env: str | None = None

    @property
    def needs_server(self) -> bool:
        """True when the backend needs a server that its environment variable does not name."""
        return self.server_env is not None and not os.environ.get(self.server_env)

    @property
    def installed(self) -> bool:
        """True when every module the backend needs can be imported."""
        return not self.missing

    @property
    def install_command(self) -> str | None:
        """The pip line that installs the backend's extra, if it has one."""
        return f"pip install 'toolsearch[{self.extra}]'" if self.extra else None


@cache
def _entry_points() -> dict[str, EntryPoint]:
    found: dict[str, EntryPoint] = {}
    for ep in entry_points(group=GROUP):
        found.setdefault(ep.name, ep)
    return found


def available_backends() -> list[str]:
    """Names of every registered backend, installed or not, sorted."""
    return sorted(_entry_points())


def _backend_class(name: str) -> type[Any]:
    eps = _entry_points()
    if name not in eps:
        raise UnknownBackendError(name, list(eps))
    try:
        cls = eps[name].load()
    except ImportError as exc:
        raise BackendError(f"backend {name!r} ({eps[name].value}) failed to import: {exc}") from exc
    if not isinstance(cls, type):
        raise BackendError(f"backend {name!r} entry point {eps[name].value} is not a class")
    return cls


def backend_info(name: str) -> BackendInfo:
    """Registry facts about ``name``: its extra, missing modules and capabilities."""
    cls = _backend_class(name)
    requires: tuple[str, ...] = tuple(getattr(cls, "requires", ()))
    missing = tuple(module for module in requires if importlib.util.find_spec(module) is None)
    doc = (cls.__doc__ or "").strip().splitlines()
    return BackendInfo(
        name=name,
        target=_entry_points()[name].value,
        extra=getattr(cls, "extra", None),
        missing=missing,
        incremental=bool(getattr(cls, "incremental", False)),
        persistent=bool(getattr(cls, "persistent", False)),
        summary=_plain_text(doc[0]) if doc else "",
        server_env=getattr(cls, "server_env", None),
    )


_RST_LITERAL = re.compile(r"``([^`]+)``")
_RST_ROLE = re.compile(r":[a-z]+:`~?([^`]+)`")


def _plain_text(docstring_line: str) -> str:
    """A docstring line as a reader sees it: ``literals`` and :role:`targets` unwrapped."""
    return _RST_ROLE.sub(r"\1", _RST_LITERAL.sub(r"\1", docstring_line))


def backend_options(cls: type[Any]) -> tuple[str, ...] | None:
    """The keyword options ``cls`` takes, in signature order; None when it takes any
    (``**kwargs``) or its signature cannot be read."""
    try:
        parameters = list(inspect.signature(cls).parameters.values())
    except (TypeError, ValueError):
        return None
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        return None
    keyword = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return tuple(p.name for p in parameters if p.kind in keyword)


def load_backend(name: str, **options: Any) -> SearchBackend:
    """Build the backend registered as ``name`` with keyword ``options``.

    Raises :class:`UnknownBackendError` (listing what is available) for an unknown name and
    :class:`MissingExtraError` (with the pip line) when its dependencies are missing.
    """
    info = backend_info(name)
    if info.missing:
        raise MissingExtraError(f"backend {name!r}", info.extra or name, info.missing)
    cls = _backend_class(name)
    valid = backend_options(cls)
    unknown = sorted(set(options) - set(valid)) if valid is not None else []
    if unknown:
        raise BackendError(
            f"backend {name!r} rejected options {unknown}: no such option; "
            f"valid options: {', '.join(valid or ()) or 'none'}"
        )
    try:
        backend = cls(**options)
    except TypeError as exc:
        raise BackendError(f"backend {name!r} rejected options {sorted(options)}: {exc}") from exc
    if not isinstance(backend, SearchBackend):
        raise BackendError(f"backend {name!r} does not provide index() and search()")
    return backend
