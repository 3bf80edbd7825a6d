"""Progress reporting for long benchmark work, decoupled from any terminal library.

The harness reports through the small :class:`Progress` protocol; the library default,
:class:`NoProgress`, shows nothing (library code never prints). The CLI plugs in
:class:`RichProgress`, which draws transient rich bars on a terminal.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any, Protocol, runtime_checkable

__all__ = ["Advance", "NoProgress", "Progress", "RichProgress"]

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
