"""Settings from code, environment and config files, with one documented precedence.

Which backend, highest first:

1. code: ``ToolSearch(backend="fts5")``, ``resolve_backend("fts5")`` or
   ``load_backend("fts5", path=...)`` directly;
2. environment: ``TOOLSEARCH_BACKEND``;
3. ``toolsearch.toml`` in the working directory or the nearest parent that has one;
4. ``[tool.toolsearch]`` in the nearest ``pyproject.toml``;
5. the measured default: the first installed backend of :data:`DEFAULT_BACKEND_PREFERENCE`.

Backend options merge key by key in the same order (code's ``options`` >
``TOOLSEARCH_BACKEND_OPTIONS`` > ``toolsearch.toml`` > ``pyproject.toml``).
``TOOLSEARCH_BACKEND_OPTIONS`` is a JSON object of options for the backend the environment and
files choose (``TOOLSEARCH_BACKEND``, else the files' ``backend``, else the default); file
options are kept per backend, so a file can configure several and the code pick one.

A config file looks like (in ``pyproject.toml`` the same keys sit under ``[tool.toolsearch]``)::

    backend = "fts5"
    [backends.fts5]          # options per backend, passed to its constructor
    path = "tools.db"
    [backends.hybrid]
    members = { bm25 = 1.0, embedding = 1.0 }
    [mode]                   # agent-loop settings (tool-search mode and its gates)
    enable_tool_search = "auto:10"

Besides ``backend``, every top-level key must be a table (read with :meth:`Settings.section`);
a misspelt scalar key is an error rather than silently ignored. :func:`check_settings` is the one
check of a whole configuration (every ``toolsearch`` command runs it first): unknown tables,
``[backends.<name>]`` tables naming no registered backend, and ``[mode]`` keys and values
(``enable_tool_search`` must be a recognised value there) are errors naming the file.

``[backends.<name>]`` also configures the hybrid's member named ``<name>`` (``embedding``,
``bm25``): the hybrid's ``member_options.<name>`` update it key by key
(:meth:`Settings.build_options`; docs/configuration.md). A backend whose extra is not
installed fails with the exact ``pip install 'toolsearch[...]'`` line
(:class:`~toolsearch.errors.MissingExtraError`).
"""

from __future__ import annotations

import json
import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from toolsearch.backend import SearchBackend
from toolsearch.errors import ConfigError
from toolsearch.mode_values import ENABLE_VALUES, check_mode_section, is_enable_value

__all__ = [
    "DEFAULT_BACKEND_PREFERENCE",
    "ENABLE_VALUES",
    "TABLES",
    "Settings",
    "check_database_urls",
    "check_settings",
    "default_backend_name",
    "is_enable_value",
    "is_local_database",
    "load_settings",
    "resolve_backend",
    "table_in",
]

#: Backends in the order benchmarks ranked them; the first installed one is the default.
#: ``lab/ablation.py`` (dev splits of MetaTool, BFCL and mcp-workbench; results in
#: ``lab/results/ablation.json``) ranks them by mean ndcg@10 in this order.
DEFAULT_BACKEND_PREFERENCE: tuple[str, ...] = ("hybrid", "embedding", "fts5", "bm25", "keyword")

ENV_BACKEND = "TOOLSEARCH_BACKEND"
ENV_BACKEND_OPTIONS = "TOOLSEARCH_BACKEND_OPTIONS"
#: Set to ``1`` to let a config file found upward point a backend at a remote database.
ENV_ALLOW_FILE_DATABASE = "TOOLSEARCH_ALLOW_CONFIG_DATABASE"
#: The top-level tables a config file may have besides ``[backends.<name>]``.
TABLES: tuple[str, ...] = ("mode",)


