"""Backend choice from code, environment, ``toolsearch.toml`` and ``pyproject.toml``, with the
documented precedence, and the install line when a backend's extra is missing."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

from toolsearch import config, registry
from toolsearch.backends.keyword import KeywordBackend
from toolsearch.config import (
    DEFAULT_BACKEND_PREFERENCE,
    default_backend_name,
    load_settings,
    resolve_backend,
)
from toolsearch.engine import ToolSearch
from toolsearch.errors import ConfigError, MissingExtraError, UnknownBackendError
from toolsearch.tool import Tool

PYPROJECT = """\
[project]
name = "demo"

[tool.toolsearch]
backend = "bm25"

[tool.toolsearch.backends.hybrid]
members = ["keyword"]
k = 5
depth = 7

[tool.toolsearch.mode]
enable_tool_search = "auto:20"
"""

TOOLSEARCH_TOML = """\
backend = "hybrid"

[backends.hybrid]
k = 30

[mode]
enable_tool_search = "true"
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """An empty project folder with a nested working directory."""
    (tmp_path / "proj" / "src" / "pkg").mkdir(parents=True)
    return tmp_path / "proj"


def _settings(cwd: Path, **env: str) -> config.Settings:
    return load_settings(cwd=cwd, env=env)


def test_nothing_configured_uses_the_measured_default(project: Path) -> None:
    settings = _settings(project)
    assert settings.backend is None and settings.backend_source is None
    assert settings.sources == () and settings.options_for("bm25") == {}
    assert settings.section("mode") == {}
    assert default_backend_name() in registry.available_backends()
    assert default_backend_name() == next(
        n for n in DEFAULT_BACKEND_PREFERENCE if registry.backend_info(n).installed
    )


def test_pyproject_table(project: Path) -> None:
    (project / "pyproject.toml").write_text(PYPROJECT)
    settings = _settings(project / "src" / "pkg")  # found from a subfolder
    assert settings.backend == "bm25"
    assert settings.backend_source == f"{project / 'pyproject.toml'} [tool.toolsearch]"
    assert settings.options_for("hybrid") == {"members": ["keyword"], "k": 5, "depth": 7}
    assert settings.section("mode") == {"enable_tool_search": "auto:20"}


def test_pyproject_without_a_toolsearch_table_is_ignored(project: Path) -> None:
    (project / "pyproject.toml").write_text('[project]\nname = "demo"\n')
    assert _settings(project) == config.Settings()


def test_toolsearch_toml_beats_pyproject_key_by_key(project: Path) -> None:
    (project / "pyproject.toml").write_text(PYPROJECT)
    (project / "toolsearch.toml").write_text(TOOLSEARCH_TOML)
    settings = _settings(project / "src")
    assert settings.backend == "hybrid"
    assert settings.backend_source == str(project / "toolsearch.toml")
    # k from toolsearch.toml, members and depth still from pyproject
    assert settings.options_for("hybrid") == {"members": ["keyword"], "k": 30, "depth": 7}
    assert settings.section("mode") == {"enable_tool_search": "true"}
    assert settings.sources == (
        f"{project / 'pyproject.toml'} [tool.toolsearch]",
        str(project / "toolsearch.toml"),
    )


def test_toolsearch_toml_in_a_parent_folder(project: Path) -> None:
    (project / "toolsearch.toml").write_text('backend = "keyword"\n')
    assert _settings(project / "src" / "pkg").backend == "keyword"


def test_environment_beats_files(project: Path) -> None:
    (project / "pyproject.toml").write_text(PYPROJECT)
    (project / "toolsearch.toml").write_text(TOOLSEARCH_TOML)
    settings = _settings(
        project,
        TOOLSEARCH_BACKEND=" keyword ",
        TOOLSEARCH_BACKEND_OPTIONS="",
    )
    assert settings.backend == "keyword" and settings.backend_source == "$TOOLSEARCH_BACKEND"
    options = json.dumps({"k": 99, "member_options": {"keyword": {}}})
    settings = _settings(project, TOOLSEARCH_BACKEND_OPTIONS=options)
    # options target the backend the files chose (hybrid) and win key by key
    assert settings.options_for("hybrid") == {
        "members": ["keyword"],
        "k": 99,
        "depth": 7,
        "member_options": {"keyword": {}},
    }
    assert settings.sources[-1] == "$TOOLSEARCH_BACKEND_OPTIONS"


def test_environment_options_follow_the_environment_backend(project: Path) -> None:
    (project / "toolsearch.toml").write_text(TOOLSEARCH_TOML)
    settings = _settings(
        project, TOOLSEARCH_BACKEND="embedding", TOOLSEARCH_BACKEND_OPTIONS='{"cache_dir": false}'
    )
    assert settings.options_for("embedding") == {"cache_dir": False}
    assert settings.options_for("hybrid") == {"k": 30}


