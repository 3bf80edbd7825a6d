"""Settings from code, environment and config files, with one documented precedence.

Highest first:

1. keyword arguments in code (``load_backend("fts5", path=...)``, ``ToolSearch(backend=...)``);
2. environment: ``TOOLSEARCH_BACKEND`` and ``TOOLSEARCH_BACKEND_OPTIONS`` (a JSON object);
3. ``toolsearch.toml`` in the working directory or the nearest parent that has one;
4. ``[tool.toolsearch]`` in the nearest ``pyproject.toml``;
5. the measured default: the first installed backend of :data:`DEFAULT_BACKEND_PREFERENCE`.

A config file looks like::

    backend = "fts5"
    [backends.fts5]          # options per backend, passed to its constructor
    path = "tools.db"
    [mode]                   # agent-loop settings (tool-search mode and its gates)
    enable_tool_search = "auto:10"
"""

from __future__ import annotations

import json
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toolsearch.backend import SearchBackend
from toolsearch.errors import ConfigError

__all__ = [
    "DEFAULT_BACKEND_PREFERENCE",
    "Settings",
    "default_backend_name",
    "load_settings",
    "resolve_backend",
]

#: Backends in the order benchmarks ranked them; the first installed one is the default.
DEFAULT_BACKEND_PREFERENCE: tuple[str, ...] = ("keyword",)

ENV_BACKEND = "TOOLSEARCH_BACKEND"
ENV_BACKEND_OPTIONS = "TOOLSEARCH_BACKEND_OPTIONS"


@dataclass(frozen=True, slots=True)
class Settings:
    """Merged settings and where each layer came from (for error messages and ``--verbose``)."""

    backend: str | None = None
    backend_options: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    sections: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    sources: tuple[str, ...] = ()

    def section(self, name: str) -> Mapping[str, Any]:
        """A top-level table of the config (e.g. ``"mode"``), empty when absent."""
        return self.sections.get(name, {})

    def options_for(self, backend: str) -> dict[str, Any]:
        """Constructor options configured for ``backend``."""
        return dict(self.backend_options.get(backend, {}))


def _find_upwards(start: Path, filename: str) -> Path | None:
    for folder in (start, *start.parents):
        candidate = folder / filename
        if candidate.is_file():
            return candidate
    return None


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as handle:
            return tomllib.load(handle)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read config: {exc}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from exc


def _layer(data: Mapping[str, Any], source: str) -> tuple[str | None, dict[str, dict[str, Any]]]:
    backend = data.get("backend")
    if backend is not None and not isinstance(backend, str):
        raise ConfigError(f"{source}: 'backend' must be a string, got {backend!r}")
    options = data.get("backends", {})
    if not isinstance(options, Mapping) or not all(
        isinstance(v, Mapping) for v in options.values()
    ):
        raise ConfigError(f"{source}: 'backends' must be a table of tables, got {options!r}")
    return backend, {name: dict(opts) for name, opts in options.items()}


def load_settings(cwd: str | Path | None = None, env: Mapping[str, str] | None = None) -> Settings:
    """Read config files above ``cwd`` and the environment into one :class:`Settings`."""
    env = os.environ if env is None else env
    start = Path(cwd) if cwd is not None else Path.cwd()
    layers: list[tuple[str, Mapping[str, Any]]] = []
    pyproject = _find_upwards(start, "pyproject.toml")
    if pyproject is not None:
        table = _read_toml(pyproject).get("tool", {}).get("toolsearch")
        if table is not None:
            if not isinstance(table, Mapping):
                raise ConfigError(f"{pyproject}: [tool.toolsearch] must be a table")
            layers.append((f"{pyproject} [tool.toolsearch]", table))
    own = _find_upwards(start, "toolsearch.toml")
    if own is not None:
        layers.append((str(own), _read_toml(own)))

    backend: str | None = None
    options: dict[str, dict[str, Any]] = {}
    sections: dict[str, dict[str, Any]] = {}
    sources: list[str] = []
    for source, data in layers:
        layer_backend, layer_options = _layer(data, source)
        backend = layer_backend or backend
        for name, opts in layer_options.items():
            options.setdefault(name, {}).update(opts)
        for key, value in data.items():
            if key not in {"backend", "backends"} and isinstance(value, Mapping):
                sections.setdefault(key, {}).update(value)
        sources.append(source)

    if env.get(ENV_BACKEND, "").strip():
        backend = env[ENV_BACKEND].strip()
        sources.append(f"${ENV_BACKEND}")
    raw_options = env.get(ENV_BACKEND_OPTIONS, "").strip()
    if raw_options:
        try:
            parsed = json.loads(raw_options)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"${ENV_BACKEND_OPTIONS} is not valid JSON: {exc}") from exc
        if not isinstance(parsed, dict):
            raise ConfigError(f"${ENV_BACKEND_OPTIONS} must be a JSON object, got {raw_options!r}")
        target = backend or default_backend_name()
        options.setdefault(target, {}).update(parsed)
        sources.append(f"${ENV_BACKEND_OPTIONS}")
    return Settings(backend, options, sections, tuple(sources))


def default_backend_name() -> str:
    """The first installed backend of :data:`DEFAULT_BACKEND_PREFERENCE`."""
    from toolsearch.errors import BackendError
    from toolsearch.registry import backend_info

    for name in DEFAULT_BACKEND_PREFERENCE:
        try:
            if backend_info(name).installed:
                return name
        except BackendError:
            continue
    return "keyword"


def resolve_backend(
    name: str | None = None,
    *,
    options: Mapping[str, Any] | None = None,
    settings: Settings | None = None,
) -> SearchBackend:
    """Build the backend the precedence picks: ``name`` > environment > files > default.
    Options merge the same way, code's ``options`` winning."""
    from toolsearch.registry import load_backend

    settings = load_settings() if settings is None else settings
    chosen = name or settings.backend or default_backend_name()
    merged = settings.options_for(chosen)
    merged.update(options or {})
    return load_backend(chosen, **merged)
