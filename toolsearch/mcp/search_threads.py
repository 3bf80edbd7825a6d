"""Threads of their own that run a hub's searches behind the event loop, at a lower CPU
priority (docs/concurrency.md, "Searches off the event loop").

Their own threads, not anyio's shared worker pool: an unprivileged thread can lower its
priority but never raise it back, so a pooled thread once used for a search would run
whatever it was given next at the searches' priority — an index update among them, which
holds the engine's write lock while every search waits for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

T = TypeVar("T")

#: What a thread takes from the queue: a call and the future of its result; None stops it.
_Job = tuple[Callable[[], Any], "Future[Any]"] | None


class SearchThreads:
    """At most ``size`` daemon threads, started as work arrives, each ``nice`` steps nicer
    than the process (Linux schedules every thread on its own). Calls wait in a queue for a
    free thread without blocking the event loop."""

    def __init__(self, size: int, nice: int) -> None:
        self.size, self.nice = size, nice
        self._jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._idle = 0  # threads waiting for a job
        self._queued = 0  # jobs no thread has taken yet
        self.closed = False

    async def run(self, call: Callable[[], T]) -> T:
        """``call()``'s result, computed in one of the threads. A cancelled caller leaves a
        call that has started to finish on its own; one still queued never starts."""
        future: Future[T] = Future()
        with self._lock:
            if self.closed:
                raise RuntimeError("the hub's search threads are closed")
            self._queued += 1
            if self._queued > self._idle and len(self._threads) < self.size:
                self._start()
            self._jobs.put((call, future))
        return await asyncio.wrap_future(future)

    def close(self) -> None:
        """Stop every thread once its current call returns; queued calls are cancelled."""
        with self._lock:
            self.closed = True
            for _ in self._threads:
                self._jobs.put(None)

    def _start(self) -> None:
        name = f"toolsearch-search-{len(self._threads)}"
        thread = threading.Thread(target=self._work, name=name, daemon=True)
        self._threads.append(thread)
        self._idle += 1
        thread.start()

    def _work(self) -> None:
        lower_priority(self.nice)
        while (job := self._jobs.get()) is not None:
            call, future = job
            with self._lock:
                self._idle -= 1
                self._queued -= 1
            if self.closed:
                future.cancel()
            elif future.set_running_or_notify_cancel():
                try:
                    future.set_result(call())
                except BaseException as exc:  # handed to the awaiting caller
                    future.set_exception(exc)
            with self._lock:
                self._idle += 1


def lower_priority(nice: int) -> None:
    """Make the calling thread ``nice`` steps nicer than its process (capped at 19), where
    the platform has per-thread priorities."""
    tid = threading.get_native_id()
    with contextlib.suppress(AttributeError, OSError):
        lower = min(19, os.getpriority(os.PRIO_PROCESS, os.getpid()) + nice)
        if os.getpriority(os.PRIO_PROCESS, tid) < lower:
            os.setpriority(os.PRIO_PROCESS, tid, lower)