def test_environment_options_without_any_backend_go_to_the_default(project: Path) -> None:
    settings = _settings(project, TOOLSEARCH_BACKEND_OPTIONS='{"x": 1}')
    assert settings.options_for(default_backend_name()) == {"x": 1}


def test_code_beats_environment_and_files(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (project / "toolsearch.toml").write_text(TOOLSEARCH_TOML)
    settings = _settings(
        project, TOOLSEARCH_BACKEND="hybrid", TOOLSEARCH_BACKEND_OPTIONS='{"members": ["keyword"]}'
    )
    backend = resolve_backend("keyword", settings=settings)
    assert isinstance(backend, KeywordBackend)
    # options: code > environment > file
    hybrid: Any = resolve_backend(settings=settings, options={"depth": 3})
    assert hybrid.params()["weights"] == {"keyword": 1.0}
    assert (hybrid.k, hybrid.depth) == (30, 3)


def test_engine_reads_all_three_places(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tools = [Tool(f"mcp__s__tool_{i}", f"Tool number {i} does thing {i}.") for i in range(6)]
    monkeypatch.chdir(project)
    for var in ("TOOLSEARCH_BACKEND", "TOOLSEARCH_BACKEND_OPTIONS"):
        monkeypatch.delenv(var, raising=False)
    (project / "pyproject.toml").write_text('[tool.toolsearch]\nbackend = "keyword"\n')
    assert isinstance(ToolSearch(tools).backend, KeywordBackend)
    (project / "toolsearch.toml").write_text(
        'backend = "hybrid"\n[backends.hybrid]\nmembers = {keyword = 2.0}\nk = 1\n'
    )
    engine = ToolSearch(tools)
    assert engine.backend.__class__.__name__ == "HybridBackend"
    assert getattr(engine.backend, "weights", None) == {"keyword": 2.0}
    assert engine.search("thing 3").names[0] == "mcp__s__tool_3"
    monkeypatch.setenv("TOOLSEARCH_BACKEND", "keyword")
    assert isinstance(ToolSearch(tools).backend, KeywordBackend)
    # code wins over the environment
    assert ToolSearch(tools, backend="hybrid").backend.__class__.__name__ == "HybridBackend"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("backend = [1]\n", "'backend' must be a backend name"),
        ('backend = "  "\n', "'backend' must be a backend name"),
        ('backends = "fts5"\n', "'backends' must be a table of tables"),
        ("[backends]\nfts5 = 3\n", "'backends' must be a table of tables"),
        ('backed = "fts5"\n', "unknown setting(s) 'backed'"),
        ("backend = \n", "invalid TOML"),
    ],
)
def test_bad_config_file(project: Path, text: str, message: str) -> None:
    (project / "toolsearch.toml").write_text(text)
    with pytest.raises(ConfigError, match=r"toolsearch\.toml") as info:
        _settings(project)
    assert message in str(info.value)


def test_bad_pyproject_table(project: Path) -> None:
    (project / "pyproject.toml").write_text('[tool]\ntoolsearch = "bm25"\n')
    with pytest.raises(ConfigError, match=r"\[tool.toolsearch\] must be a table"):
        _settings(project)


@pytest.mark.parametrize(
    ("value", "message"),
    [("{not json", "not valid JSON"), ("[1, 2]", "must be a JSON object")],
)
def test_bad_environment_options(project: Path, value: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        _settings(project, TOOLSEARCH_BACKEND="keyword", TOOLSEARCH_BACKEND_OPTIONS=value)


def test_unknown_backend_names_its_source(project: Path) -> None:
    settings = _settings(project, TOOLSEARCH_BACKEND="bm52")
    with pytest.raises(UnknownBackendError) as info:
        resolve_backend(settings=settings)
    message = str(info.value)
    assert message.startswith("unknown backend 'bm52'; available: ")
    assert "keyword" in message and message.endswith("(backend set by $TOOLSEARCH_BACKEND)")
    (project / "toolsearch.toml").write_text('backend = "nope"\n')
    with pytest.raises(UnknownBackendError, match=r"set by .*toolsearch\.toml\)$"):
        resolve_backend(settings=_settings(project))
    with pytest.raises(UnknownBackendError, match=r"'zzz'; available: [a-z0-9, ]+$"):
        resolve_backend("zzz", settings=_settings(project))


def _hide_modules(monkeypatch: pytest.MonkeyPatch, *hidden: str) -> None:
    real = importlib.util.find_spec

    def find_spec(name: str, package: str | None = None) -> Any:
        return None if name in hidden else real(name, package)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)


