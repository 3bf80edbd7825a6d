"""Progress reporting for long benchmark work, decoupled from any terminal library.

The harness reports through the small :class:`Progress` protocol; the library default,
:class:`NoProgress`, shows nothing (library code never prints). The CLI plugs in
:class:`RichProgress`, which draws transient rich bars on a terminal, and :class:`LineProgress`
when stderr is not a terminal (a CI log, a file): one plain line when a stage starts and one
when it ends, with its count and the elapsed time, so a long job is never silent.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any, Protocol, TextIO, runtime_checkable

__all__ = ["Advance", "LineProgress", "NoProgress", "Progress", "RichProgress"]

#: Called with how many units of a task were just completed.
Advance = Callable[[int], None]


@runtime_checkable
class Progress(Protocol):
    """Something that can show a task's progress (``total`` None = unknown length)."""

    def task(self, description: str, total: int | None = None) -> AbstractContextManager[Advance]:
        """A context for one task; the value is the function to call as units complete."""
        ...


def _ignore(_: int) -> None:
    return None


class NoProgress:
    """Shows nothing."""

    @contextmanager
    def task(self, description: str, total: int | None = None) -> Iterator[Advance]:
        yield _ignore


class RichProgress:
    """A transient rich progress bar (or a spinner for unknown lengths) per task."""

    def __init__(self, console: Any) -> None:
        self.console = console

    @contextmanager
    def task(self, description: str, total: int | None = None) -> Iterator[Advance]:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            SpinnerColumn,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )
        from rich.progress import Progress as _RichProgress

        columns: list[Any] = [SpinnerColumn(), TextColumn("{task.description}")]
        if total is not None:
            columns += [BarColumn(), MofNCompleteColumn(), TimeRemainingColumn()]
        else:
            columns.append(TimeElapsedColumn())
        with _RichProgress(*columns, console=self.console, transient=True) as bar:
            task_id = bar.add_task(description, total=total)

            def advance(n: int) -> None:
                bar.advance(task_id, n)

            yield advance


class LineProgress:
    """Plain lines on a stream: ``[  12.3 s] start: <stage> (741)`` and ``[  25.0 s] done:
    <stage>: 741/741 in 12.7 s``; times are since this object was made (the job's start)."""

    def __init__(self, stream: TextIO, clock: Callable[[], float] = time.perf_counter) -> None:
        self.stream = stream
        self.clock = clock
        self.started = clock()

    def _line(self, text: str) -> None:
        self.stream.write(f"[{self.clock() - self.started:7.1f} s] {text}\n")
        self.stream.flush()

    @contextmanager
    def task(self, description: str, total: int | None = None) -> Iterator[Advance]:
        count = 0

        def advance(n: int) -> None:
            nonlocal count
            count += n

        begin = self.clock()
        self._line(f"start: {description}" + (f" ({total})" if total is not None else ""))
        yield advance
        done = f"{count}/{total}" if total is not None else "finished"
        self._line(f"done: {description}: {done} in {self.clock() - begin:.1f} s")
