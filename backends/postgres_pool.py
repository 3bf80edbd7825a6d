"""The ``postgres`` backend's connection pool, replaced by a fresh one when the server is back.

``psycopg_pool`` reconnects a pool whose connections broke with exponential backoff (1, 2, 4,
8 s...), so after a 15 s outage its next attempt may come about 15 s after the server accepts
connections again, and every operation meanwhile waited for a pooled connection before
falling back to a direct one: a multi-step search, several rankings, took 5.4 s to answer
after a 15 s outage. Here a pool that failed is marked down: operations go straight to a
direct connection, and the first that succeeds replaces the pool with a new one, which
connects at once (the old one is closed in the background, its connections in use closed
when returned). docs/postgres.md, "Connections and outages".
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import psycopg
    from psycopg_pool import ConnectionPool

__all__ = ["RecoveringPool"]


class RecoveringPool:
    """A ``psycopg_pool`` pool made by ``factory``; :meth:`failed` marks it down and
    :meth:`server_back` replaces a pool that is down."""

    def __init__(self, factory: Callable[[], ConnectionPool]) -> None:
        self._factory = factory
        self._lock = threading.Lock()
        self._pool = factory()
        self._down = False
        self._closed = False
        #: How many times the pool was replaced (for tests and reports).
        self.replaced = 0

    @property
    def down(self) -> bool:
        """Whether the pool failed since it was made: operations should connect directly."""
        return self._down

    @contextlib.contextmanager
    def connection(self, timeout: float) -> Iterator[psycopg.Connection[Any]]:
        """A pooled connection, waiting at most ``timeout`` seconds."""
        with self._pool.connection(timeout=timeout) as conn:
            yield conn

    def failed(self) -> None:
        """A pooled operation lost its connection or waited in vain: the server went away."""
        self._down = True

    def server_back(self) -> None:
        """A direct connection worked: if the pool is down, put a fresh one in its place."""
        with self._lock:
            if not self._down or self._closed:  # a thread still working after close()
                return
            old, self._pool = self._pool, self._factory()
            self._down = False
            self.replaced += 1
        threading.Thread(target=old.close, name="toolsearch-pool-close", daemon=True).start()

    def close(self) -> None:
        """Close the pool; none is made after this."""
        with self._lock:
            self._closed = True
            self._pool.close()
