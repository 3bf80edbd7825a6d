"""Config mistakes get messages that name the file and the fix, not a traceback-shaped one."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from toolsearch.agent.mode import ModeSettings
from toolsearch.bench._ranx import import_ranx
from toolsearch.config import check_settings, load_settings, resolve_backend
from toolsearch.errors import BackendError, ConfigError, MissingExtraError
from toolsearch.registry import backend_options, load_backend


def _settings(tmp_path: Path, text: str) -> object:
    (tmp_path / "toolsearch.toml").write_text(text, encoding="utf-8")
    return load_settings(cwd=tmp_path, env={})


def test_unknown_backend_option_names_the_valid_ones_and_the_file(tmp_path: Path) -> None:
    settings = _settings(tmp_path, "[backends.keyword]\nfoo = 1\n")
    with pytest.raises(BackendError) as info:
        resolve_backend("keyword", settings=settings)  # type: ignore[arg-type]
    message = str(info.value)
    assert (
        "backend 'keyword' rejected options ['foo']: no such option; valid options: none" in message
    )
    assert str(tmp_path / "toolsearch.toml") in message and "__init__" not in message


def test_unknown_option_of_a_backend_with_options_lists_them() -> None:
    with pytest.raises(
        BackendError, match=r"\['kk'\]: no such option; valid options: members, k, "
    ):
        load_backend("hybrid", kk=3)


def test_a_backend_taking_any_keyword_is_not_second_guessed() -> None:
    class Open:
        def __init__(self, path: str = "", **extra: object) -> None:
            self.extra = extra

    class Closed:
        def __init__(self, path: str = "", *, depth: int = 1) -> None:
            self.path, self.depth = path, depth

    assert backend_options(Open) is None
    assert backend_options(Closed) == ("path", "depth")


@pytest.mark.parametrize(
    "text", ["[backend.bm25]\nk1 = 1\n", 'backend = "bm25"\n[backend.bm25]\nk1 = 1\n']
)
def test_singular_backend_table_points_at_backends(tmp_path: Path, text: str) -> None:
    with pytest.raises(ConfigError, match=r"\[backends\.bm25\] \(plural\)") as info:
        _settings(tmp_path, text)
    assert str(tmp_path / "toolsearch.toml") in str(info.value)


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("[mode]\nfoo = 1\n", "unknown setting 'foo'"),
        ("[mode]\nenable_tool_search = [1]\n", "'enable_tool_search' must be a string"),
        ("[mode]\ncontext_window = 0\n", "'context_window' must be at least 1"),
    ],
)
def test_mode_errors_name_the_file(tmp_path: Path, text: str, error: str) -> None:
    settings = _settings(tmp_path, text)
    with pytest.raises(ConfigError, match=error) as info:
        ModeSettings.load(settings=settings, env={})  # type: ignore[arg-type]
    assert str(info.value).startswith(f"{tmp_path / 'toolsearch.toml'} [mode]")


def test_missing_bench_extra_is_not_called_a_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ranx", None)
    with pytest.raises(MissingExtraError) as info:
        import_ranx()
    assert str(info.value) == (
        "the benchmark harness needs ranx; install it with: pip install 'toolsearch[bench]'"
    )


def test_mcp_config_errors_use_the_located_error_base() -> None:
    from toolsearch.errors import LocatedError
    from toolsearch.mcp.config import McpConfigError

    error = McpConfigError("must be a list", path="mcp.json", server="notes", field="args")
    assert isinstance(error, LocatedError) and isinstance(error, ConfigError)
    assert str(error) == "mcp.json, server 'notes', field 'args': must be a list"
    assert (error.path, error.server, error.field) == ("mcp.json", "notes", "args")


def _pyproject(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "pyproject.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_misspelt_hybrid_member_is_called_a_member(tmp_path: Path) -> None:
    from toolsearch.errors import UnknownBackendError

    for file, text in [
        ("toolsearch.toml", 'backend = "hybrid"\n[backends.hybrid]\n'),
        (
            "pyproject.toml",
            '[tool.toolsearch]\nbackend = "hybrid"\n[tool.toolsearch.backends.hybrid]\n',
        ),
    ]:
        folder = tmp_path / file.split(".")[0]
        folder.mkdir()
        (folder / file).write_text(text + "members = { bm25 = 1.0, embeding = 1.0 }\n")
        with pytest.raises(UnknownBackendError) as info:
            resolve_backend(settings=load_settings(folder, env={}))
        message = str(info.value)
        assert "unknown backend 'embeding'" in message
        assert "backend set by" not in message
        table = (
            "[backends.hybrid]"
            if file == "toolsearch.toml"
            else "[tool.toolsearch.backends.hybrid]"
        )
        assert message.endswith(
            f"(a member of the hybrid backend, listed in {folder / file} {table})"
        )


def test_a_pyproject_setting_is_named_by_its_own_table(tmp_path: Path) -> None:
    path = _pyproject(tmp_path, "[tool.toolsearch.mode]\nfoo = 1\n")
    with pytest.raises(ConfigError) as info:
        check_settings(load_settings(tmp_path, env={}))
    assert str(info.value).startswith(f"{path} [tool.toolsearch.mode]: unknown setting 'foo'")
    path.write_text("[tool.toolsearch.backends.embeding]\nmodel = 'x'\n", encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        check_settings(load_settings(tmp_path, env={}))
    assert str(info.value).startswith(
        f"{path} [tool.toolsearch.backends.embeding] names no registered backend"
    )
    assert "toolsearch.toml" not in str(info.value)