@dataclass(frozen=True, slots=True)
class Settings:
    """Merged settings and where each layer came from (for error messages and ``--verbose``).

    ``sources`` lists the layers that were read, lowest precedence first; ``backend_source``
    names the one that chose ``backend`` (None when nothing did).
    """

    backend: str | None = None
    backend_options: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    sections: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    sources: tuple[str, ...] = ()
    backend_source: str | None = None
    #: The layers that set each top-level table or backend's options, lowest first.
    section_sources: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    option_sources: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: Each database ``url`` a config file set (value -> the file), found by searching
    #: upward rather than named by the user: see :func:`check_database_urls`.
    file_urls: Mapping[str, str] = field(default_factory=dict)
    #: Whether ``$TOOLSEARCH_ALLOW_CONFIG_DATABASE`` lets a file's remote ``url`` be used.
    file_urls_allowed: bool = False

    def section(self, name: str) -> Mapping[str, Any]:
        """A top-level table of the config (e.g. ``"mode"``), empty when absent."""
        return self.sections.get(name, {})

    def section_source(self, name: str) -> str:
        """Where the ``[name]`` table was read, for error messages, each file with the table
        as that file spells it (``[mode]``, ``[tool.toolsearch.mode]``); ``"[name]"`` when it
        came from nowhere else."""
        found = self.section_sources.get(name)
        return " < ".join(table_in(s, name) for s in found) if found else f"[{name}]"

    def options_source(self, backend: str) -> str:
        """Where ``backend``'s options were read (each file with its table, as
        :meth:`section_source`), for error messages; empty when nowhere."""
        return ", ".join(
            table_in(s, f"backends.{backend}") for s in self.option_sources.get(backend, ())
        )

    def options_for(self, backend: str) -> dict[str, Any]:
        """Constructor options configured for ``backend``."""
        return dict(self.backend_options.get(backend, {}))

    def with_backend_options(
        self, options: Mapping[str, Mapping[str, Any]], source: str
    ) -> Settings:
        """These settings with ``options`` laid over each backend's table key by key, as a
        layer above every file (``source`` names it): a hybrid member then inherits them as it
        inherits ``[backends.<name>]``."""
        merged = {name: {**self.options_for(name), **given} for name, given in options.items()}
        sources = {name: (*self.option_sources.get(name, ()), source) for name in options}
        return replace(
            self,
            backend_options={**self.backend_options, **merged},
            option_sources={**self.option_sources, **sources},
        )

    def member_names(self, backend: str) -> list[str]:
        """The members a ``backend`` built from these settings has (none unless a hybrid)."""
        if backend != "hybrid":
            return []
        return _hybrid_members(self.options_for(backend).get("members"))

    def build_options(
        self, backend: str, overrides: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        """The options ``backend`` is built with: its configured options, ``overrides`` on
        top; for the hybrid, each member named after a backend also starts from that
        backend's ``[backends.<name>]`` options (its ``member_options`` win key by key).
        A remote database ``url`` from a config file found upward is refused
        (:func:`check_database_urls`)."""
        merged = self._merged_options(backend, overrides)
        check_database_urls(merged, self)
        return merged

    def _merged_options(self, backend: str, overrides: Mapping[str, Any] | None) -> dict[str, Any]:
        merged = {**self.options_for(backend), **(overrides or {})}
        if backend != "hybrid":
            return merged
        given = merged.get("member_options") or {}
        if not isinstance(given, Mapping):
            return merged  # the hybrid's own check names the mistake
        members = _hybrid_members(merged.get("members"))
        filled = dict(given)
        for member in members:
            inherited = self.options_for(member)
            own = given.get(member, {})
            if not inherited or member == "hybrid" or not isinstance(own, Mapping):
                continue
            if own.get("backend", member) == member:
                filled[member] = _member_options(inherited, own)
        if filled != given:
            merged["member_options"] = filled
        return merged


def _member_options(inherited: Mapping[str, Any], own: Mapping[str, Any]) -> dict[str, Any]:
    """A hybrid member's options from its backend's table and its own ``member_options``.

    A query adapter fits the float32 vectors ``toolsearch train`` encodes, so a member that
    inherits one runs float32 (the default member is int8) unless a precision is given.
    """
    merged = {**inherited, **own}
    if "query_adapter" in inherited and "precision" not in merged:
        merged["precision"] = "fp32"
    return merged


def _hybrid_members(members: Any) -> list[str]:
    """The member names the hybrid will have for its ``members`` option."""
    if members is None:
        from toolsearch.backends.hybrid import DEFAULT_MEMBERS

        return list(DEFAULT_MEMBERS)
    if isinstance(members, str):
        return []
    return [m for m in members if isinstance(m, str)]


#: How a ``pyproject.toml`` layer is named in :attr:`Settings.sources`.
PYPROJECT_TABLE = "[tool.toolsearch]"


def table_in(source: str, table: str) -> str:
    """The table ``table`` (``"mode"``, ``"backends.bm25"``) as the layer ``source`` spells
    it: ``pyproject.toml [tool.toolsearch.mode]``, ``toolsearch.toml [mode]``; an environment
    variable or a command-line flag as it is."""
    if source.endswith(f" {PYPROJECT_TABLE}"):
        return f"{source.removesuffix(PYPROJECT_TABLE)}[tool.toolsearch.{table}]"
    if source.startswith(("$", "-")):
        return source
    return f"{source} [{table}]"


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
        raise ConfigError(f"{path}: invalid TOML: {exc}{_singular_table_hint(path)}") from exc


_SINGULAR_TABLE = re.compile(r"^\s*\[\s*(?:tool\.toolsearch\.)?backend\.([^\]\s]+)\s*\]", re.M)


def _singular_table_hint(path: Path) -> str:
    """The likely cause when a file's ``[backend.<name>]`` table clashes with its ``backend``
    key: options go under ``[backends.<name>]``."""
    try:
        found = _SINGULAR_TABLE.search(path.read_text(encoding="utf-8", errors="replace"))
    except OSError:
        return ""
    if found is None:
        return ""
    return f"; options of a backend go under [backends.{found.group(1)}] (plural), not [backend.*]"


def _layer(data: Mapping[str, Any], source: str) -> tuple[str | None, dict[str, dict[str, Any]]]:
    backend = data.get("backend")
    if isinstance(backend, Mapping):
        tables = ", ".join(f"[backends.{name}]" for name in backend) or "[backends.<name>]"
        raise ConfigError(
            f"{source}: [backend.*] is not a setting; options of a backend go under "
            f"{tables} (plural), and 'backend = \"<name>\"' chooses one"
        )
    if backend is not None and (not isinstance(backend, str) or not backend.strip()):
        raise ConfigError(f"{source}: 'backend' must be a backend name, got {backend!r}")
    stray = sorted(
        k
        for k, v in data.items()
        if k not in {"backend", "backends"} and not isinstance(v, Mapping)
    )
    if stray:
        raise ConfigError(
            f"{source}: unknown setting(s) {', '.join(map(repr, stray))}; top-level keys are "
            "'backend' and tables such as [backends.<name>] and [mode]"
        )
    options = data.get("backends", {})
    if not isinstance(options, Mapping) or not all(
        isinstance(v, Mapping) for v in options.values()
    ):
        raise ConfigError(f"{source}: 'backends' must be a table of tables, got {options!r}")
    return (backend.strip() if backend else None), {
        name: dict(opts) for name, opts in options.items()
    }


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
            layers.append((f"{pyproject} {PYPROJECT_TABLE}", table))
    own = _find_upwards(start, "toolsearch.toml")
    if own is not None:
        layers.append((str(own), _read_toml(own)))

    backend: str | None = None
    backend_source: str | None = None
    options: dict[str, dict[str, Any]] = {}
    sections: dict[str, dict[str, Any]] = {}
    section_sources: dict[str, tuple[str, ...]] = {}
    option_sources: dict[str, tuple[str, ...]] = {}
    sources: list[str] = []
    file_urls: dict[str, str] = {}
    for source, data in layers:
        layer_backend, layer_options = _layer(data, source)
        if layer_backend:
            backend, backend_source = layer_backend, source
        for name, opts in layer_options.items():
            options.setdefault(name, {}).update(opts)
            option_sources[name] = (*option_sources.get(name, ()), source)
        for key, value in data.items():
            if key not in {"backend", "backends"} and isinstance(value, Mapping):
                sections.setdefault(key, {}).update(value)
                section_sources[key] = (*section_sources.get(key, ()), source)
        sources.append(source)
        file_urls.update(dict.fromkeys(_urls(data.get("backends", {})), source))

    if env.get(ENV_BACKEND, "").strip():
        backend = env[ENV_BACKEND].strip()
        backend_source = f"${ENV_BACKEND}"
        sources.append(backend_source)
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
        option_sources[target] = (*option_sources.get(target, ()), f"${ENV_BACKEND_OPTIONS}")
        sources.append(f"${ENV_BACKEND_OPTIONS}")
    return Settings(
        backend,
        options,
        sections,
        tuple(sources),
        backend_source,
        section_sources,
        option_sources,
        file_urls,
        is_enable_value(env.get(ENV_ALLOW_FILE_DATABASE, "")),
    )


def _urls(value: Any) -> list[str]:
    """Every string under a key named ``url`` in ``value`` (nested tables included)."""
    found: list[str] = []
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, Mapping):
            for key, child in item.items():
                if key == "url" and isinstance(child, str):
                    found.append(child)
                else:
                    stack.append(child)
        elif isinstance(item, list):
            stack.extend(item)
    return found


