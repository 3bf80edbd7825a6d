"""Importing ranx lazily and quietly (it is heavy and compiles with numba on first use)."""

from __future__ import annotations

import signal
import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from toolsearch.errors import MissingExtraError

__all__ = ["import_ranx", "interrupt_kept", "quiet"]


def import_ranx() -> Any:
    """The ranx module, or :class:`MissingExtraError` naming the ``bench`` extra."""
    try:
        import ranx
    except ImportError as exc:
        raise MissingExtraError("the benchmark harness", "bench", [exc.name or "ranx"]) from exc
    return ranx


@contextmanager
def quiet() -> Iterator[None]:
    """Silence numba's compile-time type-safety notes (they are about ranx's internals, not
    about the caller's data), and keep a Ctrl-C (:func:`interrupt_kept`)."""
    with warnings.catch_warnings(), interrupt_kept():
        try:
            from numba.core.errors import NumbaWarning
        except ImportError:  # pragma: no cover - numba is a ranx dependency
            pass
        else:
            warnings.simplefilter("ignore", NumbaWarning)
        yield


@contextmanager
def interrupt_kept() -> Iterator[None]:
    """A Ctrl-C that arrives while numba compiles may be raised inside an llvmlite callback,
    which swallows it (an "Exception ignored" traceback) and carries on. Here it is raised
    again every 0.1 s until it gets through, and once more after the block if it never did,
    so the command stops. Only in the main thread and over Python's own SIGINT handler
    (another one is left alone)."""
    if (
        threading.current_thread() is not threading.main_thread()
        or signal.getsignal(signal.SIGINT) is not signal.default_int_handler
    ):
        yield
        return
    heard: list[int] = []
    over = threading.Event()

    def again(main: int) -> None:
        while not over.wait(0.1):
            signal.pthread_kill(main, signal.SIGINT)

    def on_sigint(signum: int, frame: object) -> None:
        if not heard:
            main = threading.get_ident()
            threading.Thread(target=again, args=(main,), name="interrupt", daemon=True).start()
        heard.append(signum)
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, on_sigint)
    try:
        yield
    finally:
        over.set()
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if heard:
        raise KeyboardInterrupt