@pytest.mark.parametrize(
    ("backend", "hidden", "line"),
    [
        ("embedding", ("sentence_transformers",), "pip install 'toolsearch[embedding]'"),
        ("hybrid", ("sentence_transformers",), "pip install 'toolsearch[embedding,bm25]'"),
    ],
)
def test_missing_extra_gives_the_pip_line(
    project: Path,
    monkeypatch: pytest.MonkeyPatch,
    backend: str,
    hidden: tuple[str, ...],
    line: str,
) -> None:
    _hide_modules(monkeypatch, *hidden)
    assert registry.backend_info(backend).missing == hidden
    with pytest.raises(MissingExtraError) as info:
        registry.load_backend(backend)
    assert (
        str(info.value) == f"backend {backend!r} needs {', '.join(hidden)}; install it with: {line}"
    )
    # the same error when the choice comes from configuration
    with pytest.raises(MissingExtraError, match=line.replace("[", r"\[").replace("]", r"\]")):
        resolve_backend(settings=_settings(project, TOOLSEARCH_BACKEND=backend))


def test_default_skips_backends_that_are_not_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(config, "DEFAULT_BACKEND_PREFERENCE", ("embedding", "nope", "keyword"))
    assert default_backend_name() == "embedding"
    _hide_modules(monkeypatch, "sentence_transformers")
    assert default_backend_name() == "keyword"
    monkeypatch.setattr(config, "DEFAULT_BACKEND_PREFERENCE", ("embedding",))
    assert default_backend_name() == "keyword"  # the core backend needs nothing


def test_preference_lists_only_registered_backends() -> None:
    assert DEFAULT_BACKEND_PREFERENCE
    assert set(DEFAULT_BACKEND_PREFERENCE) <= set(registry.available_backends())
    assert DEFAULT_BACKEND_PREFERENCE[-1] == "keyword"  # always installed: the last resort


REMOTE_DATABASE = """\
[tool.toolsearch]
backend = "postgres"
[tool.toolsearch.backends.postgres]
url = "postgresql://me:pw@db.example.com:5432/tools"
"""


def test_a_found_config_file_cannot_send_the_catalogue_to_a_remote_database(
    project: Path,
) -> None:
    (project / "pyproject.toml").write_text(REMOTE_DATABASE)
    settings = _settings(project / "src")
    with pytest.raises(ConfigError) as refused:
        config.resolve_backend(settings=settings)
    message = str(refused.value)
    assert str(project / "pyproject.toml") in message and "db.example.com:5432" in message
    assert "me:pw@" not in message  # no credentials in the message
    assert "TOOLSEARCH_ALLOW_CONFIG_DATABASE=1" in message
    # a hybrid member inheriting the table, or member_options naming it, is refused too
    hybrid = {"members": ["bm25", "postgres"]}
    with pytest.raises(ConfigError, match="remote database url"):
        settings.build_options("hybrid", hybrid)
    nested = {"member_options": {"pg": {"url": "postgresql://me:pw@db.example.com:5432/tools"}}}
    with pytest.raises(ConfigError, match="remote database url"):
        settings.build_options("hybrid", nested)


def test_a_remote_database_url_the_user_gave_is_used(project: Path) -> None:
    (project / "pyproject.toml").write_text(REMOTE_DATABASE)
    url = "postgresql://me:pw@db.example.com:5432/tools"
    allowed = _settings(project, TOOLSEARCH_ALLOW_CONFIG_DATABASE="1")
    assert allowed.build_options("postgres")["url"] == url
    from_env = _settings(project, TOOLSEARCH_BACKEND_OPTIONS=json.dumps({"url": url + "2"}))
    assert from_env.build_options("postgres")["url"] == url + "2"
    found = _settings(project)
    assert found.build_options("postgres", {"url": url + "3"})["url"] == url + "3"  # code


@pytest.mark.parametrize(
    ("url", "local"),
    [
        ("postgresql://me@localhost/tools", True),
        ("postgresql://me@127.0.0.1:5433/tools", True),
        ("postgresql://me@[::1]/tools", True),
        ("postgresql:///tools?host=/run/postgresql", True),
        ("postgresql:///tools", True),
        ("host=/tmp dbname=tools", True),
        ("dbname=tools", True),
        ("postgresql://me@db.example.com/tools", False),
        ("postgresql://me@localhost,db.example.com/tools", False),
        ("postgresql:///tools?host=db.example.com", False),
        ("host=10.0.0.5 dbname=tools", False),
    ],
)
def test_local_databases_are_told_from_remote_ones(url: str, local: bool) -> None:
    assert config.is_local_database(url) is local


def test_a_local_database_url_from_a_found_file_is_used(project: Path) -> None:
    (project / "toolsearch.toml").write_text(
        'backend = "postgres"\n[backends.postgres]\nurl = "postgresql://me@localhost/tools"\n'
    )
    assert _settings(project).build_options("postgres")["url"].endswith("@localhost/tools")