def is_local_database(url: str) -> bool:
    """Whether a database URL or ``key=value`` DSN can only reach this machine: every host it
    names is a Unix socket folder, ``localhost`` or a loopback address (none: the default
    socket). Anything unparseable counts as remote."""
    from toolsearch.mcp.http_security import is_loopback

    hosts: list[str] = []
    if "://" in url:
        parsed = urlsplit(url)
        netloc = parsed.netloc.rpartition("@")[2]
        hosts += [
            part.rsplit(":", 1)[0] if part.count(":") == 1 else part for part in netloc.split(",")
        ]
        for key, value in parse_qsl(parsed.query):
            if key in ("host", "hostaddr"):
                hosts += value.split(",")
    else:
        for pair in url.split():
            key, _, value = pair.partition("=")
            if key in ("host", "hostaddr"):
                hosts += value.strip("'\"").split(",")
    return all(
        not host or unquote(host).startswith("/") or is_loopback(unquote(host)) for host in hosts
    )


def check_database_urls(options: Mapping[str, Any], settings: Settings) -> None:
    """Refuse (:class:`ConfigError`) a remote database ``url`` in ``options`` that came from a
    config file the user did not name — a ``pyproject.toml`` or ``toolsearch.toml`` found in
    the working directory or a parent — unless ``$TOOLSEARCH_ALLOW_CONFIG_DATABASE`` is set:
    indexing would upload the whole tool catalogue to it (docs/security.md, "Config files").
    """
    if settings.file_urls_allowed:
        return
    for url in _urls(options):
        source = settings.file_urls.get(url)
        if source is None or is_local_database(url):
            continue
        raise ConfigError(
            f"{source} sets a remote database url ({_host_of(url)}): indexing would send the "
            "tool catalogue there, and this file was found in the working directory or a "
            f"parent, not named by you. To use it, set {ENV_ALLOW_FILE_DATABASE}=1, or give "
            "the url in $TOOLSEARCH_POSTGRES_URL or $TOOLSEARCH_BACKEND_OPTIONS"
        )


