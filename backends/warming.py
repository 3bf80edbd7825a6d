"""Background updates for a slow hybrid member (docs/speed.md, "Gateway and a cold cache").

A member whose class says ``warms = True`` (the embedding backend: indexing may mean encoding
every tool) can have its ``index``/``upsert``/``remove`` calls run in order on one worker
thread. Until the queue is empty the member is *warming* and the hybrid ranks without it;
when the worker fails the member is *failed* (logged, with the reason) and stays out. The
member is never searched while the worker touches it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

__all__ = ["BackgroundUpdates"]

logger = logging.getLogger(__name__)


class BackgroundUpdates:
    """Runs one member's updates on a worker thread; ``state`` says whether it can rank."""

    def __init__(self, member: str) -> None:
        self.member = member
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"warm-{member}")
        self._lock = threading.Lock()
        self._pending = 0
        self._error: str | None = None
        self._started: float | None = None

    @property
    def state(self) -> str:
        """``ready``, ``warming`` or ``failed: <reason>``."""
        with self._lock:
            if self._error is not None:
                return f"failed: {self._error}"
            return "warming" if self._pending else "ready"

    @property
    def ready(self) -> bool:
        """True when the member's index is complete and may be searched."""
        return self.state == "ready"

    def submit(self, update: Callable[[], None]) -> Future[None]:
        """Queue ``update`` (runs after every update queued before it)."""
        with self._lock:
            if self._pending == 0:
                self._started = time.perf_counter()
                logger.info("hybrid member %s warming in the background", self.member)
            self._pending += 1
        return self._pool.submit(self._run, update)

    def _run(self, update: Callable[[], None]) -> None:
        try:
            update()
        except Exception as exc:  # a failed member must not take the others down
            logger.error("hybrid member %s failed while warming: %s", self.member, exc)
            with self._lock:
                self._error = f"{type(exc).__name__}: {exc}"
        finally:
            with self._lock:
                self._pending -= 1
                done = self._pending == 0 and self._error is None
                took = time.perf_counter() - (self._started or time.perf_counter())
            if done:
                logger.info("hybrid member %s ready after %.1f s", self.member, took)

    def wait(self, timeout: float | None = None) -> bool:
        """Block until queued updates are done (or ``timeout`` s passed); True when ready."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            with self._lock:
                if self._pending == 0:
                    return self._error is None
            if deadline is not None and time.monotonic() >= deadline:
                return False
            time.sleep(0.01)

    def close(self) -> None:
        """Stop accepting updates; queued ones still finish."""
        self._pool.shutdown(wait=False)
