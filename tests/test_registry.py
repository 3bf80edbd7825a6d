"""The backend registry: entry points, unknown names, missing extras."""

from __future__ import annotations

import pytest

from toolsearch import registry
from toolsearch.backends.keyword import KeywordBackend
from toolsearch.errors import BackendError, MissingExtraError, UnknownBackendError


def test_project_backends_are_registered_through_entry_points() -> None:
    assert {"keyword", "bm25", "fts5", "embedding", "hybrid"} <= set(registry.available_backends())
    assert isinstance(registry.load_backend("keyword"), KeywordBackend)


def test_unknown_backend_lists_the_available_ones() -> None:
    with pytest.raises(UnknownBackendError) as info:
        registry.load_backend("bm52")
    message = str(info.value)
    assert message.startswith("unknown backend 'bm52'; available: ")
    for name in registry.available_backends():
        assert name in message


def test_missing_extra_names_the_pip_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(KeywordBackend, "requires", ("surely_not_installed_module",), raising=False)
    monkeypatch.setattr(KeywordBackend, "extra", "demo", raising=False)
    info = registry.backend_info("keyword")
    assert not info.installed and info.install_command == "pip install 'toolsearch[demo]'"
    with pytest.raises(MissingExtraError, match=r"pip install 'toolsearch\[demo\]'"):
        registry.load_backend("keyword")


def test_bad_options_are_a_backend_error() -> None:
    with pytest.raises(BackendError, match="rejected options"):
        registry.load_backend("keyword", nonsense=1)