def _host_of(url: str) -> str:
    """Where a URL points, without its credentials."""
    if "://" in url:
        return urlsplit(url).netloc.rpartition("@")[2] or "?"
    hosts = [pair.partition("=")[2] for pair in url.split() if pair.startswith("host")]
    return ",".join(hosts) or "?"


def check_settings(settings: Settings) -> None:
    """The one check of a whole configuration, run before every ``toolsearch`` command.

    Raises :class:`ConfigError` naming the file for a table that is not a setting, a
    ``[backends.<name>]`` naming no registered backend, or a ``[mode]`` key or value that is
    wrong (in a file an unrecognised ``enable_tool_search`` is a mistake, not "on").
    """
    from toolsearch.registry import available_backends

    for name in settings.sections:
        if name not in TABLES:
            raise ConfigError(
                f"{settings.section_source(name)}: unknown table; tables are "
                f"[backends.<name>] and {', '.join(f'[{t}]' for t in TABLES)}"
            )
    known = available_backends()
    for name in settings.backend_options:
        if name not in known:
            where = settings.options_source(name) or f"[backends.{name}]"
            raise ConfigError(
                f"{where} names no registered backend; registered: {', '.join(known)}"
            )
    if settings.section("mode"):
        check_mode_section(settings.section("mode"), settings.section_source("mode"))


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
    from toolsearch.errors import BackendError, MissingExtraError, UnknownBackendError
    from toolsearch.registry import load_backend

    settings = load_settings() if settings is None else settings
    chosen = name or settings.backend or default_backend_name()
    merged = settings.build_options(chosen, options)
    try:
        return load_backend(chosen, **merged)
    except UnknownBackendError as exc:
        # say where the bad name came from: the message is all a CLI user sees
        exc.args = (f"{exc}{_named_by(exc.name, chosen, name, settings, options)}",)
        raise
    except BackendError as exc:
        configured = settings.options_source(chosen)
        if not configured or isinstance(exc, MissingExtraError):
            raise
        exc.args = (f"{exc} (options from {configured})",)
        raise


def _named_by(
    unknown: str,
    chosen: str,
    name: str | None,
    settings: Settings,
    options: Mapping[str, Any] | None,
) -> str:
    """Where an unknown backend name came from, as a suffix for its error: the backend chosen
    by a file or the environment, or a member of the chosen hybrid, and who listed it."""
    if unknown != chosen:  # a member of the chosen backend (a hybrid), not the backend
        if options and "members" in options:
            return f" (a member of the {chosen} backend, given in code)"
        listed = settings.options_source(chosen)
        return f" (a member of the {chosen} backend, listed in {listed or 'its defaults'})"
    if name or settings.backend_source is None:
        return ""
    return f" (backend set by {settings.backend_source})"
