"""The ``toolsearch`` command: a thin shell over the library.

Each subcommand lives in its own module with ``register(subparsers)``; the modules named in
:data:`COMMANDS` are imported lazily enough that a missing optional extra only affects the
command that needs it. The configuration is checked once, the same way, before any command
runs (:func:`toolsearch.config.check_settings`). One-time slow work the library announces (an
embedding model's ONNX export, encoding a catalogue: the ``toolsearch.notice`` logger) is
printed on stderr as it starts, and so is the engine's warning of a search over a pool
without deferred tools. Library errors become one-line messages and exit status 2;
Ctrl-C becomes one line and exit status 130 (128 + SIGINT), as shells expect.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from toolsearch.backends.embedding_cache import NOTICE_LOGGER
from toolsearch.errors import ToolSearchError

__all__ = ["COMMANDS", "build_parser", "main", "show_notices"]

#: Subcommand modules, in the order ``--help`` lists them.
COMMANDS: tuple[str, ...] = (
    "search",
    "request",
    "demo",
    "bench",
    "train",
    "dataset",
    "serve",
    "index",
    "backends",
)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every subcommand registered."""
    from toolsearch import __version__

    parser = argparse.ArgumentParser(
        prog="toolsearch",
        description="Dynamic tool loading for agent loops: search deferred tools, "
        "inspect requests, benchmark backends.",
    )
    parser.add_argument("--version", action="version", version=f"toolsearch {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        try:
            module = importlib.import_module(f"toolsearch.cli.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"toolsearch.cli.{name}":
                raise
            continue  # a subcommand whose module is not written yet
        module.register(subparsers)
    return parser


#: The exit status after Ctrl-C.
INTERRUPTED = 130


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``toolsearch`` script; returns the exit status."""
    try:
        return _run(argv)
    except KeyboardInterrupt:
        # whatever was interrupted already lost nothing: a command writes its outputs whole
        print("toolsearch: interrupted", file=sys.stderr)
        return INTERRUPTED


class _StderrNotices(logging.Handler):
    """Writes each notice as one ``toolsearch: ...`` line to the current stderr."""

    def emit(self, record: logging.LogRecord) -> None:
        print(f"toolsearch: {record.getMessage()}", file=sys.stderr, flush=True)


#: Loggers whose records the command prints as ``toolsearch: ...`` lines, and from which level:
#: notices of one-time slow work, and the engine's warning of a search that cannot find anything.
SHOWN_LOGGERS = {NOTICE_LOGGER: logging.INFO, "toolsearch.engine": logging.WARNING}


@contextmanager
def show_notices() -> Iterator[None]:
    """Print the library's notices and warnings (:data:`SHOWN_LOGGERS`) on stderr while a
    command runs.

    Each logger is put back as it was afterwards: ``main()`` called in a process that logs on
    its own (an application, a test run) leaves neither a handler nor a changed propagation
    behind, so its records are not printed twice nor hidden from its own handlers.
    """
    loggers = [logging.getLogger(name) for name in SHOWN_LOGGERS]
    if any(isinstance(h, _StderrNotices) for h in loggers[0].handlers):
        yield  # already shown by an enclosing call
        return
    saved = [(logger, logger.level, logger.propagate, _StderrNotices()) for logger in loggers]
    for logger, _, _, handler in saved:
        logger.addHandler(handler)
        logger.setLevel(SHOWN_LOGGERS[logger.name])
        logger.propagate = False
    try:
        yield
    finally:
        for logger, level, propagate, handler in saved:
            logger.removeHandler(handler)
            logger.setLevel(level)
            logger.propagate = propagate


def _run(argv: Sequence[str] | None) -> int:
    from toolsearch.config import check_settings, load_settings

    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        with show_notices():
            check_settings(load_settings())
            status: int = args.func(args)
    except ToolSearchError as exc:
        print(f"toolsearch {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0
    return status


if __name__ == "__main__":
    sys.exit(main())
